/** Forward conv schedules.
 *
 * The forward GEMM: M = output positions (wo), N = output channels (c0, c1), K = input channels x
 * taps. "fwd_tiled" keeps QT positions x CT channel blocks x 16 lanes in registers (QT*CT zmm
 * accumulators); per reduction step it loads CT weight vectors and broadcasts QT x values. Weights
 * and the zero-padded x are staged once in fp32 (conversion and padding out of the hot loop).
 * Every output tile belongs to one thread, so results do not depend on the thread count. */
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "schedules/variant.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct FwdTiles {
  int qt = 8;  ///< output positions along wo per register tile
  int ct = 1;  ///< 16-channel output blocks per register tile
  bool stage_x = true;  ///< stage the padded fp32 x once (else read in place in the hot loop)
  int64_t staged_bytes = 0;
};

/** Bytes of the padded fp32 box of x the output reads (per dim (out-1)*s + (K-1)*dil + 1). */
int64_t staged_x_bytes(const Problem& p) {
  const ConvGeometry& g = p.geo;
  int64_t bytes = 4 * g.n * p.group.real_g * p.group.cout_g;
  for (int i = 0; i < 3; ++i)
    bytes *= (g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dilation[i] + 1;
  return bytes;
}

const std::vector<std::string> kFwdKeys{"qt", "ct"};

/** The 16-channel output blocks a tile's CT must divide: with several real groups a tile stays
 * inside one, so its QT x values are shared by all CT blocks. */
int64_t fwd_blocks(const Problem& p) {
  return p.group.real_g > 1 ? p.group.cin1_g : p.geo.cout1();
}

/** The schedule's own choice, then TBEX_FWD_TILE (experiments; only without a variant), then
 * the fields `variant` sets. */
FwdTiles choose_fwd_tiles(const Problem& p, const std::string& variant) {
  const ConvGeometry& g = p.geo;
  FwdTiles t;
  // 16 zmm accumulators (as dX: 24 spill).
  t.ct = largest_divisor_upto(fwd_blocks(p), 4);
  // Fewest tiles along wo, then the narrowest tile that still covers the row in that many (a
  // row of 17 is 3 tiles of 6, not 2 of 8 and a shifted third recomputing 7 positions).
  const int64_t qmax = std::max(1, 16 / t.ct), wtiles = ceil_div(g.out[2], qmax);
  t.qt = (int)ceil_div(g.out[2], wtiles);
  const char* e = getenv("TBEX_FWD_TILE");
  if (e && variant.empty()) {  // experiments only
    sscanf(e, "%d,%d", &t.qt, &t.ct);
    t.qt = std::max(t.qt, 1), t.ct = std::max(t.ct, 1);
  }
  const VariantFields f = parse_variant(variant, kFwdKeys, "fwd_tiled");
  if (f.count("qt")) t.qt = f.at("qt");
  if (f.count("ct")) t.ct = f.at("ct");
  user_check(fwd_blocks(p) % (f.count("ct") ? t.ct : 1) == 0 && (!f.count("qt") || t.qt <= g.out[2]),
             "", "variant",
             "fwd_tiled variant '" + variant + "': ct must divide " + std::to_string(fwd_blocks(p)) +
                 " (channel blocks) and qt be at most Wo (" + std::to_string(g.out[2]) + ")");
  // Huge pads or dilations with large strides leave a padded box mostly nobody reads; staging it
  // could cost more memory than x and y together. Then x is read in place (bounds-checked).
  t.staged_bytes = staged_x_bytes(p);
  const int64_t x_bytes = 4 * g.n * g.in[0] * g.in[1] * g.in[2] * g.cin1() * 16;
  const int64_t y_bytes = 4 * g.n * g.out[0] * g.out[1] * g.out[2] * g.cout1() * 16;
  t.stage_x = t.staged_bytes <= 2 * (x_bytes + y_bytes) + (int64_t(64) << 20);
  return t;
}

/** "" (the own choice) first, then per CT (a divisor of the channel blocks up to 4) tiles of 16,
 * 12 and 8 accumulators and the narrowest tile covering a row in as few tiles. */
std::vector<std::string> fwd_candidates(const Problem& p) {
  const int64_t wo = p.geo.out[2];
  const FwdTiles d = choose_fwd_tiles(p, "");
  std::vector<std::string> out{format_variant({{"qt", d.qt}, {"ct", d.ct}}, kFwdKeys)};
  for (int ct = 4; ct >= 1; --ct) {
    if (fwd_blocks(p) % ct != 0) continue;
    const int64_t qmax = std::min<int64_t>(16 / ct, wo);
    for (int64_t qt : {qmax, std::min<int64_t>(12 / ct, wo), std::min<int64_t>(8 / ct, wo),
                       ceil_div(wo, ceil_div(wo, qmax))})
      out.push_back(format_variant({{"qt", (int)std::max<int64_t>(1, qt)}, {"ct", ct}}, kFwdKeys));
  }
  out = unique_upto(out, 8);
  out[0] = "";
  return out;
}

/** The cost model's view of fwd_tiled with tiles `t`. */
Estimate fwd_tiled_estimate(const Problem& p, const Context& ctx, const FwdTiles& t) {
  const ConvGeometry& g = p.geo;
  LoopNest n;
  n.threads = ctx.threads;
  // Per step (one input channel of one tap): ct weight vectors, qt x broadcasts.
  n.tile = {double(t.qt * t.ct), double(t.qt + t.ct), t.qt * t.ct, t.ct + 1, t.stage_x ? 0.0 : 1.0};
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
  n.pass_bytes = w_elems * (in_b + 4) + (t.stage_x ? t.staged_bytes * (in_b + 4) / 4 : 0);
  n.lane_use = lane_use_of(g.flops(), n);
  return evaluate(n, Machine::of(ctx.target));
}

class FwdTiled final : public FwdSchedule {
 public:
  std::string name() const override { return "fwd_tiled"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const FwdTiles t = choose_fwd_tiles(p, ctx.variant);
    std::ostringstream s;
    s << "[" << format_variant({{"qt", t.qt}, {"ct", t.ct}}, kFwdKeys) << "] register tile 16c0 x " << t.ct << "c1 x " << t.qt << "wo, "
      << (t.stage_x ? "padded fp32 x staged (" + std::to_string(t.staged_bytes) + " bytes)"
                    : "x read in place (padded box of " + std::to_string(t.staged_bytes) +
                          " bytes too sparse to stage)")
      << ", " << ctx.threads << " threads over rows";
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context&) const override {
    return fwd_candidates(p);
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    return fwd_tiled_estimate(p, ctx, choose_fwd_tiles(p, ctx.variant));
  }

  void apply(ops::FwdAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const FwdTiles t = choose_fwd_tiles(p, ctx.variant);
    {
      Var t1("t1"), t2("t2");
      a.wz.compute_root().vectorize(a.c0).fuse(a.kd, a.g, t1).parallel(t1);
      if (t.stage_x)
        a.xs.compute_root().vectorize(a.n, 16).fuse(a.d, a.b, t2).fuse(t2, a.g, t1).parallel(t1);
    }
    Var c0 = a.c0, wo = a.wo, ho = a.ho, c1 = a.c1, od = a.od, b = a.b;
    Var wt("wt"), wi("wi"), c1o("c1o"), c1i("c1i"), t1("t1"), t2("t2"), rows("rows");
    // One task per output row of one channel-block group: plenty of tasks even for N = Do = 1.
    a.out.compute_root()
        .split(wo, wt, wi, t.qt)
        .split(c1, c1o, c1i, t.ct)
        .reorder(c0, wi, c1i, wt, ho, c1o, od, b)
        .vectorize(c0)
        .unroll(wi)
        .unroll(c1i)
        .fuse(ho, c1o, t1)
        .fuse(t1, od, t2)
        .fuse(t2, b, rows)
        .parallel(rows);
    // The tile's accumulators live at wt (never at a fused var: acc indexes c1 by div/mod).
    a.acc.compute_at(a.out, wt).vectorize(c0).unroll(wo).unroll(c1);
    RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
    a.acc.update()
        .reorder(c0, wo, c1, rn, rkw, rkh, rkd)
        .vectorize(c0)
        .unroll(wo)
        .unroll(c1);
  }
};

class FwdReference final : public FwdSchedule {
 public:
  std::string name() const override { return "reference"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem&, const Context&) const override {
    return "weights and output at root, x read in place, serial, scalar: a second opinion for tests";
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    // Every y entry (padding lanes too) sums cin_g x taps, one scalar at a time.
    const ConvGeometry& g = p.geo;
    const double y_elems = double(g.n) * g.out[0] * g.out[1] * g.out[2] * g.cout1() * 16;
    return scalar_estimate(2 * y_elems * p.group.cout_g * g.kernel[0] * g.kernel[1] * g.kernel[2],
                           8 * y_elems, Machine::of(ctx.target));
  }
  void apply(ops::FwdAlgorithm& a, const Problem&, const Context&) const override {
    // xs stays inline: its padded box can be far larger than x (huge pads and strides).
    a.wz.compute_root();
    a.acc.compute_root();
    a.out.compute_root();
  }
};

}  // namespace

const FwdSchedule* fwd_tiled_schedule() {
  static const FwdTiled s;
  return &s;
}
const FwdSchedule* fwd_reference_schedule() {
  static const FwdReference s;
  return &s;
}

}  // namespace tbex::sched
