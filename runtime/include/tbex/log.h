#pragma once
/** TBEX_LOG: comma-separated topics printed to stderr ("help" lists them). */
#include <string>
#include <utility>
#include <vector>

namespace tbex::log {

/** (topic, what it prints), the topics TBEX_LOG knows. */
const std::vector<std::pair<std::string, std::string>>& topics();

/** True when TBEX_LOG names `topic` or "all". An unknown topic in TBEX_LOG is reported once on
 * stderr; "help" prints the topics once. */
bool enabled(const char* topic);

void print(const char* topic, const std::string& line);

}  // namespace tbex::log
