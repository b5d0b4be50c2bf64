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
  /** "auto" (the tuning database's entry for the problem if there is one, else the schedule and
   * tile variant the cost model ranks first: rank_schedules()) or a name from schedule_names(). */
  std::string schedule = "auto";
  /** A tile variant of the named schedule, one of schedule_candidates() (e.g. "nt=4,kwt=3,ch=8"
   * for dw_tiled, "qt=4,ct=4" for dx_tiled / fwd_tiled); "" = the schedule's own choice. An
   * explicit variant wins over the TBEX_DW_TILE / TBEX_DX_TILE / TBEX_FWD_TILE experiments. */
  std::string variant;
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

std::shared_ptr<const Kernel> compile(const Problem& problem, const CompileOptions& options = {});

/** Names of the schedules for an op in registry order (the cost model, not this order, decides
 * "auto"): tbex's own, then Halide's autoschedulers
 * (halide_mullapudi2016, halide_adams2019, halide_li2018: by name only, for comparison; "auto"
 * never picks them), reference last. */
std::vector<std::string> schedule_names(OpKind op);

/** Same without Halide's autoschedulers: the schedules "auto" chooses from, reference last. */
std::vector<std::string> own_schedule_names(OpKind op);

/** The tile variants of schedule `name` worth timing for `problem`, "" (its own choice) first;
 * empty when the schedule has none. UserError if it is unknown or does not apply. */
std::vector<std::string> schedule_candidates(const Problem& problem, const std::string& name);

/** Why each schedule does or does not apply to `problem`, in registry order. */
std::vector<std::pair<std::string, std::string>> explain_schedules(const Problem& problem);

/** One candidate of the analytic cost model's ranking. */
struct RankedChoice {
  std::string schedule, variant;  ///< variant "" = the schedule's own choice
  double ms = 0;                  ///< predicted run time (no compilation, no measurement)
  std::string detail;             ///< the estimate's terms (compute, memory level, passes, ...)
};

/** Every schedule and tile variant "auto" may pick for `problem` at num_threads() on the host,
 * ranked by the cost model, best first: what "auto" compiles when the tuning database has no
 * entry, and the order the tuner times candidates in. */
std::vector<RankedChoice> rank_schedules(const Problem& problem);


}  // namespace tbex
