#include "tbex/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

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
      {"progress", "a line for each compile that takes more than a second, and each tuning "
                   "candidate (on by default when stderr is a terminal)"},
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

void check() { enabled("help"); }

namespace {
std::atomic<void (*)(WarningKind, const std::string&)> warning_sink{nullptr};
}  // namespace

void set_warning_sink(void (*sink)(WarningKind, const std::string&)) { warning_sink.store(sink); }

void warn_once(const std::string& once_key, const std::string& message, WarningKind kind) {
  static std::mutex mu;
  static std::set<std::string> given;
  {
    std::lock_guard<std::mutex> l(mu);
    if (!given.insert(once_key).second) return;
  }
  if (auto sink = warning_sink.load()) sink(kind, message);
  else std::fprintf(stderr, "tbex: warning: %s\n", message.c_str());
}

bool progress_enabled() { return ::isatty(STDERR_FILENO) || enabled("progress"); }

struct SlowNotice::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread waiter;
};

SlowNotice::SlowNotice(std::string line) {
  if (!progress_enabled()) return;
  const long long after_ms = knobs::get_int("TBEX_PROGRESS_MS");
  state_ = new State;
  State* st = state_;
  st->waiter = std::thread([st, line = std::move(line), after_ms] {
    std::unique_lock<std::mutex> l(st->mu);
    if (!st->cv.wait_for(l, std::chrono::milliseconds(after_ms), [st] { return st->done; }))
      std::fprintf(stderr, "tbex: %s\n", line.c_str());
  });
}

SlowNotice::~SlowNotice() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> l(state_->mu);
    state_->done = true;
  }
  state_->cv.notify_all();
  state_->waiter.join();
  delete state_;
}

}  // namespace tbex::log
