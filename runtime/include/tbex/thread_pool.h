#pragma once
/** The worker pool every tbex kernel's parallel loops run on (JIT and AOT alike).
 *
 * One process-wide pool: set_num_threads(n) sizes it (0 = all cores; the TBEX_NUM_THREADS
 * environment variable gives the initial size). The calling thread takes part in the work. */
#include <cstdint>

namespace tbex {

void set_num_threads(int n);
int num_threads();
/** The pool size set_num_threads(0) gives: every core of the machine. */
int max_threads();

/** Runs task(ctx, idx, closure) for idx in [min, min+extent) across the pool; returns the first
 * non-zero task status (0 when all succeed). Nested calls run serially on the calling thread. */
int parallel_for(void* ctx, int (*task)(void* ctx, int idx, uint8_t* closure), int min, int extent,
                 uint8_t* closure);

/** While alive, parallel_for called on this thread runs serially on it (as a nested call does):
 * for a caller that is itself one of several concurrent workers, such as a logical core of the
 * Ascend C launcher, whose kernels would otherwise queue for the one pool. */
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool was_;
};

}  // namespace tbex
