/** dX schedules.
 *
 * The dX GEMM: M = input positions (qw..., in the stride-phase frame), N = input channels (c0, c1),
 * K = output channels x taps of the phase. "dx_tiled" keeps QT positions x CT channel blocks x 16
 * lanes in registers (QT*CT zmm accumulators); per reduction step it loads CT weight vectors and
 * broadcasts QT dy values. With strides the tile lives in the phase frame (all QT positions share
 * one phase, so one tap set), and a final pass scatters phases back to 6HD. */
#include <sstream>
#include <cstdio>
#include <cstdlib>

#include "schedules/registry.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct DxTiles {
  int qt = 8;  ///< positions along w (phase frame) per register tile
  int ct = 1;  ///< 16-channel input blocks per register tile
};

DxTiles choose_dx_tiles(const Problem& p) {
  const ConvGeometry& g = p.geo;
  DxTiles t;
  // Positions along w of one phase: w + pl = qw*sw + pw over w in [0, W).
  const int64_t pl = g.pads[4], sw = g.stride[2];
  const int64_t qw_extent = (g.in[2] - 1 + pl) / sw - pl / sw + (pl % sw == 0 ? 1 : 0);
  // 16 zmm accumulators measured best (24 spills): CT channel blocks x QT positions.
  t.ct = largest_divisor_upto(g.cin1(), 4);
  t.qt = (int)std::max<int64_t>(1, std::min<int64_t>(16 / t.ct, qw_extent));
  if (const char* e = getenv("TBEX_DX_TILE")) {  // experiments only
    sscanf(e, "%d,%d", &t.qt, &t.ct);
    t.qt = std::max(t.qt, 1), t.ct = std::max(t.ct, 1);
  }
  return t;
}

class DxTiled final : public DxSchedule {
 public:
  std::string name() const override { return "dx_tiled"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem& p, const Context& ctx) const override {
    DxTiles t = choose_dx_tiles(p);
    std::ostringstream s;
    s << "register tile 16c0 x " << t.ct << "c1 x " << t.qt << "w, "
      << (p.geo.stride[0] * p.geo.stride[1] * p.geo.stride[2] > 1 ? "stride-phase frame, " : "")
      << ctx.threads << " threads";
    return s.str();
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context&) const override {
    const DxTiles t = choose_dx_tiles(p);
    Var c0 = a.c0, qw = a.qw, pw = a.pw, qh = a.qh, ph = a.ph, qd = a.qd, pd = a.pd, c1 = a.c1,
        b = a.b;
    {
      Var t1("t1"), t2("t2");
      a.wz.compute_root().vectorize(a.c0).fuse(a.kd, a.g, t1).parallel(t1);
      a.dys.compute_root().vectorize(a.n, 16).fuse(a.d, a.b, t2).fuse(t2, a.g, t1).parallel(t1);
    }
    RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
    Var wo("wo"), wi("wi"), c1o("c1o"), c1i("c1i"), par("par"), par2("par2");
    Func tile_owner = a.strided ? a.dxp : a.out;
    if (a.strided) {
      a.dxp.compute_root()
          .split(qw, wo, wi, t.qt)
          .split(c1, c1o, c1i, t.ct)
          .reorder(c0, wi, c1i, wo, pw, qh, ph, c1o, qd, pd, b)
          .vectorize(c0)
          .unroll(wi)
          .unroll(c1i)
          .fuse(qd, pd, par)
          .fuse(par, b, par2)
          .parallel(par2);
      Var t3("t3");
      a.out.compute_root().vectorize(a.c0).fuse(a.d, a.b, t3).parallel(t3);
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
