/** dw_cout_lanes: dW for few input channels per block (a network's stem: Cin = 3).
 *
 * dw_tiled vectorizes over the 16 c0 lanes of an input channel block; with 3 valid channels, 13 of
 * them compute padding. This schedule vectorizes over output channels instead: 16 lanes of n
 * (dy's channels, contiguous) times an x value broadcast, in a register tile of (valid c0) x (kw
 * taps) x (n vectors). acc is computed at the valid c0 lanes only (the algorithm reads it at
 * clamped lanes; the output stage writes the padding lanes as 0) and stored n-innermost, so the
 * output stage transposes it into FRACTAL_Z_3D's c0-innermost order. K chunking, the reduction
 * split across threads and the tile spread are dw_tiled's (schedules/loops.h). */
#include <algorithm>
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

constexpr int64_t kMaxRootXsBytes = int64_t(64) << 20;  ///< staged x held whole up to this

struct FewCinTiles {
  int cv = 1;   ///< valid input lanes (c0 of the tile)
  int nv = 1;   ///< 16-lane vectors of output channels per register tile
  int kwt = 1;  ///< kw taps per register tile
  int ch = 1;   ///< output rows (ho) per reduction chunk
  int parts = 1;  ///< reduction split into this many partial sums (dw_parts; not the threads)
  bool stage_x = true;  ///< stage padded fp32 x at its valid lanes (stage_x_rows)
  bool xs_root = true;  ///< all of it once (small), else per batch
  int64_t tiles = 1;
};

FewCinTiles choose_tiles(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  FewCinTiles t;
  t.cv = cin_valid(p);
  // Per reduction point a tile loads nv dy vectors and broadcasts cv*kwt x values for
  // cv*nv*kwt FMAs: take the fewest loads per FMA within the accumulators the target holds.
  const int nblocks = (int)(p.group.cout_g / 16);
  double best = 1e9;
  for (int nv = 1; nv <= nblocks; ++nv) {
    if (nblocks % nv) continue;
    for (int kwt = 1; kwt <= g.kernel[2]; ++kwt) {
      const int accs = t.cv * nv * kwt;
      if (g.kernel[2] % kwt || accs > tile_accumulators(ctx.target, nv)) continue;
      const double cost = double(nv + t.cv * kwt) / accs;
      if (cost < best) best = cost, t.nv = nv, t.kwt = kwt;
    }
  }
  // A chunk's dy rows (every output channel) stay in L1 while all tiles stream them (on the
  // stem, a couple of rows ran best: fewer re-enter the tiles too often, more leave L1).
  const int64_t row_bytes = g.out[2] * p.group.cout_g * 4;
  t.ch = largest_divisor_upto(g.out[1], std::max<int64_t>(1, (32 << 10) / row_bytes));
  t.tiles = (p.group.cout_g / (16 * t.nv)) * (g.kernel[2] / t.kwt) * g.kernel[1] * g.kernel[0] *
            p.group.real_g;
  t.stage_x = stage_x_rows(p);
  int64_t xs_bytes = 4 * t.cv * g.n * p.group.real_g;
  for (int i = 0; i < 3; ++i) xs_bytes *= g.in[i] + g.pads[2 * i] + g.pads[2 * i + 1];
  t.xs_root = xs_bytes <= kMaxRootXsBytes;
  // Few tiles balance badly over threads: split the reduction into a fixed number of parts.
  if (t.tiles < 8) t.parts = dw_parts(p, kDwSplitParts);
  return t;
}

class DwCoutLanes final : public DwSchedule {
 public:
  std::string name() const override { return "dw_cout_lanes"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = few_cin_why_not(p, "dw_tiled"); !why.empty()) return why;
    if (cout_valid(p) < 16)
      return "only " + std::to_string(cout_valid(p)) + " output channels per real group: n lanes would be padding";
    return dw_accumulator_why_not(p);
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const FewCinTiles t = choose_tiles(p, ctx);
    std::ostringstream s;
    s << "register tile " << t.cv << "c0 x " << t.kwt << "kw x " << 16 * t.nv << "n (n in lanes), "
      << t.tiles << " tiles over " << ctx.threads << " threads, K chunks of " << t.ch << " rows x "
      << p.geo.out[2] << " cols, "
      << (!t.stage_x ? "x read in place (sparse rows), " : t.xs_root ? "x staged whole, " : "x staged per batch, ")
      << (t.parts > 1 ? "reduction split in " + std::to_string(t.parts) + " parts, " : "")
      << "dy staged n-innermost";
    return s.str();
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const FewCinTiles t = choose_tiles(p, ctx);
    const ConvGeometry& g = p.geo;
    LoopNest n;
    n.threads = ctx.threads;
    // Per step: nv dy vectors (16 output channels each), cv x kwt broadcasts of x.
    n.tile = {double(t.cv * t.nv * t.kwt), double(t.nv + t.cv * t.kwt), t.cv * t.nv * t.kwt,
              t.nv + 1, 0};
    n.steps_per_visit = double(t.ch * g.out[2]);
    n.visits = double(t.tiles) * g.n * g.out[0] * (g.out[1] / t.ch);
    const double x_row = double(g.out[2] * g.stride[2] + (t.kwt - 1) * g.dilation[2]) * t.cv * 4;
    n.visit_bytes = t.ch * (x_row + double(g.out[2]) * t.nv * 64);
    n.visit_footprint = (int64_t)n.visit_bytes;
    const int64_t w_pad = padded_w(p);
    n.chunk_footprint = x_rows_of(p, t.ch) * w_pad * t.cv * 4 * g.kernel[0] * p.group.real_g +
                        t.ch * g.out[2] * 4 * p.group.cout_g * p.group.real_g;
    n.units = t.parts > 1 ? t.parts : t.tiles;
    // Passes: x staged at its valid lanes, dy staged n-innermost per chunk, the transposing
    // output stage (a gather per output element) and the partial sums.
    const double x_elems = double(g.n) * g.in[0] * p.group.real_g * t.cv *
                           (g.in[1] + g.pads[2] + g.pads[3]) * w_pad;
    const double in_b = input_bytes(p), out_elems = dw_out_elems(p);
    n.pass_bytes = (t.stage_x ? x_elems * (in_b + 4) : 0) + dy_elems(p) * (in_b + 4) +
                   out_elems * 8 * (t.parts > 1 ? 1 + t.parts : 1);
    n.pass_ops = out_elems;
    n.lane_use = lane_use_of(g.flops(), n);
    n.executed = ops::inside_tap_share(p);
    return evaluate(n, Machine::of(ctx.target));
  }

  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const FewCinTiles t = choose_tiles(p, ctx);
    const Var c0 = a.c0, n = a.n, kw = a.kw;
    a.acc.bound(c0, 0, t.cv).bound(n, 0, (int)p.group.cout_g);
    DwReduction red = split_dw_reduction(a.acc, a.r, p, t.parts, t.ch);
    if (t.parts > 1) {
      a.acc.compute_root().reorder_storage(n, c0).vectorize(n, 16);
      a.acc.update().reorder(n, c0).vectorize(n, 16);
    }
    Var no("no"), ni("ni"), kwo("kwo"), kwi("kwi");
    red.body.compute_root().reorder_storage(n, c0).reorder(n, c0).vectorize(n, 16);
    Stage s = red.body.update();
    s.split(n, no, ni, 16 * t.nv)
        .split(kw, kwo, kwi, t.kwt)
        .reorder(ni, c0, kwi, no, kwo, a.kh, a.c1g, a.kd, a.g, red.chunk, red.mid, red.outer);
    const Var tgi =
        spread_tiles(s, {no, kwo, a.kh, a.kd, a.g}, t.tiles, ctx.threads, red, t.parts, {ni, c0, kwi}, {a.c1g});
    s.vectorize(ni, 16).unroll(ni).unroll(c0).unroll(kwi);

    // x at its valid lanes is a fraction of x's bytes: staged (fp32, in the padded frame) once,
    // or per batch when large. dy rows with n innermost are staged per chunk, in cache right
    // before the thread's tiles consume them.
    if (t.stage_x && t.xs_root) a.xr.compute_root().vectorize(c0).parallel(a.d);
    else if (t.stage_x) a.xr.compute_at(red.body, red.outer).vectorize(c0);
    a.dys.compute_at(red.body, red.chunk).vectorize(n, 16);
    red.intm.compute_at(red.body, tgi).reorder_storage(n, c0).reorder(n, c0, kw).vectorize(n, 16)
        .unroll(n).unroll(c0).unroll(kw);
    red.intm.update().reorder(n, c0, kw, a.r[0], red.rows).vectorize(n, 16).unroll(n).unroll(c0).unroll(kw);

    // The transpose to c0-innermost: gathers over the few valid lanes of the n-innermost acc.
    stage_root(a.out, c0, 0, {a.kd, a.g}, {"kdg"});
  }
};

}  // namespace

const DwSchedule* dw_cout_lanes_schedule() { return the<DwCoutLanes>(); }

}  // namespace tbex::sched
