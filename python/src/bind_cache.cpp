/** The on-disk kernel cache as _C sees it: where it is, whether it is on, this process's counts.
 * Entries are listed and cleared in Python (tbex.cache) from their JSON sidecars. */
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
    return d;
  }, "this process's disk-cache outcomes: hits, compiles, rebuilds, fallbacks");
  m.def("clear_kernel_cache", &tbex::clear_kernel_cache,
        "drop this process's in-memory kernels (the next compile goes to the disk cache)");
}

}  // namespace tbex::py
