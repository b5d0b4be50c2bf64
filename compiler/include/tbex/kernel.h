#pragma once
/** Compile a Problem to a CPU kernel (JIT) and run it on raw pointers.
 *
 * No Halide or LLVM type appears here: callers need only this header and tbex::compiler. */
#include <memory>
#include <string>
#include <vector>

#include "tbex/problem.h"
#include "tbex/thread_pool.h"

namespace tbex {

/** A view of caller memory. strides are in elements, outermost first; empty means dense.
 * The innermost dimension must be dense (stride 1). */
struct TensorArg {
  const void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DType dtype = DType::kFloat32;
};

struct CompileOptions {
  /** "auto" (the registry's first applicable schedule) or a schedule name from schedule_names(). */
  std::string schedule = "auto";
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const Problem& problem() const = 0;
  virtual const std::string& schedule_name() const = 0;
  /** inputs: dW: {x, dy}; dX: {filter, dy} or {filter, dy, bias}; forward: {x, filter}. Shapes
   * and dtypes are checked against the problem (UserError naming the operand otherwise).
   * Thread-safe. */
  virtual void run(const std::vector<TensorArg>& inputs, const TensorArg& output) const = 0;
  /** Same, for dense buffers laid out as problem() says. */
  void run_dense(const std::vector<const void*>& inputs, void* output) const;
};

std::shared_ptr<const Kernel> compile(const Problem& problem, const CompileOptions& options = {});

/** Names of the schedules for an op, best first, reference last. */
std::vector<std::string> schedule_names(OpKind op);

/** Why each schedule does or does not apply to `problem`, in registry order. */
std::vector<std::pair<std::string, std::string>> explain_schedules(const Problem& problem);


}  // namespace tbex
