#pragma once
/** Schedules: how each op's algorithm is tiled, vectorized and parallelized.
 *
 * Where things live (one rule for every schedule): a schedule named X is defined in
 * schedules/X.cpp, and its name starts with its op: dw_* (dW), dx_* (dX), fwd_* (the forward
 * conv); e.g. dx_cout_lanes in dx_cout_lanes.cpp. Entries that serve every op have no op prefix:
 * reference.cpp (the reference schedule of each op) and halide_auto.cpp (Halide's
 * autoschedulers, halide_*). Shared pieces: tile_space.h (tile variants, TBEX_*_TILE knobs,
 * candidate lists), gemm_tile.h (the GEMM register tile of dx_tiled and fwd_tiled), loops.h
 * (Halide loop-nest pieces: staging, register tiles, dW's reduction split), amx_tile.h (the AMX
 * tile register and where the AMX schedules apply), tiling.h (problem arithmetic and
 * applicability rules), cost_model.h. A new schedule: a file by that rule, a
 * factory below, an entry in registry.cpp.
 *
 * Per op, a list of entries; each says why it does or does not apply to a problem (TBEX_LOG=
 * dispatch prints it). "auto" ranks every applicable entry and tile variant by the cost model
 * (estimate()); the list's order only breaks the model's ties and is the order explain() and the
 * log use. The reference schedule is last, so every problem has one. */
#include <string>
#include <vector>

#include "ops/ops.h"
#include "schedules/cost_model.h"

namespace tbex::sched {

struct Context {
  Halide::Target target;
  int threads = 1;  ///< worker threads the kernel is tuned for
  /** A tile choice the schedule understands (e.g. "nt=4,kwt=3,ch=8" for dw_tiled), from
   * candidates(); "" = the schedule's own choice. Schedules without variants reject any other. */
  std::string variant;
};

template <class Algorithm>
class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual std::string name() const = 0;
  /** "" when the schedule applies to `p`, else the reason it does not. */
  virtual std::string why_not(const Problem& p) const = 0;
  /** "" when kernels for `target` may use the schedule, else why not (an ISA feature the target
   * lacks). Checked beside why_not wherever a schedule is chosen. */
  virtual std::string why_not_on(const Halide::Target&) const { return ""; }
  /** Whether the schedule's kernels run AMX tile instructions: a process must hold the OS's tile
   * permission before calling one (tbex/amx.h; AOT wrappers ask for it). */
  virtual bool uses_amx_tiles() const { return false; }
  /** True for entries "auto" never picks, used only when requested by name (Halide's
   * autoschedulers: kept for comparison). */
  virtual bool by_name_only() const { return false; }
  /** The loop nests (loop vars, outermost first) the lowering spreads a prefetch placed right
   * before them over (its lines shared out among the iterations: lower::mend_prefetches); none
   * by default. */
  virtual std::vector<std::vector<std::string>> spread_prefetches_over() const { return {}; }
  /** One line on what the schedule will do for `p` (tiles, splits). */
  virtual std::string describe(const Problem& p, const Context& ctx) const = 0;
  virtual void apply(Algorithm& a, const Problem& p, const Context& ctx) const = 0;
  /** The analytic cost model's prediction for `p` with ctx's tiles (ctx.variant; "" = the
   * schedule's own choice); no compilation. "auto" ranks every applicable entry and variant by it. */
  virtual Estimate estimate(const Problem& p, const Context& ctx) const = 0;
  /** Tile variants worth timing for `p` (ctx.variant ignored), the schedule's own choice first;
   * empty when the schedule has no variants. The measured tuner (tbex::tune) times them. */
  virtual std::vector<std::string> candidates(const Problem&, const Context&) const { return {}; }
};

using DwSchedule = Schedule<ops::DwAlgorithm>;
using DxSchedule = Schedule<ops::DxAlgorithm>;
using FwdSchedule = Schedule<ops::FwdAlgorithm>;

const std::vector<const DwSchedule*>& dw_registry();
const std::vector<const DxSchedule*>& dx_registry();
const std::vector<const FwdSchedule*>& fwd_registry();

/** The entry of `reg` named `name`, or null. */
template <class S>
const S* find_schedule(const std::vector<const S*>& reg, const std::string& name) {
  for (const S* s : reg)
    if (s->name() == name) return s;
  return nullptr;
}

/** Registry entries of one op, as names in registry order; own_only: without by-name-only
 * entries. */
std::vector<std::string> registry_names(OpKind op, bool own_only = false);

/** The one instance of schedule class S (what every factory returns). */
template <class S>
const S* the() {
  static const S s;
  return &s;
}

// Factories, one per schedule, each defined in the file the rule above names.
const DwSchedule* dw_diag_schedule();
const DwSchedule* dw_direct_schedule();
const DwSchedule* dw_cout_lanes_schedule();
const DwSchedule* dw_tiled_schedule();
const DwSchedule* dw_amx_schedule();
const DwSchedule* dw_amx_blocked_schedule();
const DwSchedule* dw_pointwise_schedule();
const DwSchedule* dw_reference_schedule();  // reference.cpp
const DxSchedule* dx_diag_schedule();
const DxSchedule* dx_cout_lanes_schedule();
const DxSchedule* dx_w_lanes_schedule();
const DxSchedule* dx_pointwise_schedule();
const DxSchedule* dx_tiled_schedule();
const DxSchedule* dx_amx_schedule();
const DxSchedule* dx_amx_blocked_schedule();
const DxSchedule* dx_amx_cols_schedule();
const DxSchedule* dx_reference_schedule();  // reference.cpp
const FwdSchedule* fwd_tiled_schedule();
const FwdSchedule* fwd_reference_schedule();  // reference.cpp

/** Halide's autoschedulers (halide_auto.cpp), by-name-only entries placed before reference. */
enum class HalideAutoscheduler { kMullapudi2016, kAdams2019, kLi2018 };
const DwSchedule* dw_halide_auto_schedule(HalideAutoscheduler which);
const DxSchedule* dx_halide_auto_schedule(HalideAutoscheduler which);
const FwdSchedule* fwd_halide_auto_schedule(HalideAutoscheduler which);

}  // namespace tbex::sched
