/** reference: the last entry of every op's registry, so every problem has a schedule. Every stage
 * computed at root, serial and scalar: a second opinion for tests, and the cost model prices it
 * as one scalar multiply-add per term (padding lanes included). */
#include "schedules/registry.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

// Per op: the stages at root (xs stays inline in dW and the forward: its padded box can be far
// larger than x with huge pads and strides), and the scalar work (flops, bytes written).

void apply_reference(ops::DwAlgorithm& a) {
  // The accumulator is per output row, so huge outputs are not held twice.
  a.dys.compute_root();
  a.out.compute_root();
  a.acc.compute_at(a.out, a.kw);
}
void apply_reference(ops::DxAlgorithm& a) {
  a.wz.compute_root();
  a.dys.compute_root();
  a.acc.compute_root();
  a.dxp.compute_root();
  a.out.compute_root();
}
void apply_reference(ops::FwdAlgorithm& a) {
  a.wz.compute_root();
  a.acc.compute_root();
  a.out.compute_root();
}

/** (flops, pass bytes) of the scalar loops. */
std::pair<double, double> reference_work(const Problem& p) {
  const ConvGeometry& g = p.geo;
  switch (p.op) {
    case OpKind::kBackpropFilter: {
      // Every output entry sums the whole reduction.
      const double macs = dw_out_elems(p) * g.n * g.out[0] * g.out[1] * g.out[2];
      return {2 * macs, 8 * dw_out_elems(p)};
    }
    case OpKind::kBackpropInput: {
      // Every dx entry sums its phase's taps over cout_g.
      const double taps = std::max(1.0, double(g.kernel[0]) * g.kernel[1] * g.kernel[2] /
                                            double(g.stride[0] * g.stride[1] * g.stride[2]));
      return {2 * dx_elems(p) * p.group.cout_g * taps, 12 * dx_elems(p)};
    }
    case OpKind::kForward: {
      // Every y entry sums cin_g x taps.
      const double y_elems = double(g.n) * g.out[0] * g.out[1] * g.out[2] * g.cout1() * 16;
      return {2 * y_elems * p.group.cout_g * g.kernel[0] * g.kernel[1] * g.kernel[2], 8 * y_elems};
    }
  }
  return {0, 0};
}

template <class Algorithm>
class Reference final : public Schedule<Algorithm> {
 public:
  std::string name() const override { return "reference"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem& p, const Context&) const override {
    return p.op == OpKind::kForward
               ? "weights and output at root, x read in place, serial, scalar: a second opinion for tests"
               : "every stage computed at root, serial, scalar: a second opinion for tests";
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const auto [flops, bytes] = reference_work(p);
    return scalar_estimate(flops, bytes, Machine::of(ctx.target));
  }
  void apply(Algorithm& a, const Problem&, const Context&) const override { apply_reference(a); }
};

}  // namespace

const DwSchedule* dw_reference_schedule() { return the<Reference<ops::DwAlgorithm>>(); }
const DxSchedule* dx_reference_schedule() { return the<Reference<ops::DxAlgorithm>>(); }
const FwdSchedule* fwd_reference_schedule() { return the<Reference<ops::FwdAlgorithm>>(); }

}  // namespace tbex::sched
