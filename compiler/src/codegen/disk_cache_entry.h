#pragma once
/** The disk cache's pieces below the key -> entry protocol (codegen/disk_cache.cpp): an entry's
 * files, its sidecar, loading and validating it, eviction and the process's counters.
 *
 * In-use protocol: a process that loads an entry keeps a shared flock on its .so for as long as
 * the library is loaded (the descriptor disk::Library holds); eviction takes the entry's build
 * lock and an exclusive flock on the .so, both without waiting, and skips the entry when either
 * is held. A load marks the entry used by setting the .so's modification time. */
#include <cstdint>
#include <memory>
#include <string>

#include "codegen/disk_cache.h"

namespace tbex::disk {

/** The files of entry `key` under the cache root `root`. */
struct Paths {
  std::string dir, so, json, lock;
};
Paths paths_of(const std::string& root, const std::string& key);

/** The kernel function an entry's .so defines. */
std::string fn_name_of(const std::string& key);

/** <key>.json: the key fields, the .so's size and sha256, when and how it was built. */
std::string sidecar_text(const std::string& key, const std::string& fn, const Fields& fields,
                         int64_t so_size, const std::string& so_sha256, double compile_ms);

/** The entry if its sidecar matches `key` and the .so's size and sha256, and it loads; else
 * nullptr and `why`. The returned library holds the entry's shared (in-use) lock, and the entry
 * is marked used. */
std::shared_ptr<Library> load_entry(const std::string& key, const Paths& p, std::string& why);

/** What this process's counters count (tbex::CacheStats). */
enum class Event { kHit, kCompile, kRebuild, kFallback, kEviction };
void count(Event e);

/** A TBEX_LOG=cache line. */
void log_cache(const std::string& line);

/** Evicts least recently used entries while the cache exceeds TBEX_CACHE_MAX_MB (no-op when
 * the knob is 0); called after publishing an entry. */
void enforce_cap();

}  // namespace tbex::disk
