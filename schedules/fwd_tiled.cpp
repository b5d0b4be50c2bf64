/** fwd_tiled: the forward conv GEMM. M = output positions (wo), N = output channels (c0, c1),
 * K = input channels x taps: the GEMM register tile of schedules/gemm_tile.h, QT positions x CT
 * channel blocks. Weights and the zero-padded x are staged once in fp32 (conversion and padding
 * out of the hot loop). Every output tile belongs to one thread, so results do not depend on the
 * thread count. */
#include "schedules/gemm_tile.h"
#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** The 16-channel output blocks a tile's CT must divide: with several real groups a tile stays
 * inside one, so its QT x values are shared by all CT blocks. */
int64_t fwd_blocks(const Problem& p) {
  return p.group.real_g > 1 ? p.group.cin1_g : p.geo.cout1();
}

/** Bytes of the padded fp32 box of x the output reads (per dim (out-1)*s + (K-1)*dil + 1). */
int64_t staged_x_bytes(const Problem& p) {
  const ConvGeometry& g = p.geo;
  int64_t bytes = 4 * g.n * p.group.real_g * p.group.cout_g;
  for (int i = 0; i < 3; ++i)
    bytes *= (g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dilation[i] + 1;
  return bytes;
}

/** The forward's staging rule: huge pads or dilations with large strides leave a padded box
 * mostly nobody reads; staging it could cost more memory than x and y together. Then x is read
 * in place (bounds-checked). */
bool stage_x(const Problem& p) {
  const ConvGeometry& g = p.geo;
  const int64_t x_bytes = 4 * g.n * g.in[0] * g.in[1] * g.in[2] * g.cin1() * 16;
  const int64_t y_bytes = 4 * g.n * g.out[0] * g.out[1] * g.out[2] * g.cout1() * 16;
  return staged_x_bytes(p) <= 2 * (x_bytes + y_bytes) + (int64_t(64) << 20);
}

class FwdTiled final : public GemmTiledSchedule<ops::FwdAlgorithm> {
 public:
  std::string name() const override { return "fwd_tiled"; }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const std::string bytes = std::to_string(staged_x_bytes(p));
    return describe_tiles(p, ctx, "wo") +
           (stage_x(p) ? "padded fp32 x staged (" + bytes + " bytes)"
                       : "x read in place (padded box of " + bytes + " bytes too sparse to stage)") +
           ", " + std::to_string(ctx.threads) + " threads over rows";
  }
  void apply(ops::FwdAlgorithm& a, const Problem& p, const Context& ctx) const override;

 protected:
  GemmShape shape(const Problem& p) const override {
    return {"fwd_tiled", "TBEX_FWD_TILE", p.geo.out[2], "Wo", fwd_blocks(p), "the channel blocks",
            fwd_blocks(p), /*cover_row=*/true, 8};
  }
  Estimate estimate_tiles(const Problem& p, const Context& ctx, const GemmShape& s,
                          const GemmTiles& t) const override;
};

Estimate FwdTiled::estimate_tiles(const Problem& p, const Context& ctx, const GemmShape&,
                                  const GemmTiles& t) const {
  const ConvGeometry& g = p.geo;
  LoopNest n;
  n.threads = ctx.threads;
  // Per step (one input channel of one tap): ct weight vectors, qt x broadcasts.
  n.tile = {double(t.qt * t.ct), double(t.qt + t.ct), t.qt * t.ct, t.ct + 1, stage_x(p) ? 0.0 : 1.0,
            double(t.qt)};
  const double taps = double(g.kernel[0]) * g.kernel[1] * g.kernel[2];
  const double cin_g = double(p.group.cout_g);  // the forward's reduction channels per group
  n.steps_per_visit = cin_g * taps;
  const int64_t rows = g.n * g.out[0] * g.out[1] * (g.cout1() / t.ct);
  n.visits = double(rows * ceil_div(g.out[2], t.qt));
  const double w_bytes = t.ct * 64.0 * cin_g * taps;
  const double x_bytes = (t.qt * g.stride[2] + double(g.kernel[2] - 1) * g.dilation[2]) * cin_g * 4 *
                         g.kernel[0] * g.kernel[1];
  n.visit_bytes = w_bytes + x_bytes;
  n.visit_footprint = (int64_t)n.visit_bytes;
  n.chunk_footprint = int64_t(g.cout1() * 64.0 * cin_g * taps) +
                      int64_t(g.kernel[0] * g.kernel[1]) * (g.out[2] * g.stride[2] + g.kernel[2]) *
                          int64_t(cin_g) * 4 * p.group.real_g;
  n.units = rows;
  const double in_b = input_bytes(p);
  const double w_elems = double(p.group.real_g) * taps * p.group.cin1_g * p.group.cout_g * 16;
  n.pass_bytes = w_elems * (in_b + 4) + (stage_x(p) ? staged_x_bytes(p) * (in_b + 4) / 4 : 0);
  n.lane_use = lane_use_of(g.flops(), n);
  n.executed = ops::inside_tap_share(p);
  return evaluate(n, Machine::of(ctx.target));
}

void FwdTiled::apply(ops::FwdAlgorithm& a, const Problem& p, const Context& ctx) const {
  const GemmTiles t = tiles(p, ctx);
  stage_root(a.wz, a.c0, 0, {a.kd, a.g}, {"t1"});
  if (stage_x(p)) stage_root(a.xs, a.n, 16, {a.d, a.b, a.g}, {"t2", "t1"});
  const Var c0 = a.c0, wo = a.wo, c1 = a.c1;
  Var wt("wt"), wi("wi"), c1o("c1o"), c1i("c1i"), t1("t1"), t2("t2"), rows("rows");
  // One task per output row of one channel-block group: plenty of tasks even for N = Do = 1.
  a.out.compute_root()
      .split(wo, wt, wi, t.qt)
      .split(c1, c1o, c1i, t.ct)
      .reorder(c0, wi, c1i, wt, a.ho, c1o, a.od, a.b)
      .vectorize(c0)
      .unroll(wi)
      .unroll(c1i)
      .fuse(a.ho, c1o, t1)
      .fuse(t1, a.od, t2)
      .fuse(t2, a.b, rows)
      .parallel(rows);
  // The tile's accumulators live at wt (never at a fused var: acc indexes c1 by div/mod).
  register_tile(a.acc, a.out, wt, c0, wo, c1, rvars(a.r));
}

}  // namespace

const FwdSchedule* fwd_tiled_schedule() { return the<FwdTiled>(); }

}  // namespace tbex::sched
