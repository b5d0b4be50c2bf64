#include "schedules/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "support/files.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/log.h"
#include "tbex/thread_pool.h"

namespace tbex::sched {
namespace {

// Bumped when the suite measures something differently: older files are re-measured.
// 2: the clock from register adds (format 1's immediate adds read 23 GHz on Golden Cove), the
// AMX tile multiply chain and the VDPBF16PS rate. 3: the 512-bit register broadcast. 4: the
// wait before a short run read from DRAM streams. 5: the 4-byte (broadcast) load rate. 6: the
// CPUID signature in the key. 7: rates and bandwidths counted by a clock timed beside each run.
// 8: the VDPBF16PS latency. 9: the VDPBF16PS rate on 24 chains (12 were latency-bound on Zen 5).
// 10: the fastest readings of up to 3 suites (measure_host). 11: the threads' share of their
// cores (thread_share).
constexpr int kFormat = 11;
/** thread_share from which the threads count as on cores of their own (two threads on one
 * core read about 0.5). */
constexpr double kOwnCoresShare = 0.8;
/** other_cores from which the machine's own load explains threads sharing cores. */
constexpr double kOtherLoadCores = 0.1;

/** The value of the first /proc/cpuinfo line starting with `field`. */
std::string cpuinfo(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string isa_flags() {
  static const char* const kFlags[] = {"avx",         "avx2",        "fma",      "f16c",
                                       "avx512f",     "avx512bw",    "avx512vl", "avx512_vnni",
                                       "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"};
  std::istringstream all(" " + cpuinfo("flags") + " ");
  std::map<std::string, bool> have;
  for (std::string f; all >> f;) have[f] = true;
  std::string out;
  for (const char* f : kFlags)
    if (have.count(f)) out += std::string(out.empty() ? "" : " ") + f;
  return out;
}

json::Value rates_json(const WidthRates& w) {
  return {{"fma_per_cycle", w.fma_per_cycle},
          {"fma_latency", w.fma_latency},
          {"loads_per_cycle", w.loads_per_cycle},
          {"bcast_fma_per_cycle", w.bcast_fma_per_cycle},
          {"reg_bcast_fma_per_cycle", w.reg_bcast_fma_per_cycle},
          {"small_loads_per_cycle", w.small_loads_per_cycle}};
}

WidthRates rates_of(const json::Value& v, const std::string& path) {
  WidthRates w;
  w.fma_per_cycle = json::as_number(json::member(v, "fma_per_cycle", path), path);
  w.fma_latency = json::as_number(json::member(v, "fma_latency", path), path);
  w.loads_per_cycle = json::as_number(json::member(v, "loads_per_cycle", path), path);
  w.bcast_fma_per_cycle = json::as_number(json::member(v, "bcast_fma_per_cycle", path), path);
  w.reg_bcast_fma_per_cycle =
      json::as_number(json::member(v, "reg_bcast_fma_per_cycle", path), path);
  w.small_loads_per_cycle = json::as_number(json::member(v, "small_loads_per_cycle", path), path);
  return w;
}

const char* const kLevels[4] = {"L1", "L2", "L3", "DRAM"};

/** A sysfs value: the file's text without its newline ("" when unreadable). */
std::string sysfs(const std::string& path) {
  std::string s = support::read_text(path);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

/** "32K", "512K", "32768K", "1M" (sysfs cache sizes) -> bytes; 0 when not a size. */
int64_t parse_cache_size(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || v <= 0) return 0;
  const char unit = *end;
  return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : unit == 0 ? v : 0;
}

/** CPUs in a sysfs list such as "0-1,4,6-7". */
int count_cpu_list(const std::string& list) {
  int n = 0;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int a = 0, b = 0;
    if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2 && b >= a) n += b - a + 1;
    else if (std::sscanf(part.c_str(), "%d", &a) == 1) n += 1;
  }
  return n;
}

}  // namespace

CacheInfo host_cache(int level) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string lv = sysfs(dir + "level");
    if (lv.empty()) break;
    if (std::atoi(lv.c_str()) != level || sysfs(dir + "type") == "Instruction") continue;
    if (const int64_t bytes = parse_cache_size(sysfs(dir + "size")); bytes > 0)
      return {bytes, std::max(1, count_cpu_list(sysfs(dir + "shared_cpu_list")))};
  }
  if (level < 1 || level > 3) return {};
  const int name = level == 1   ? _SC_LEVEL1_DCACHE_SIZE
                   : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                                : _SC_LEVEL3_CACHE_SIZE;
  const long v = sysconf(name);
  const int cpus = (int)std::max(1u, std::thread::hardware_concurrency());
  return {v > 0 ? int64_t(v) : 0, level == 3 ? cpus : 1};
}

bool host_smt_active() {
  static const bool active = sysfs("/sys/devices/system/cpu/smt/active") == "1";
  return active;
}

bool keeps_calibration(const Calibration& c) {
  return c.threads <= 1 || c.thread_share <= 0 || c.thread_share >= kOwnCoresShare ||
         c.other_cores >= kOtherLoadCores || host_smt_active();
}

namespace {

/** Names c as this host: its model, CPUID signature and ISA flags (what the key is made of). */
void stamp_host(Calibration& c) {
  c.cpu_model = cpuinfo("model name");
  // "model\t": the field "model", not "model name".
  c.cpu_signature = "family " + cpuinfo("cpu family") + " model " + cpuinfo("model\t") +
                    " stepping " + cpuinfo("stepping");
  c.isa = isa_flags();
}

}  // namespace

std::string key_of(const Calibration& c) {
  return c.cpu_model + " | " + c.cpu_signature + " | " + c.isa;
}

std::string host_key() {
  static const std::string key = [] {
    Calibration c;
    stamp_host(c);
    return key_of(c);
  }();
  return key;
}

std::string calibration_path() {
  const std::string db = knobs::get_string("TBEX_TUNING_DB");
  if (!db.empty()) {
    const auto slash = db.rfind('/');
    return (slash == std::string::npos ? std::string(".") : db.substr(0, slash)) + "/machine.json";
  }
  return knobs::cache_dir() + "/machine.json";
}

json::Value to_json(const Calibration& c) {
  json::Value bw1 = json::Value::object(), bw_mt = json::Value::object();
  for (int i = 0; i < 4; ++i) bw1[kLevels[i]] = c.bw1[i], bw_mt[kLevels[i]] = c.bw_mt[i];
  return {{"format", kFormat},
          {"key", key_of(c)},
          {"cpu_model", c.cpu_model},
          {"cpu_signature", c.cpu_signature},
          {"isa", c.isa},
          {"ghz", c.ghz},
          {"avx2_256", rates_json(c.w256)},
          {"avx512_512", rates_json(c.w512)},
          {"threads", c.threads},
          {"read_bytes_per_cycle_1_thread", bw1},
          {"read_bytes_per_cycle_per_core_all_threads", bw_mt},
          {"parallel_for_cycles", c.parallel_for_cycles},
          {"amx_bf16_tile_multiply_cycles", c.tile_multiply_cycles},
          {"avx512_bf16_dot_per_cycle", c.bf16_dot_per_cycle},
          {"avx512_bf16_dot_latency", c.bf16_dot_latency},
          {"dram_run_start_cycles", c.dram_run_start_cycles},
          {"thread_share", c.thread_share},
          {"other_cores", c.other_cores},
          {"seconds", c.seconds}};
}

Calibration calibration_from_json(const json::Value& v, const std::string& path) {
  Calibration c;
  user_check(json::as_int(json::member(v, "format", path), path) == kFormat, code::kValue, path.c_str(),
             path + ": calibration format differs");
  c.cpu_model = json::as_string(json::member(v, "cpu_model", path), path);
  c.cpu_signature = json::as_string(json::member(v, "cpu_signature", path), path);
  c.isa = json::as_string(json::member(v, "isa", path), path);
  c.ghz = json::as_number(json::member(v, "ghz", path), path);
  c.w256 = rates_of(json::member(v, "avx2_256", path), path);
  c.w512 = rates_of(json::member(v, "avx512_512", path), path);
  c.threads = (int)json::as_int(json::member(v, "threads", path), path);
  const auto& bw1 = json::member(v, "read_bytes_per_cycle_1_thread", path);
  const auto& bw_mt = json::member(v, "read_bytes_per_cycle_per_core_all_threads", path);
  for (int i = 0; i < 4; ++i) {
    c.bw1[i] = json::as_number(json::member(bw1, kLevels[i], path), path);
    c.bw_mt[i] = json::as_number(json::member(bw_mt, kLevels[i], path), path);
  }
  c.parallel_for_cycles = json::as_number(json::member(v, "parallel_for_cycles", path), path);
  c.tile_multiply_cycles =
      json::as_number(json::member(v, "amx_bf16_tile_multiply_cycles", path), path);
  c.bf16_dot_per_cycle = json::as_number(json::member(v, "avx512_bf16_dot_per_cycle", path), path);
  c.bf16_dot_latency = json::as_number(json::member(v, "avx512_bf16_dot_latency", path), path);
  c.dram_run_start_cycles = json::as_number(json::member(v, "dram_run_start_cycles", path), path);
  c.thread_share = json::as_number(json::member(v, "thread_share", path), path);
  c.other_cores = json::as_number(json::member(v, "other_cores", path), path);
  c.seconds = json::as_number(json::member(v, "seconds", path), path);
  user_check(c.ghz > 0, code::kValue, path.c_str(), path + ": ghz is not positive");
  return c;
}

namespace {

/** The calibration `path` holds for this host, or false. */
bool read_stored(const std::string& path, Calibration& out) {
  const std::string text = support::read_text(path);
  if (text.empty()) return false;
  try {
    const json::Value v = json::parse(text, path);
    if (json::as_string(json::member(v, "key", path), path) != host_key()) return false;
    out = calibration_from_json(v, path);
    // Measured at another thread count: a VM given more cores, or a suite that read the "all
    // threads" figures at the pool's size then (1 under TBEX_NUM_THREADS=1).
    if (out.threads != max_threads()) {
      if (log::enabled("calibrate"))
        log::print("calibrate", path + " was measured at " + std::to_string(out.threads) +
                                    " threads, this host has " + std::to_string(max_threads()));
      return false;
    }
    // Written where the threads shared cores (by hand, or a suite whose guard this predates).
    if (!keeps_calibration(out)) {
      if (log::enabled("calibrate"))
        log::print("calibrate", path + " was measured while the host ran its threads on shared cores");
      return false;
    }
    return true;
  } catch (const UserError& e) {
    if (log::enabled("calibrate")) log::print("calibrate", path + " unusable (" + e.what() + ")");
    return false;
  }
}

}  // namespace

Calibration load_or_measure(const std::string& path, bool* measured) {
  Calibration c;
  if (measured) *measured = false;
  if (read_stored(path, c)) return c;
  // TBEX_CACHE=0 writes nothing: measured for this process only.
  const bool store = knobs::get_bool("TBEX_CACHE");
  std::string err = store ? support::make_parent_dirs(path) : "TBEX_CACHE=0";
  // One measuring process at a time: two suites sharing the cores would both measure too low.
  std::unique_ptr<support::FileLock> lock;
  if (err.empty()) lock = std::make_unique<support::FileLock>(path + ".lock");
  if (lock && read_stored(path, c)) return c;  // another process measured meanwhile
  c = measure_host();
  stamp_host(c);
  if (measured) *measured = true;
  // Threads that shared cores read every "all threads" figure low (half on two threads): kept
  // for this process, measured again by the next one. Not a storage problem: no warning.
  const std::string shared =
      keeps_calibration(c)
          ? ""
          : "its " + std::to_string(c.threads) + " threads ran at " +
                std::to_string(int(c.thread_share * 100 + 0.5)) +
                "% of a core each with nothing else running (the host shared the cores): measured "
                "again by the next process";
  if (err.empty() && shared.empty()) err = support::write_atomic(path, json::to_text(to_json(c)));
  // Keyed as the kernel cache's fallback: one unwritable directory is one warning.
  if (store && !err.empty())
    log::warn_once("cache-fallback",
                   "the machine calibration cannot be stored (" + err + "): every process measures it "
                   "again (" + std::to_string(int(c.seconds * 1000)) + " ms), and the kernel cache in the same "
                   "directory is likely unusable too. Set TBEX_CACHE_DIR (or TBEX_TUNING_DB) to a writable "
                   "location, or TBEX_CACHE=0 to keep everything in memory without this warning.");
  if (log::enabled("calibrate"))
    log::print("calibrate", "measured in " + std::to_string(c.seconds) + " s, " +
                                (!err.empty()      ? "not stored: " + err
                                 : !shared.empty() ? "not stored: " + shared
                                                   : "stored in " + path));
  return c;
}

const Calibration* host_calibration(bool remeasure, bool* measured) {
  if (measured) *measured = false;
  if (!knobs::get_bool("TBEX_CALIBRATE")) return nullptr;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Calibration>> by_path;
  // Replaced calibrations stay alive: Machine::of reads one after the lock is released.
  static std::vector<std::unique_ptr<Calibration>> retired;
  const std::string path = calibration_path();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = by_path[path];
  if (remeasure) {
    ::unlink(path.c_str());
    if (slot) retired.push_back(std::move(slot));
  }
  if (!slot) slot = std::make_unique<Calibration>(load_or_measure(path, measured));
  return slot.get();
}

}  // namespace tbex::sched
