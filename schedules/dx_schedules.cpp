/** dX schedules.
 *
 * The dX GEMM: M = input positions (qw..., in the stride-phase frame), N = input channels (c0, c1),
 * K = output channels x taps of the phase. "dx_tiled" keeps QT positions x CT channel blocks x 16
 * lanes in registers (QT*CT zmm accumulators); per reduction step it loads CT weight vectors and
 * broadcasts QT dy values. With strides the tile lives in the phase frame (all QT positions share
 * one phase, so one tap set), computed per output depth slice and scattered back to 6HD
 * while it is in L2. */
#include <sstream>
#include <cstdio>
#include <cstdlib>

#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "schedules/variant.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct DxTiles {
  int qt = 8;  ///< positions along w (phase frame) per register tile
  int ct = 1;  ///< 16-channel input blocks per register tile
};

const std::vector<std::string> kDxKeys{"qt", "ct"};

/** The cost model's view of dx_tiled with tiles `t`. */
Estimate dx_tiled_estimate(const Problem& p, const Context& ctx, const DxTiles& t) {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  LoopNest n;
  n.threads = ctx.threads;
  // Per step (one output channel of one tap): ct weight vectors, qt dy broadcasts per real
  // group the tile's ct blocks span (each group reduces over its own dy channels).
  const int spanned = gd.cin1_g >= t.ct ? 1 : (int)ceil_div(t.ct, gd.cin1_g);
  n.tile = {double(t.qt * t.ct), double(t.qt * spanned + t.ct), t.qt * t.ct, t.ct + spanned, 0};
  // Each phase's positions run the taps of that phase only (the RDom predicate).
  const double taps = double(g.kernel[0]) * g.kernel[1] * g.kernel[2] /
                      double(g.stride[0] * g.stride[1] * g.stride[2]);
  n.steps_per_visit = gd.cout_g * taps;
  const int64_t rows = g.n * phase_extent(p, 0) * g.stride[0] * phase_extent(p, 1) * g.stride[1];
  const int64_t tiles = rows * g.stride[2] * ceil_div(phase_extent(p, 2), t.qt) * (g.cin1() / t.ct);
  n.visits = double(tiles);
  // A visit reads its ct blocks' weights (every output channel and tap of the phase) and qt
  // positions (plus the taps' reach) of dy rows.
  const double w_bytes = t.ct * 64.0 * gd.cout_g * taps;
  const double dy_bytes = (t.qt + double(g.kernel[2]) / g.stride[2]) * gd.cout_g * 4 *
                          double(g.kernel[0]) * g.kernel[1] / (g.stride[0] * g.stride[1]);
  n.visit_bytes = w_bytes + dy_bytes;
  n.visit_footprint = (int64_t)n.visit_bytes;
  n.chunk_footprint = int64_t(g.cin1() * 64.0 * gd.cout_g * g.kernel[0] * g.kernel[1] * g.kernel[2]) +
                      int64_t(g.kernel[0] * g.kernel[1]) * g.out[2] * gd.cout_g * 4 * gd.real_g;
  n.units = g.n * phase_extent(p, 0) * g.stride[0];
  // Passes: weights and dy staged in fp32 (dy zero-padded by the taps' reach), the phase
  // scatter back to 6HD when strided.
  const double w_elems = dw_out_elems(p);  // the filter has dW's shape
  // The phase frame is scattered back per depth slice, read from L2: only the writes count.
  n.pass_bytes = (w_elems + staged_dy_elems(p)) * (input_bytes(p) + 4) +
                 (is_strided(p) ? dx_elems(p) * 4 : 0);
  n.lane_use = lane_use_of(g.flops(), n);
  return evaluate(n, Machine::of(ctx.target));
}

/** The schedule's own choice, then TBEX_DX_TILE (experiments; only without a variant), then the
 * fields `variant` sets. */
DxTiles choose_dx_tiles(const Problem& p, const std::string& variant) {
  const ConvGeometry& g = p.geo;
  DxTiles t;
  const int64_t qw_extent = phase_extent(p, 2);
  // 16 zmm accumulators measured best (24 spills): CT channel blocks x QT positions.
  t.ct = largest_divisor_upto(g.cin1(), 4);
  t.qt = (int)std::max<int64_t>(1, std::min<int64_t>(16 / t.ct, qw_extent));
  const char* e = getenv("TBEX_DX_TILE");
  if (e && variant.empty()) {  // experiments only
    sscanf(e, "%d,%d", &t.qt, &t.ct);
    t.qt = std::max(t.qt, 1), t.ct = std::max(t.ct, 1);
  }
  const VariantFields f = parse_variant(variant, kDxKeys, "dx_tiled");
  if (f.count("qt")) t.qt = f.at("qt");
  if (f.count("ct")) t.ct = f.at("ct");
  user_check(g.cin1() % (f.count("ct") ? t.ct : 1) == 0 && (!f.count("qt") || t.qt <= qw_extent),
             "", "variant",
             "dx_tiled variant '" + variant + "': ct must divide C1 (" + std::to_string(g.cin1()) +
                 ") and qt be at most " + std::to_string(qw_extent) + " (positions along w)");
  return t;
}

/** "" (the own choice) first, then per channel block count CT (a divisor of C1 up to 4; those
 * keeping a tile inside one real group first) tiles of 16, 12 and 8 accumulators, and the
 * narrowest tile covering a row in as few tiles. */
std::vector<std::string> dx_candidates(const Problem& p) {
  const int64_t ext = phase_extent(p, 2);
  std::vector<std::string> out{format_variant(
      {{"qt", choose_dx_tiles(p, "").qt}, {"ct", choose_dx_tiles(p, "").ct}}, kDxKeys)};
  std::vector<int> cts;
  for (bool in_group : {true, false})
    for (int ct = 4; ct >= 1; --ct)
      if (p.geo.cin1() % ct == 0 && (p.group.cin1_g % ct == 0) == in_group) cts.push_back(ct);
  for (int ct : cts) {
    const int64_t qmax = std::min<int64_t>(16 / ct, ext);
    for (int64_t qt : {qmax, std::min<int64_t>(12 / ct, ext), std::min<int64_t>(8 / ct, ext),
                       ceil_div(ext, ceil_div(ext, qmax))})
      out.push_back(format_variant({{"qt", (int)std::max<int64_t>(1, qt)}, {"ct", ct}}, kDxKeys));
  }
  out = unique_upto(out, 10);
  out[0] = "";
  return out;
}

class DxTiled final : public DxSchedule {
 public:
  std::string name() const override { return "dx_tiled"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem& p, const Context& ctx) const override {
    DxTiles t = choose_dx_tiles(p, ctx.variant);
    std::ostringstream s;
    s << "[" << format_variant({{"qt", t.qt}, {"ct", t.ct}}, kDxKeys) << "] register tile 16c0 x " << t.ct << "c1 x " << t.qt << "w, "
      << (p.geo.stride[0] * p.geo.stride[1] * p.geo.stride[2] > 1 ? "stride-phase frame, " : "")
      << ctx.threads << " threads";
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context&) const override {
    return dx_candidates(p);
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    return dx_tiled_estimate(p, ctx, choose_dx_tiles(p, ctx.variant));
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const DxTiles t = choose_dx_tiles(p, ctx.variant);
    Var c0 = a.c0, qw = a.qw, pw = a.pw, qh = a.qh, ph = a.ph, qd = a.qd, pd = a.pd, c1 = a.c1,
        b = a.b;
    {
      Var t1("t1"), t2("t2");
      a.wz.compute_root().vectorize(a.c0).fuse(a.kd, a.g, t1).parallel(t1);
      a.dys.compute_root().vectorize(a.n, 16).fuse(a.d, a.b, t2).fuse(t2, a.g, t1).parallel(t1);
    }
    RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
    Var wo("wo"), wi("wi"), c1o("c1o"), c1i("c1i"), par("par");
    Func tile_owner = a.strided ? a.dxp : a.out;
    if (a.strided) {
      // The phase frame is computed per output depth slice (one qd, pd) right before that
      // slice is scattered back to 6HD, so it stays in L2: at root it was a second dx-sized
      // buffer, allocated (page faults) and streamed through memory twice on every call.
      a.out.compute_root().vectorize(a.c0).parallel(a.d);
      a.dxp.compute_at(a.out, a.d)
          .split(qw, wo, wi, t.qt)
          .split(c1, c1o, c1i, t.ct)
          .reorder(c0, wi, c1i, wo, pw, qh, ph, c1o, qd, pd, b)
          .vectorize(c0)
          .unroll(wi)
          .unroll(c1i);
    } else {
      Var w = a.w, h = a.h, d = a.d;
      a.out.compute_root()
          .split(w, wo, wi, t.qt)
          .split(c1, c1o, c1i, t.ct)
          .reorder(c0, wi, c1i, wo, h, c1o, d, b)
          .vectorize(c0)
          .unroll(wi)
          .unroll(c1i)
          .fuse(d, b, par)
          .parallel(par);
    }
    a.acc.compute_at(tile_owner, wo).vectorize(c0).unroll(qw).unroll(c1);
    a.acc.update()
        .reorder(c0, qw, c1, rn, rkw, rkh, rkd)
        .vectorize(c0)
        .unroll(qw)
        .unroll(c1);
  }
};

class DxReference final : public DxSchedule {
 public:
  std::string name() const override { return "reference"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem&, const Context&) const override {
    return "every stage computed at root, serial, scalar: a second opinion for tests";
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    // Every dx entry (padding lanes too) sums its phase's taps over cout_g, one scalar at a time.
    const ConvGeometry& g = p.geo;
    const double taps = std::max(1.0, double(g.kernel[0]) * g.kernel[1] * g.kernel[2] /
                                          double(g.stride[0] * g.stride[1] * g.stride[2]));
    return scalar_estimate(2 * dx_elems(p) * p.group.cout_g * taps, 12 * dx_elems(p),
                           Machine::of(ctx.target));
  }
  void apply(ops::DxAlgorithm& a, const Problem&, const Context&) const override {
    a.wz.compute_root();
    a.dys.compute_root();
    a.acc.compute_root();
    a.dxp.compute_root();
    a.out.compute_root();
  }
};

}  // namespace

const DxSchedule* dx_tiled_schedule() {
  static const DxTiled s;
  return &s;
}
const DxSchedule* dx_reference_schedule() {
  static const DxReference s;
  return &s;
}

}  // namespace tbex::sched
