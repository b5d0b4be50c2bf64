#pragma once
/** Every tbex setting in one registry: its environment variable, kind, default, meaning and
 * whether it changes generated code. Every read of a TBEX_* variable goes through here, so the
 * documentation (python -m tbex knobs, tbex.knobs) and the cache keys come from one table.
 *
 * A value comes from, in order: a programmatic override (set()), the environment, the default. */
#include <string>
#include <vector>

namespace tbex::knobs {

enum class Kind { kInt, kBool, kString, kPath, kList };

struct Knob {
  const char* name;           ///< the environment variable, e.g. "TBEX_NUM_THREADS"
  Kind kind;
  const char* default_value;  ///< as text; "" = unset
  const char* doc;            ///< one paragraph for the knobs table
  const char* setter;         ///< the programmatic way to set it besides the environment, or ""
  bool affects_codegen;       ///< part of every kernel's cache key when set
};

/** The registry, in documentation order. */
const std::vector<Knob>& all();

/** The registry entry; InternalError for a name that is not registered (a tbex bug). */
const Knob& find(const std::string& name);

/** True when the knob has a value other than its default's absence (override or environment). */
bool is_set(const std::string& name);

/** The value as text: override, else environment, else the default. */
std::string get_string(const std::string& name);

/** The value as an integer; UserError (param = the knob's name) when it is not one. */
long long get_int(const std::string& name);

/** The value as a flag ("1"/"true"/"yes"/"on" or "0"/"false"/"no"/"off"/""); UserError else. */
bool get_bool(const std::string& name);

/** Overrides the environment for this process (thread-safe); unset() removes the override. */
void set(const std::string& name, const std::string& value);
void unset(const std::string& name);

/** "NAME=value;..." of every set knob that affects generated code: part of every kernel cache
 * key, so changing one of them in a process never returns a kernel built under another value. */
std::string codegen_key();

/** The on-disk cache directory (kernels, tuning database): TBEX_CACHE_DIR, else
 * $XDG_CACHE_HOME/tbex, else $HOME/.cache/tbex. */
std::string cache_dir();

}  // namespace tbex::knobs
