#pragma once
/** Compile a Problem to a CPU kernel (JIT) and run it on raw pointers.
 *
 * No Halide or LLVM type appears here: callers need only this header and tbex::compiler. */
#include <memory>
#include <string>
#include <vector>

#include "tbex/problem.h"
#include "tbex/select.h"
#include "tbex/thread_pool.h"

namespace tbex {

/** A view of caller memory. strides are in elements, outermost first; empty means dense.
 * The innermost dimension must be dense (stride 1). An input with other strides is copied to
 * dense memory before the kernel runs (a performance warning, once per process and input). */
struct TensorArg {
  const void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DType dtype = DType::kFloat32;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const Problem& problem() const = 0;
  virtual const std::string& schedule_name() const = 0;
  /** The tile variant the kernel was compiled with ("" = the schedule's own choice). */
  virtual const std::string& variant() const = 0;
  /** The thread count its schedule was planned for (num_threads() at compile time). run() at
   * another num_threads() runs the same problem and request planned for that count instead
   * (compiled on first use, then cached): set_num_threads after compile takes effect. */
  virtual int threads() const = 0;
  /** inputs: dW: {x, dy}; dX: {filter, dy} or {filter, dy, bias}; forward: {x, filter}. Shapes
   * and dtypes are checked against the problem (UserError naming the operand otherwise).
   * Thread-safe. */
  virtual void run(const std::vector<TensorArg>& inputs, const TensorArg& output) const = 0;
  /** Same, for dense buffers laid out as problem() says. */
  void run_dense(const std::vector<const void*>& inputs, void* output) const;
};

/** Compiles `problem` with the schedule and tile variant select() decides for `options` (tbex/
 * select.h) at num_threads(); with TBEX_TUNE=1, an "auto" request without a tuning database
 * entry is tuned first (tbex/tune.h). Compiled kernels are kept in a bounded in-process cache. */
std::shared_ptr<const Kernel> compile(const Problem& problem, const CompileOptions& options = {});

/** The in-process kernel cache: least recently used kernels are dropped past `capacity`
 * (TBEX_KERNEL_CACHE_CAPACITY; a dropped kernel stays valid for whoever holds it). */
struct KernelCacheStats {
  int64_t hits = 0, misses = 0, evictions = 0;
  int64_t size = 0, capacity = 0;
};
KernelCacheStats kernel_cache_stats();
/** Drops this process's in-memory kernels (kernels already handed out stay valid), so the next
 * compile() of a problem goes to the disk cache again. */
void clear_kernel_cache();

}  // namespace tbex
