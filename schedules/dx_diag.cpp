/** dx_diag: depthwise dX (cin_pg == 1), only the diagonal of each real group's block (see
 * dw_diag.cpp and docs/group_dict.md):
 *   accd(c0, w..) += dyd(c0, m, w - kw, ..) * wd(c0, m, kw, kh, kd)
 * Register tile of QT positions along w, kw and m unrolled inside (dy loads shared between
 * taps), same term order as the dense sum. dy is staged zero-padded per plane with a sliding
 * window over d. Parallel over (real group, batch). */
#include <sstream>

#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

const TileSpace& space() {
  static const TileSpace s("dx_diag", {"qt"});
  return s;
}

/** Depth chunks per (real group, batch), so that there are some 4 parallel tasks per thread
 * (each output is computed whole by one task: results do not depend on the split). */
int depth_chunks(const Problem& p, int threads) {
  if (threads <= 1) return 1;
  const int64_t tasks = p.group.real_g * p.geo.n;
  return (int)std::min<int64_t>(std::max<int64_t>(1, ceil_div(4 * threads, tasks)),
                                ceil_div(p.geo.in[0], 2));
}

int choose_dx_qt(const Problem& p, const std::string& variant) {
  const int64_t ext = phase_extent(p, 2);
  // Up to 16 accumulators; a row in as few equal tiles as possible.
  int qt = (int)std::max<int64_t>(1, ceil_div(ext, ceil_div(ext, 16)));
  const VariantFields f = space().resolve(variant, {{"qt", &qt}});
  space().require(!f.count("qt") || qt <= ext, variant,
                  "qt must be at most " + std::to_string(ext) + " (positions along w)");
  return qt;
}

class DxDiag final : public DxSchedule {
 public:
  std::string name() const override { return "dx_diag"; }
  std::string why_not(const Problem& p) const override { return diag_why_not(p); }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const int qt = choose_dx_qt(p, ctx.variant);
    const bool strided = is_strided(p);
    std::ostringstream s;
    s << "[qt=" << qt << "] diagonal only (lanes = 16 groups, mult " << p.geo.cout_pg()
      << "), register tile " << qt << "w" << (strided ? " (stride-phase frame)" : " x kw unrolled")
      << ", dy staged zero-padded " << (strided ? "per (group, batch)" : "per plane (sliding over d)")
      << ", " << ctx.threads << " threads over (real group, batch"
      << (depth_chunks(p, ctx.threads) > 1 ? ", " + std::to_string(depth_chunks(p, ctx.threads)) + " depth chunks" : "") << ")";
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context&) const override {
    const int64_t ext = phase_extent(p, 2);
    std::vector<std::string> out{""};
    for (int64_t qt : {ceil_div(ext, ceil_div(ext, 16)), std::min<int64_t>(16, ext),
                       std::min<int64_t>(12, ext), std::min<int64_t>(8, ext),
                       ceil_div(ext, ceil_div(ext, 8)), std::min<int64_t>(4, ext)})
      out.push_back(space().key({{"qt", (int)std::max<int64_t>(1, qt)}}));
    out = TileSpace::candidates(out, 8);
    return out;
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const int qt = choose_dx_qt(p, ctx.variant);
    const ConvGeometry& g = p.geo;
    const double mult = double(g.cout_pg());
    const double taps_w = double(g.kernel[2]) / g.stride[2];
    const double taps_dh = double(g.kernel[0]) * g.kernel[1] / (g.stride[0] * g.stride[1]);
    LoopNest n;
    n.threads = ctx.threads;
    // Per (kd, kh) step: kw and m unrolled; the dy loads are shared by neighbouring taps.
    n.tile = {qt * taps_w * mult, taps_w * mult + mult * (qt + taps_w - 1), qt,
              (int)(taps_w * mult) + 1, 0};
    n.steps_per_visit = taps_dh;
    const int64_t rows = g.n * phase_extent(p, 0) * g.stride[0] * phase_extent(p, 1) * g.stride[1];
    const int64_t tiles = rows * p.group.real_g * g.stride[2] * ceil_div(phase_extent(p, 2), qt);
    n.visits = double(tiles);
    n.visit_bytes = taps_w * mult * taps_dh * 64 + (qt + taps_w) * 64 * mult * taps_dh;
    n.visit_footprint = (int64_t)n.visit_bytes;
    n.chunk_footprint = dx_dy_rows(p) * (g.out[2] + g.kernel[2]) * 64 * int64_t(mult);
    n.units = p.group.real_g * g.n * depth_chunks(p, ctx.threads);
    // Passes: zero-padded fp32 dy planes, the output (and the phase scatter when strided).
    n.pass_bytes = dx_pass_bytes(p, is_strided(p) ? 2 : 1);
    n.lane_use = lane_use_of(g.flops(), n);
    n.executed = ops::inside_tap_share(p);
    return evaluate(n, Machine::of(ctx.target));
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override {
    internal_check(a.diag, "dx_diag on a problem without the diagonal form");
    const int qt = choose_dx_qt(p, ctx.variant);
    a.use_diag();
    Var c0 = a.c0, qw = a.qw, c1 = a.c1, b = a.b;
    RVar sm = a.rd[0], skw = a.rd[1], skh = a.rd[2], skd = a.rd[3];
    Var wo("wo"), wi("wi"), par("par"), dco("dco"), dci("dci"), p1("p1");
    a.wd.compute_root().vectorize(a.c0);
    Func tile_owner = a.strided ? a.dxp : a.out;
    const int chunks = depth_chunks(p, ctx.threads);
    if (a.strided) {
      const int64_t qd_ext = phase_extent(p, 0);
      a.dxp.compute_root()
          .split(qw, wo, wi, qt)
          .split(a.qd, dco, dci, (int)ceil_div(qd_ext, chunks), TailStrategy::GuardWithIf)
          .reorder(c0, wi, wo, a.pw, a.qh, a.ph, dci, a.pd, dco, c1, b)
          .vectorize(c0)
          .unroll(wi)
          .fuse(dco, c1, p1)
          .fuse(p1, b, par)
          .parallel(par);
      a.dyd.compute_at(a.dxp, par).vectorize(a.c0);
      Var t3("t3");
      a.out.compute_root().vectorize(a.c0).fuse(a.d, a.b, t3).parallel(t3);
    } else {
      a.out.compute_root()
          .split(a.w, wo, wi, qt)
          .split(a.d, dco, dci, (int)ceil_div(p.geo.in[0], chunks), TailStrategy::GuardWithIf)
          .reorder(c0, wi, wo, a.h, dci, dco, c1, b)
          .vectorize(c0)
          .unroll(wi)
          .fuse(dco, c1, p1)
          .fuse(p1, b, par)
          .parallel(par);
      // The zero-padded fp32 dy planes a d step reads, built once each (sliding window over d).
      a.dyd.store_at(a.out, par).compute_at(a.out, dci).vectorize(a.c0);
    }
    a.accd.compute_at(tile_owner, wo).vectorize(c0).unroll(qw);
    Stage s = a.accd.update();
    s.reorder(c0, qw, sm, skw, skh, skd).vectorize(c0).unroll(qw);
    if (!a.strided) s.unroll(sm).unroll(skw);
  }
};


}  // namespace

const DxSchedule* dx_diag_schedule() { return the<DxDiag>(); }

}  // namespace tbex::sched
