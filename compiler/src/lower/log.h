#pragma once
/** TBEX_LOG: comma-separated topics ("dispatch", "lower", "all") printed to stderr. */
#include <string>

namespace tbex::log {

bool enabled(const char* topic);
void print(const char* topic, const std::string& line);

}  // namespace tbex::log
