/** dw_direct: dW for short reductions, or outputs too big to hold twice. The accumulator lives per
 * output row (one tap, all cout_g x 16 entries) and is written straight into the output; no K
 * chunking. */
#include "schedules/registry.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

class DwDirect final : public DwSchedule {
 public:
  std::string name() const override { return "dw_direct"; }
  std::string why_not(const Problem& p) const override {
    const auto& g = p.geo;
    const int64_t reduction = g.n * g.out[0] * g.out[1] * g.out[2];
    if (reduction <= 4096 || !dw_accumulator_why_not(p).empty()) return "";
    return "reduction of " + std::to_string(reduction) + " points is long enough for dw_tiled";
  }
  std::string describe(const Problem&, const Context& ctx) const override {
    return "accumulator per output row (one tap), " + std::to_string(ctx.threads) + " threads over rows";
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    // A scalar update (see apply), parallel over kd.
    const Machine m = Machine::of(ctx.target);
    Estimate e = scalar_estimate(p.geo.flops(), 0, m);
    e.balance = balance_of(p.geo.kernel[0], ctx.threads);
    e.compute /= std::max(1, ctx.threads) * e.balance;
    e.cycles = e.compute + e.passes;
    return e;
  }
  void apply(ops::DwAlgorithm& a, const Problem&, const Context&) const override {
    // acc per (kh, c1g, kd, g): every kw x n x c0 entry of those taps. No fused loops: Halide
    // recovers fused vars by div/mod, whose bounds it cannot narrow (acc would span every tap).
    // The update stays scalar: vectorized over c0 with x read in place (bounds-checked),
    // Halide's code ran far slower. dy is read in place.
    a.out.compute_root().parallel(a.kd);
    a.acc.compute_at(a.out, a.kh).vectorize(a.c0);
    a.acc.update().unscheduled();
  }
};

}  // namespace

const DwSchedule* dw_direct_schedule() { return the<DwDirect>(); }

}  // namespace tbex::sched
