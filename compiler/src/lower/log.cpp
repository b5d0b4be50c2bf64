#include "lower/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tbex::log {

bool enabled(const char* topic) {
  const char* s = std::getenv("TBEX_LOG");
  if (!s || !*s) return false;
  std::string all = std::string(",") + s + ",";
  return all.find(",all,") != std::string::npos ||
         all.find(std::string(",") + topic + ",") != std::string::npos;
}

void print(const char* topic, const std::string& line) {
  std::fprintf(stderr, "[tbex %s] %s\n", topic, line.c_str());
}

}  // namespace tbex::log
