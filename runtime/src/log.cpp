#include "tbex/log.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>

#include "tbex/knobs.h"

namespace tbex::log {

const std::vector<std::pair<std::string, std::string>>& topics() {
  static const std::vector<std::pair<std::string, std::string>> t{
      {"dispatch", "which schedule and tile variant each kernel uses and why: tuning database, "
                   "the cost model's ranking, the schedules that do not apply"},
      {"lower", "time of each lowering stage and of each compile"},
      {"conv", "time of each step of convolution_backward (packing, kernels, unpacking)"},
      {"cache", "kernel caches: disk-cache hits, misses, builds, evictions; in-process evictions"},
      {"tune", "every candidate the measured tuner times, the winner, the database write"},
      {"calibrate", "the host's machine calibration: measured or read back, and where it is stored"},
      {"all", "every topic"},
      {"help", "print this list once"},
  };
  return t;
}

namespace {

/** The topics of the current TBEX_LOG value, parsed once per distinct value. */
struct Parsed {
  std::string value;
  std::set<std::string> names;
};

void report_once(const std::string& value, const std::set<std::string>& names) {
  static std::mutex mu;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> l(mu);
  for (const std::string& n : names) {
    bool known = false;
    for (const auto& t : topics()) known = known || t.first == n;
    if (n == "help") {
      if (!reported.insert("help").second) continue;
      std::fprintf(stderr, "[tbex log] TBEX_LOG topics (comma-separated):\n");
      for (const auto& t : topics())
        std::fprintf(stderr, "[tbex log]   %-9s %s\n", t.first.c_str(), t.second.c_str());
    } else if (!known && reported.insert(n).second) {
      std::string list;
      for (const auto& t : topics()) list += (list.empty() ? "" : ", ") + t.first;
      std::fprintf(stderr, "[tbex log] unknown TBEX_LOG topic '%s' in '%s' (known: %s)\n",
                   n.c_str(), value.c_str(), list.c_str());
    }
  }
}

}  // namespace

bool enabled(const char* topic) {
  const std::string value = knobs::get_string("TBEX_LOG");
  if (value.empty()) return false;
  thread_local Parsed cached;
  if (cached.value != value) {
    cached.value = value;
    cached.names.clear();
    std::stringstream ss(value);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) cached.names.insert(item);
    report_once(value, cached.names);
  }
  return cached.names.count("all") > 0 || cached.names.count(topic) > 0;
}

void print(const char* topic, const std::string& line) {
  std::fprintf(stderr, "[tbex %s] %s\n", topic, line.c_str());
}

}  // namespace tbex::log
