/** Routes the Halide runtime's parallel loops to tbex's pool for AOT kernels.
 *
 * Declares the one Halide runtime entry it needs itself (no Halide header). Lives in its own
 * library, linked only by AOT users: the JIT sets its handler per call instead, and libHalide has
 * its own halide_set_custom_do_par_for that this must never replace. */
#include "tbex/aot_runtime.h"

#include <atomic>
#include <cstdint>

#include "tbex/amx.h"
#include "tbex/thread_pool.h"

extern "C" {
typedef int (*tbex_halide_task_t)(void* user_context, int task_number, uint8_t* closure);
typedef int (*tbex_halide_do_par_for_t)(void*, tbex_halide_task_t, int, int, uint8_t*);
tbex_halide_do_par_for_t halide_set_custom_do_par_for(tbex_halide_do_par_for_t do_par_for);
}

namespace {

int pool_do_par_for(void* user_context, tbex_halide_task_t f, int min, int extent, uint8_t* closure) {
  return tbex::parallel_for(user_context, f, min, extent, closure);
}

std::atomic<bool> g_installed{false};

}  // namespace

extern "C" void tbex_aot_init(void) {
  if (g_installed.load(std::memory_order_acquire)) return;
  halide_set_custom_do_par_for(pool_do_par_for);  // idempotent: racing first calls are harmless
  g_installed.store(true, std::memory_order_release);
}

extern "C" void tbex_aot_set_num_threads(int n) { tbex::set_num_threads(n); }

extern "C" int tbex_aot_num_threads(void) { return tbex::num_threads(); }

extern "C" int tbex_aot_amx_tiles(void) { return tbex::amx_tiles_permitted() ? 1 : 0; }
