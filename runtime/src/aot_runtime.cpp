/** Routes the Halide runtime's parallel loops to tbex's pool, and its allocations to tbex's
 * scratch cache (tbex/scratch.h), for AOT kernels, as the JIT does per call.
 *
 * Declares the Halide runtime entries it needs itself (no Halide header). Lives in its own
 * library, linked only by AOT users: the JIT sets its handlers per call instead, and libHalide has
 * its own halide_set_custom_do_par_for that this must never replace. */
#include "tbex/aot_runtime.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "tbex/amx.h"
#include "tbex/scratch.h"
#include "tbex/thread_pool.h"

extern "C" {
typedef int (*tbex_halide_task_t)(void* user_context, int task_number, uint8_t* closure);
typedef int (*tbex_halide_do_par_for_t)(void*, tbex_halide_task_t, int, int, uint8_t*);
tbex_halide_do_par_for_t halide_set_custom_do_par_for(tbex_halide_do_par_for_t do_par_for);
typedef void* (*tbex_halide_malloc_t)(void* user_context, size_t bytes);
typedef void (*tbex_halide_free_t)(void* user_context, void* ptr);
tbex_halide_malloc_t halide_set_custom_malloc(tbex_halide_malloc_t user_malloc);
tbex_halide_free_t halide_set_custom_free(tbex_halide_free_t user_free);
}

namespace {

int pool_do_par_for(void* user_context, tbex_halide_task_t f, int min, int extent, uint8_t* closure) {
  return tbex::parallel_for(user_context, f, min, extent, closure);
}

/** The blocks handed out through the Halide runtime, so a block the runtime's previous allocator
 * made (a program's own Halide pipelines sharing this runtime, called before the first tbex
 * kernel) goes back to that allocator's free. Halide's default malloc returns large blocks to
 * the OS on every free: a kernel staging a 138 KB chunk per iteration on 2 threads paid an mmap,
 * page faults and a munmap each time (e1 dW f16 [nt=8,kwt=3,ch=4,db=4] on Zen 4, 2 threads:
 * 4.04-4.15 ms, 2.91-3.11 with glibc's thresholds raised; the JIT's kernels use the cache). */
struct Owned {
  std::mutex mu;
  std::unordered_set<void*> blocks;
  tbex_halide_free_t previous_free = nullptr;
};

Owned& owned() {
  static Owned* o = new Owned;  // never destroyed: kernels may free during static destruction
  return *o;
}

void* aot_malloc(void*, size_t bytes) {
  void* p = tbex::scratch_alloc(bytes);
  if (p) {
    Owned& o = owned();
    std::lock_guard<std::mutex> l(o.mu);
    o.blocks.insert(p);
  }
  return p;
}

void aot_free(void* user_context, void* p) {
  if (!p) return;
  Owned& o = owned();
  {
    std::lock_guard<std::mutex> l(o.mu);
    if (o.blocks.erase(p) == 0) {
      if (o.previous_free) o.previous_free(user_context, p);
      return;
    }
  }
  tbex::scratch_free(p);
}

}  // namespace

extern "C" void tbex_aot_init(void) {
  // Once, whatever the racing first calls: installed twice, the previous free handler would be
  // this library's own.
  static const bool installed = [] {
    halide_set_custom_do_par_for(pool_do_par_for);
    Owned& o = owned();
    o.previous_free = halide_set_custom_free(aot_free);
    halide_set_custom_malloc(aot_malloc);
    return true;
  }();
  (void)installed;
}

extern "C" void tbex_aot_set_num_threads(int n) { tbex::set_num_threads(n); }

extern "C" int tbex_aot_num_threads(void) { return tbex::num_threads(); }

extern "C" int tbex_aot_amx_tiles(void) { return tbex::amx_tiles_permitted() ? 1 : 0; }
