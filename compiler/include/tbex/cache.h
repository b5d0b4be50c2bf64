#pragma once
/** The on-disk kernel cache: JIT kernels are compiled to shared objects under cache_dir() and
 * reused across processes (content-addressed; see compiler/src/codegen/disk_cache.h).
 *
 * Knobs (environment, read at each compile): TBEX_CACHE_DIR, TBEX_CACHE=0 (off),
 * TBEX_ALWAYS_COMPILE=1 (ignore existing entries), TBEX_LOG=cache. */
#include <cstdint>
#include <string>

namespace tbex {

/** Counts of this process's disk-cache outcomes since start. */
struct CacheStats {
  int64_t hits = 0;       ///< loaded an existing entry, no compile
  int64_t compiles = 0;   ///< compiled and published an entry (a miss, a rebuild or a forced compile)
  int64_t rebuilds = 0;   ///< of the compiles: an existing entry was invalid (corrupt, truncated)
  int64_t fallbacks = 0;  ///< the disk cache could not be used (no C++ compiler, unwritable dir)
};

CacheStats cache_stats();

/** TBEX_CACHE_DIR, else $XDG_CACHE_HOME/tbex, else ~/.cache/tbex. */
std::string cache_dir();

/** false when TBEX_CACHE=0. */
bool cache_enabled();

/** Drops this process's in-memory compiled kernels (kernels already handed out stay valid), so
 * the next compile() of a problem goes to the disk cache again. */
void clear_kernel_cache();

}  // namespace tbex
