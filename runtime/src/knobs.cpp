#include "tbex/knobs.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>

#include "tbex/errors.h"

namespace tbex::knobs {

const std::vector<Knob>& all() {
  static const std::vector<Knob> k{
      {"TBEX_NUM_THREADS", Kind::kInt, "0",
       "worker threads of compiled kernels (0 = all cores); a kernel built before the count "
       "changes runs as planned for the new count from then on",
       "tbex.set_num_threads / tbex::set_num_threads", false},
      {"TBEX_LOG", Kind::kList, "",
       "comma-separated log topics printed to stderr (TBEX_LOG=help lists them)", "", false},
      {"TBEX_PROGRESS_MS", Kind::kInt, "1000",
       "a compile still running after this many milliseconds prints one progress line (when "
       "stderr is a terminal or TBEX_LOG names progress)", "", false},
      {"TBEX_KERNEL_MAX_ELEMENTS", Kind::kInt, "2147483647",
       "operands with more elements than this run as one kernel per batch slice (the limit of "
       "a kernel's 32-bit indexing; lower it to test the slicing on small problems)", "", true},
      {"TBEX_DUMP_DIR", Kind::kPath, "",
       "write each compiled kernel's lowered Halide loop nest to DIR/<problem>.<schedule>.stmt", "",
       false},
      {"TBEX_CACHE_DIR", Kind::kPath, "",
       "the on-disk kernel cache directory (default $XDG_CACHE_HOME/tbex, else ~/.cache/tbex)",
       "python -m tbex cache list|info|clear|prune", false},
      {"TBEX_CACHE", Kind::kBool, "1",
       "0 turns the disk cache off (kernels are compiled in memory, nothing is written)", "", false},
      {"TBEX_ALWAYS_COMPILE", Kind::kBool, "0",
       "1 ignores existing disk-cache entries: every kernel is recompiled and its entry rewritten",
       "", false},
      {"TBEX_CACHE_MAX_MB", Kind::kInt, "1024",
       "size cap of the disk cache in MiB: least recently used entries are evicted past it "
       "(never one another process holds open); 0 = no cap",
       "python -m tbex cache prune", false},
      {"TBEX_KERNEL_CACHE_CAPACITY", Kind::kInt, "256",
       "compiled kernels kept in memory per process (least recently used evicted first; 0 = "
       "keep none)",
       "tbex.kernel_cache_stats()", false},
      {"TBEX_CC", Kind::kString, "",
       "C compiler for the wrapper of an AOT static library or object (default $CC, else cc)", "",
       false},
      {"TBEX_HALIDE_INCLUDE_DIR", Kind::kPath, "",
       "where the AOT wrapper compile finds HalideRuntime.h (default: the Halide wheel tbex was "
       "built against)",
       "", false},
      {"TBEX_DW_TILE", Kind::kString, "",
       "override dw_tiled's register tile (nt,kwt,ch) where no tile variant is given, for tiling "
       "experiments",
       "", true},
      {"TBEX_DX_TILE", Kind::kString, "",
       "override dx_tiled's register tile (qt,ct) where no tile variant is given", "", true},
      {"TBEX_FWD_TILE", Kind::kString, "",
       "override fwd_tiled's register tile (qt,ct) where no tile variant is given", "", true},
      {"TBEX_TUNE", Kind::kBool, "0",
       "1: every \"auto\" compile of a problem without a tuning database entry tunes it first",
       "dsl.auto_schedule(res, tune=True) / tbex::tune", false},
      {"TBEX_TUNING_DB", Kind::kPath, "",
       "the tuning database file (default <cache dir>/tuning.json), consulted by every \"auto\" "
       "selection",
       "", false},
      {"TBEX_CALIBRATE", Kind::kBool, "1",
       "1: the cost model uses this CPU's measured rates (a < 2 s microbenchmark run once per "
       "machine, stored as machine.json beside the tuning database; with TBEX_CACHE=0 measured per "
       "process, not stored); 0: built-in constants",
       "python -m tbex machine", false},
  };
  return k;
}

namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::string>& overrides() {
  static std::map<std::string, std::string> o;
  return o;
}

/** The raw value and whether anything set it. */
std::pair<std::string, bool> raw(const std::string& name) {
  const Knob& k = find(name);
  {
    std::lock_guard<std::mutex> l(mu());
    auto it = overrides().find(name);
    if (it != overrides().end()) return {it->second, true};
  }
  if (const char* e = std::getenv(name.c_str())) return {e, true};
  return {k.default_value, false};
}

std::string lower(std::string s) {
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

}  // namespace

const Knob& find(const std::string& name) {
  for (const Knob& k : all())
    if (name == k.name) return k;
  throw InternalError("no knob named " + name);
}

bool is_set(const std::string& name) { return raw(name).second; }

std::string get_string(const std::string& name) { return raw(name).first; }

long long get_int(const std::string& name) {
  const std::string s = get_string(name);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  user_check(!s.empty() && end && *end == '\0' && errno == 0, code::kValue, name.c_str(),
             name + "='" + s + "' is not an integer");
  return v;
}

bool get_bool(const std::string& name) {
  const std::string s = lower(get_string(name));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw UserError(code::kValue, name, name + "='" + get_string(name) + "' is not a flag (use 1 or 0)");
}

void set(const std::string& name, const std::string& value) {
  find(name);
  std::lock_guard<std::mutex> l(mu());
  overrides()[name] = value;
}

void unset(const std::string& name) {
  find(name);
  std::lock_guard<std::mutex> l(mu());
  overrides().erase(name);
}

std::string codegen_key() {
  std::string key;
  for (const Knob& k : all()) {
    if (!k.affects_codegen) continue;
    const auto [v, set] = raw(k.name);
    if (set) key += std::string(key.empty() ? "" : ";") + k.name + "=" + v;
  }
  return key;
}

std::string cache_dir() {
  if (std::string d = get_string("TBEX_CACHE_DIR"); !d.empty()) return d;
  // XDG_CACHE_HOME and HOME are the platform's variables, not tbex knobs.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tbex";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/tbex";
}

}  // namespace tbex::knobs
