/** The on-disk kernel cache as _C sees it: where it is, whether it is on, this process's counts,
 * the size cap and pruning. Entries are listed and cleared in Python (tbex.cache) from their
 * JSON sidecars; eviction is C++'s, so Python honours the same in-use locks. */
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "tbex/cache.h"

namespace pyb = pybind11;

namespace tbex::py {

void define_cache(pyb::module_& m) {
  m.def("cache_dir", &tbex::cache_dir,
        "TBEX_CACHE_DIR, else $XDG_CACHE_HOME/tbex, else ~/.cache/tbex");
  m.def("cache_enabled", &tbex::cache_enabled, "false when TBEX_CACHE=0");
  m.def("cache_stats", [] {
    CacheStats s = tbex::cache_stats();
    pyb::dict d;
    d["hits"] = s.hits;
    d["compiles"] = s.compiles;
    d["rebuilds"] = s.rebuilds;
    d["fallbacks"] = s.fallbacks;
    d["evictions"] = s.evictions;
    return d;
  }, "this process's disk-cache outcomes: hits, compiles, rebuilds, fallbacks, evictions");
  m.def("cache_max_bytes", &tbex::cache_max_bytes, "TBEX_CACHE_MAX_MB in bytes (0: no cap)");
  m.def("prune_cache", [](int64_t max_bytes, const std::string& dir) {
    PruneResult r;
    {
      pyb::gil_scoped_release nogil;
      r = tbex::prune_cache(max_bytes, dir);
    }
    pyb::dict d;
    d["evicted"] = r.evicted;
    d["evicted_bytes"] = r.evicted_bytes;
    d["kept"] = r.kept;
    d["kept_bytes"] = r.kept_bytes;
    d["in_use"] = r.in_use;
    return d;
  }, pyb::arg("max_bytes"), pyb::arg("dir") = "",
        "evict least recently used entries until the cache holds at most max_bytes (never one "
        "a process has loaded); dir defaults to cache_dir()");
  m.def("sha256_hex", [](pyb::bytes b) { return tbex::sha256_hex(std::string(b)); },
        "SHA-256 (libcrypto) as the disk cache computes it, hex");
  m.def("clear_kernel_cache", &tbex::clear_kernel_cache,
        "drop this process's in-memory kernels (the next compile goes to the disk cache)");
}

}  // namespace tbex::py
