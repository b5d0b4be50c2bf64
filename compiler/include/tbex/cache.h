#pragma once
/** The on-disk kernel cache: JIT kernels are compiled to shared objects under cache_dir() and
 * reused across processes (content-addressed; see compiler/src/codegen/disk_cache.h).
 *
 * Knobs (read at each compile): TBEX_CACHE_DIR, TBEX_CACHE=0 (off), TBEX_ALWAYS_COMPILE=1
 * (ignore existing entries), TBEX_CACHE_MAX_MB (size cap, least recently used evicted first),
 * TBEX_LOG=cache. */
#include <cstdint>
#include <string>

#include "tbex/kernel.h"  // clear_kernel_cache(): the in-process cache in front of this one

namespace tbex {

/** Counts of this process's disk-cache outcomes since start. */
struct CacheStats {
  int64_t hits = 0;       ///< loaded an existing entry, no compile
  int64_t compiles = 0;   ///< compiled and published an entry (a miss, a rebuild or a forced compile)
  int64_t rebuilds = 0;   ///< of the compiles: an existing entry was invalid (corrupt, truncated)
  int64_t fallbacks = 0;  ///< the disk cache could not be used (no C++ compiler, unwritable dir)
  int64_t evictions = 0;  ///< entries this process removed for the size cap (or prune_cache)
};

CacheStats cache_stats();

/** TBEX_CACHE_DIR, else $XDG_CACHE_HOME/tbex, else ~/.cache/tbex. */
std::string cache_dir();

/** false when TBEX_CACHE=0. */
bool cache_enabled();

/** TBEX_CACHE_MAX_MB in bytes (0: no cap); UserError when the knob is negative. */
int64_t cache_max_bytes();

/** What prune_cache did. Sizes count entries (shared object + sidecar); the Halide runtime
 * objects under runtime/ are shared by every entry and not evicted. */
struct PruneResult {
  int64_t evicted = 0, evicted_bytes = 0;  ///< entries removed and their size
  int64_t kept = 0, kept_bytes = 0;        ///< entries left and their size
  int64_t in_use = 0;  ///< of the kept: skipped because a process has them loaded or is building them
};

/** Evicts entries, least recently used (loaded or built) first, until the entries of `dir`
 * (default cache_dir()) total at most `max_bytes`; 0 evicts every entry not in use. An entry
 * another process (or this one) has loaded or is compiling is never removed. */
PruneResult prune_cache(int64_t max_bytes, const std::string& dir = "");

/** SHA-256 of `bytes` as 64 hex digits: the hash (libcrypto) of cache keys and entry checksums. */
std::string sha256_hex(const std::string& bytes);

}  // namespace tbex
