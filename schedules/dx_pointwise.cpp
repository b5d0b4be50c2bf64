/** dx_pointwise: dX of a 1x1x1 kernel (stride 1, no pads) as a plain GEMM. With one tap, dX is
 * dy (positions x output channels) times the weights (output x input channels), and dy is
 * already a packed panel: 6HD holds each 16-channel block of a (d, n) slab as a dense (H*W, 16)
 * matrix, so dy is read in place (fp32; 16-bit dy is converted once per slab), with no staging,
 * zero padding, taps or phases. The reduction over the output channels is split into 16-lane
 * blocks (the dy block and the lane within it, so no division per step); the steps of a block
 * are not unrolled: LLVM would then hoist the broadcasts of later steps and spill them.
 *
 * The register tile is QT positions along w x HT rows x CT input blocks: per step CT weight
 * vectors and QT*HT dy broadcasts feed QT*HT*CT FMAs (with CT = 1 the broadcasts ride in the
 * FMAs). A thread's unit is CT blocks of one (d, n) slab: the blocks' weights (Cout x CT x 64
 * bytes) stay in L1 while the tiles sweep the slab, whose dy panel streams from L2. 16-bit dy
 * with slabs enough for the threads: the unit is a whole slab, its dy converted once. */
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct PwTiles {
  int qt = 16;  ///< positions along w per register tile
  int ht = 1;   ///< rows per register tile
  int ct = 1;   ///< input blocks per register tile
};

const TileSpace& space() {
  static const TileSpace s("dx_pointwise", {"qt", "ht", "ct"});
  return s;
}

/** Positions of a tile along w covering W in the fewest tiles (no ragged last tile), at most
 * `most`. */
int64_t covering(int64_t W, int64_t most) { return ceil_div(W, ceil_div(W, std::max<int64_t>(1, most))); }

/** The tile with the fewest loads per FMA within the accumulators the target holds
 * (tile_accumulators), positions covering a row without a ragged tail (a broadcast takes a load
 * slot also when it rides in an FMA). */
PwTiles own_tiles(const Problem& p, const Halide::Target& target) {
  const ConvGeometry& g = p.geo;
  PwTiles best;
  double best_cost = 1e9;
  for (int ct = 1; ct <= 4; ++ct) {
    if (g.cin1() % ct) continue;
    for (int ht = 1; ht <= 2; ++ht) {
      const int acc = tile_accumulators(target, ct);
      const int64_t qt = covering(g.in[2], acc / (ct * ht));
      if (ht > 1 && (qt * 2 > acc / ct || ht > g.in[1])) continue;
      const double pos = double(qt * ht), loads = ct + pos;
      // Wasted lanes of a ragged row count as FMAs that do nothing.
      const double useful = double(g.in[2]) / (qt * ceil_div(g.in[2], qt));
      const double cost = loads / (ct * pos * useful) + 1.0 / useful;
      if (cost < best_cost - 1e-9) best_cost = cost, best = {(int)qt, ht, ct};
    }
  }
  return best;
}

PwTiles choose_tiles(const Problem& p, const Context& ctx, const std::string& variant) {
  PwTiles t = own_tiles(p, ctx.target);
  space().resolve(variant, {{"qt", &t.qt}, {"ht", &t.ht}, {"ct", &t.ct}});
  space().require(p.geo.cin1() % t.ct == 0 && t.qt <= p.geo.in[2] && t.ht <= p.geo.in[1],
                  variant,
                  "ct must divide C1 (" + std::to_string(p.geo.cin1()) + "), qt be at most W (" +
                      std::to_string(p.geo.in[2]) + ") and ht at most H (" +
                      std::to_string(p.geo.in[1]) + ")");
  return t;
}

/** 16-bit dy whose slab is a thread's whole unit, converted once: the tile spans every input
 * block, or there are slabs enough to keep every thread busy (4 each). */
bool per_slab(const Problem& p, const Context& ctx, const PwTiles& t) {
  const ConvGeometry& g = p.geo;
  return p.in_dtype != DType::kFloat32 &&
         (g.cin1() == t.ct || g.n * g.in[0] >= 4 * int64_t(ctx.threads));
}

std::string key_of(const PwTiles& t) {
  return space().key({{"qt", t.qt}, {"ht", t.ht}, {"ct", t.ct}});
}

class DxPointwise final : public DxSchedule {
 public:
  std::string name() const override { return "dx_pointwise"; }
  std::string why_not(const Problem& p) const override {
    const ConvGeometry& g = p.geo;
    if (g.kernel[0] * g.kernel[1] * g.kernel[2] != 1) return "kernel is not 1x1x1";
    if (is_strided(p)) return "strided: input positions are not a dense panel";
    for (int64_t pad : g.pads)
      if (pad != 0) return "padded: input positions are not a dense panel";
    return "";
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const PwTiles t = choose_tiles(p, ctx, ctx.variant);
    std::ostringstream s;
    s << "[" << key_of(t) << "] register tile 16c0 x " << t.ct << "c1 x " << t.qt << "w x "
      << t.ht << "h, reduction in 16-channel blocks, "
      << (p.in_dtype == DType::kFloat32 ? "dy read in place, "
          : per_slab(p, ctx, t)          ? "dy converted once per slab, threads over slabs, "
                                         : "dy converted per slab and input block, ")
      << ctx.threads << " threads";
    return s.str();
  }
  /** The own choice, then tiles of each block count with positions covering a row, as wide as
   * the accumulators allow and half that, 1 and 2 rows high. */
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    const ConvGeometry& g = p.geo;
    std::vector<std::string> keys{key_of(choose_tiles(p, ctx, ""))};
    for (int ct : {1, 2, 4})
      for (int ht : {1, 2}) {
        if (g.cin1() % ct || ht > g.in[1]) continue;
        const int most = std::max(1, tile_accumulators(ctx.target, ct) / (ct * ht));
        for (int64_t qt : {covering(g.in[2], most), std::min<int64_t>(most, g.in[2]),
                           std::max<int64_t>(1, std::min<int64_t>(most / 2, g.in[2]))})
          keys.push_back(key_of({(int)qt, ht, ct}));
      }
    return TileSpace::candidates(keys, 8);
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const PwTiles t = choose_tiles(p, ctx, ctx.variant);
    const ConvGeometry& g = p.geo;
    const int pos = t.qt * t.ht;
    LoopNest n;
    n.threads = ctx.threads;
    // Per step: ct weight vectors and pos broadcasts (a load slot each, also when ridden in
    // the FMAs with ct = 1).
    n.tile = {double(pos * t.ct), double(t.ct + pos), pos * t.ct, t.ct + (t.ct > 1 ? pos : 1), 0,
              double(pos)};
    n.steps_per_visit = double(p.group.cout_g);
    const int64_t slabs = g.n * g.in[0];
    const int64_t units = slabs * (g.cin1() / t.ct);
    n.visits = double(units) * ceil_div(g.in[2], t.qt) * ceil_div(g.in[1], t.ht);
    // A visit streams its positions' dy lines (Cout channels each); the weights stay in L1.
    n.visit_bytes = double(pos) * p.group.cout_g * 4;
    n.visit_footprint = (int64_t)n.visit_bytes + t.ct * 64 * p.group.cout_g;
    n.chunk_footprint = g.in[1] * g.in[2] * g.cout1() * 64 + t.ct * 64 * p.group.cout_g;
    n.units = per_slab(p, ctx, t) ? slabs : units;
    // Passes: the weights staged in fp32 (dx is stored from the tiles, as in dx_tiled). 16-bit
    // dy is converted per unit into a slab's buffer that stays in cache (a slab's fp32 dy is
    // H*W*Cout*4 bytes), so it is priced as dx_tiled's rows converted as the tiles reach them:
    // dy read once from memory, a conversion and a store per vector each time it is converted.
    // Priced as a whole pass over memory instead, d dX f16 (4.9 MB) came out a DRAM pass at 2
    // threads and lost to dx_tiled, which measured 6.3 ms against dx_pointwise's 5.9 (Zen 1).
    const Machine& m = Machine::of(ctx.target);
    n.pass_bytes = dw_out_elems(p) * (input_bytes(p) + 4);
    if (p.in_dtype != DType::kFloat32) {
      const double conversions = per_slab(p, ctx, t) ? 1.0 : double(g.cin1() / t.ct);
      n.pass_bytes += dy_elems(p) * input_bytes(p);
      n.pass_ops = 2 * dy_elems(p) * conversions / m.lanes;
    }
    n.lane_use = lane_use_of(g.flops(), n);
    return evaluate(n, m);
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const PwTiles t = choose_tiles(p, ctx, ctx.variant);
    const Var c0 = a.c0, c1 = a.c1;
    Var wo("wo"), wi("wi"), ho("ho"), hi("hi"), c1o("c1o"), c1i("c1i"), t1("t1"), par("par");
    stage_dx_weights(a, p, t.ct);
    a.out.compute_root()
        .split(a.w, wo, wi, t.qt)
        .split(a.h, ho, hi, t.ht)
        .split(c1, c1o, c1i, t.ct)
        .reorder(c0, wi, hi, c1i, wo, ho, c1o, a.d, a.b)
        .vectorize(c0)
        .unroll(wi)
        .unroll(hi)
        .unroll(c1i)
        .fuse(a.d, a.b, t1);
    if (per_slab(p, ctx, t)) {
      // 16-bit dy: a thread takes whole slabs so each slab's dy is converted once (not once
      // per input block).
      a.out.parallel(t1);
      a.dys.compute_at(a.out, t1).vectorize(a.n, 16);
    } else {
      a.out.fuse(c1o, t1, par).parallel(par);
      if (p.in_dtype != DType::kFloat32) a.dys.compute_at(a.out, par).vectorize(a.n, 16);
    }
    // The tile: positions (qw, qh in the unit-stride frame) and blocks unrolled; the reduction
    // over output channels in dy's blocks of 16 (taps: extent 1).
    RVar rno("rno"), rni("rni");
    a.acc.compute_at(a.out, wo).vectorize(c0).unroll(a.qw).unroll(a.qh).unroll(c1);
    a.acc.update()
        .split(a.r[0], rno, rni, 16)
        .reorder(c0, a.qw, a.qh, c1, rni, rno, a.r[1], a.r[2], a.r[3])
        .vectorize(c0)
        .unroll(a.qw)
        .unroll(a.qh)
        .unroll(c1);
  }
};

}  // namespace

const DxSchedule* dx_pointwise_schedule() { return the<DxPointwise>(); }

}  // namespace tbex::sched
