/** dw_cout_lanes: dW for few input channels per block (a network's stem: Cin = 3).
 *
 * dw_tiled vectorizes over the 16 c0 lanes of an input channel block; with 3 valid channels, 13 of
 * them compute padding. This schedule vectorizes over output channels instead: 16 lanes of n
 * (dy's channels, contiguous) times an x value broadcast, in a register tile of (valid c0) x (kw
 * taps) x (n vectors). acc is computed at the valid c0 lanes only (the algorithm reads it at
 * clamped lanes; the output stage writes the padding lanes as 0) and stored n-innermost, so the
 * output stage transposes it into FRACTAL_Z_3D's c0-innermost order. K chunking, the reduction
 * split across threads and the tile spread are dw_tiled's (schedules/loops.h).
 *
 * The pair form (bf16 inputs where the target's dot products pay): the same tile over the
 * algorithm's row pairs (DwAlgorithm::pairs), each step a VDPBF16PS per accumulator with a dy
 * pair vector (16 channels x 2 rows, staged per chunk) and an x pair broadcast (one lane of
 * two rows, staged at the valid lanes). */
#include <algorithm>
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

constexpr int64_t kMaxRootXsBytes = int64_t(64) << 20;  ///< staged x held whole up to this

struct FewCinTiles {
  int cv = 1;   ///< valid input lanes (c0 of the tile)
  int nv = 1;   ///< 16-lane vectors of output channels per register tile
  int kwt = 1;  ///< kw taps per register tile
  int ch = 1;   ///< output rows (ho; row pairs in the pair form) per reduction chunk
  int parts = 1;  ///< reduction split into this many partial sums (dw_parts; not the threads)
  int pair = 1;   ///< 2: bf16 dot products over row pairs (the pair form)
  bool stage_x = true;  ///< stage padded fp32 x at its valid lanes (stage_x_rows)
  bool xs_root = true;  ///< all of it once (small), else per batch
  int64_t tiles = 1;
};

const TileSpace& space() {
  static const TileSpace s("dw_cout_lanes", {"nv", "kwt", "ch", "parts", "pair"});
  return s;
}

/** The register tiles a target holds: cv x kwt x nv accumulators within tile_accumulators, or, on
 * AVX-512 with one channel vector, up to 24 (each x broadcast then feeds one FMA or dot as an
 * embedded broadcast, so only the dy vector stays live beside them). */
bool tile_fits(const Problem& p, const Context& ctx, int cv, int nv, int kwt) {
  const int most = ctx.target.has_feature(Target::AVX512) && nv == 1 ? 24 : tile_accumulators(ctx.target, nv);
  return p.group.cout_g % (16 * nv) == 0 && p.geo.kernel[2] % kwt == 0 && cv * nv * kwt <= most;
}

FewCinTiles choose_tiles(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  FewCinTiles t;
  t.cv = cin_valid(p);
  t.pair = dw_pair_of(p, ctx.target, space(), ctx.variant);
  // Per reduction point a tile loads nv dy vectors and broadcasts cv*kwt x values for
  // cv*nv*kwt FMAs: take the fewest loads per FMA within the accumulators the target holds.
  const int nblocks = (int)(p.group.cout_g / 16);
  double best = 1e9;
  for (int nv = 1; nv <= nblocks; ++nv) {
    for (int kwt = 1; kwt <= g.kernel[2]; ++kwt) {
      if (!tile_fits(p, ctx, t.cv, nv, kwt)) continue;
      const double cost = double(nv + t.cv * kwt) / (t.cv * nv * kwt);
      if (cost < best) best = cost, t.nv = nv, t.kwt = kwt;
    }
  }
  // Pairs: one channel vector and the most kw taps that fit, so every x pair is an embedded
  // broadcast of its one dot (a broadcast into a register shared by nv dots costs Zen 4's
  // vector pipes): the stem's 3c0 x 7kw x 16n ran 26.7 ms against 31.7 for 3c0 x 1kw x 64n.
  // Not where that leaves too few accumulators to cover the dot latency.
  for (int kwt = (int)g.kernel[2]; t.pair == 2 && kwt >= 1; --kwt) {
    if (!tile_fits(p, ctx, t.cv, 1, kwt)) continue;
    if (t.cv * kwt >= 8) t.nv = 1, t.kwt = kwt;
    break;
  }
  // A chunk's dy rows (every output channel) stay in L1 while all tiles stream them (on the
  // stem, a couple of rows ran best: fewer re-enter the tiles too often, more leave L1). A row
  // pair of bf16 takes the bytes of one fp32 row.
  const int64_t row_bytes = g.out[2] * p.group.cout_g * 4, rows = dw_rows_of(p, t.pair);
  t.ch = largest_divisor_upto(rows, std::max<int64_t>(1, (32 << 10) / row_bytes));
  const VariantFields f = space().resolve(ctx.variant, {{"nv", &t.nv}, {"kwt", &t.kwt}, {"ch", &t.ch}});
  space().require((!(f.count("nv") || f.count("kwt")) || tile_fits(p, ctx, t.cv, t.nv, t.kwt)) &&
                      rows % t.ch == 0,
                  ctx.variant,
                  "16*nv must divide cout_g (" + std::to_string(p.group.cout_g) + "), kwt Kw (" +
                      std::to_string(g.kernel[2]) + "), " + std::to_string(t.cv) +
                      " lanes x nv x kwt accumulators fit the target's registers, and ch divide "
                      "the rows (" + std::to_string(rows) + (t.pair == 2 ? " row pairs)" : ")"));
  t.tiles = (p.group.cout_g / (16 * t.nv)) * (g.kernel[2] / t.kwt) * g.kernel[1] * g.kernel[0] *
            p.group.real_g;
  t.stage_x = stage_x_rows(p);
  int64_t xs_bytes = 4 * t.cv * g.n * p.group.real_g;
  for (int i = 0; i < 3; ++i) xs_bytes *= g.in[i] + g.pads[2 * i] + g.pads[2 * i + 1];
  t.xs_root = xs_bytes <= kMaxRootXsBytes;
  // Few tiles balance badly over threads: split the reduction into a fixed number of parts.
  if (t.tiles < 8) t.parts = dw_parts(p, kDwSplitParts);
  if (f.count("parts")) t.parts = dw_parts_of_variant(p, space(), ctx.variant, f.at("parts"));
  return t;
}

std::string key_of(const Problem& p, const FewCinTiles& t) {
  VariantFields f{{"nv", t.nv}, {"kwt", t.kwt}, {"ch", t.ch}, {"parts", t.parts}};
  if (dw_pairs_apply(p)) f["pair"] = t.pair;
  return space().key(f);
}

/** "" (the own choice) first, then the other form's own tile (where the target computes pairs
 * natively), and in each form both tiles the rules weigh: the fewest loads per FMA, and one
 * channel vector with the most kw taps that fit (every broadcast folded into its one FMA or dot). */
std::vector<std::string> candidates_of(const Problem& p, const Context& ctx) {
  Context own = ctx;
  own.variant = "";
  const FewCinTiles d = choose_tiles(p, own);
  std::vector<int> forms{d.pair};
  if (dw_other_pair_offered(p, ctx.target, d.pair)) forms.push_back(3 - d.pair);
  std::vector<std::string> keys{key_of(p, d)};
  Context fmas = own;
  if (dw_pairs_apply(p)) fmas.variant = "pair=1";
  const FewCinTiles f = choose_tiles(p, fmas);
  for (int pair : forms) {
    Context c = own;
    c.variant = "pair=" + std::to_string(pair);
    FewCinTiles t = dw_pairs_apply(p) ? choose_tiles(p, c) : d;
    keys.push_back(key_of(p, t));
    if (tile_fits(p, ctx, d.cv, f.nv, f.kwt)) {
      t.nv = f.nv, t.kwt = f.kwt;
      keys.push_back(key_of(p, t));
    }
    for (int kwt = (int)p.geo.kernel[2]; kwt >= 1; --kwt) {
      if (!tile_fits(p, ctx, d.cv, 1, kwt)) continue;
      t.nv = 1, t.kwt = kwt;
      if (d.cv * kwt >= 8) keys.push_back(key_of(p, t));
      break;
    }
  }
  return TileSpace::candidates(keys, 6);
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
    s << "[" << key_of(p, t) << "] register tile " << t.cv << "c0 x " << t.kwt << "kw x "
      << 16 * t.nv << "n (n in lanes), " << (t.pair == 2 ? "bf16 pair dot products over row pairs, " : "")
      << t.tiles << " tiles over " << ctx.threads << " threads, K chunks of " << t.ch
      << (t.pair == 2 ? " row pairs x " : " rows x ") << p.geo.out[2] << " cols, "
      << (!t.stage_x ? "x read in place (sparse rows), " : t.xs_root ? "x staged whole, " : "x staged per batch, ")
      << (t.parts > 1 ? "reduction split in " + std::to_string(t.parts) + " parts, " : "")
      << (t.pair == 2 ? "dy staged as bf16 row pairs" : "dy staged n-innermost");
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    return candidates_of(p, ctx);
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const FewCinTiles t = choose_tiles(p, ctx);
    const ConvGeometry& g = p.geo;
    LoopNest n;
    n.threads = ctx.threads;
    // Per step: nv dy vectors (16 output channels each; pairs: of two rows), cv x kwt broadcasts
    // of x (each feeding nv FMAs or dots; one feeding a single one is folded into it).
    n.tile = {double(t.cv * t.nv * t.kwt), double(t.nv + t.cv * t.kwt), t.cv * t.nv * t.kwt,
              t.nv + 1, 0, double(t.cv * t.kwt)};
    n.tile.dots = t.pair == 2;
    n.steps_per_visit = double(t.ch * g.out[2]);
    n.visits = double(t.tiles) * g.n * g.out[0] * (dw_rows_of(p, t.pair) / t.ch);
    // A visit's rows (pairs: a row pair of bf16, the bytes of one fp32 row).
    const double x_row = double(g.out[2] * g.stride[2] + (t.kwt - 1) * g.dilation[2]) * t.cv * 4;
    n.visit_bytes = t.ch * (x_row + double(g.out[2]) * t.nv * 64);
    n.visit_footprint = (int64_t)n.visit_bytes;
    const int64_t w_pad = padded_w(p);
    n.chunk_footprint = dw_staged_x_rows(p, t.ch, t.pair) * w_pad * t.cv * 4 * g.kernel[0] * p.group.real_g +
                        t.ch * g.out[2] * 4 * p.group.cout_g * p.group.real_g;
    n.units = t.parts > 1 ? t.parts : t.tiles;
    // Passes: x staged at its valid lanes (pairs: every row twice, in bf16), dy staged
    // n-innermost (pairs: as row pairs) per chunk, the transposing output stage (a gather per
    // output element) and the partial sums.
    // Staged whole: the padded frame's rows, or one row pair per output row pair (Kh = 1).
    const double x_rows = t.pair == 2 && ops::pairs_staged_by_output_row(p)
                              ? double(dw_rows_of(p, 2))
                              : double(g.in[1] + g.pads[2] + g.pads[3]);
    const double x_elems = double(g.n) * g.in[0] * p.group.real_g * t.cv * x_rows * w_pad;
    const double in_b = input_bytes(p), out_elems = dw_out_elems(p);
    const double x_pass = t.pair == 2 ? 2 * (in_b + 2) : in_b + 4, dy_pass = t.pair == 2 ? in_b + 2 : in_b + 4;
    n.pass_bytes = (t.stage_x ? x_elems * x_pass : 0) + dy_elems(p) * dy_pass +
                   out_elems * 8 * (t.parts > 1 ? 1 + t.parts : 1);
    n.pass_ops = out_elems;
    n.lane_use = lane_use_of(g.flops() / t.pair, n);
    n.executed = ops::inside_tap_share(p);  // row pairs skip the pads as rows do
    return evaluate(n, Machine::of(ctx.target));
  }

  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const FewCinTiles t = choose_tiles(p, ctx);
    if (t.pair == 2) a.use_pairs();
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

    // x at its valid lanes is a fraction of x's bytes: staged (fp32, in the padded frame; pairs:
    // bf16 of two rows, a lane's pair adjacent) once, or per batch when large. dy rows with n
    // innermost (pairs: two rows' channel vectors interleaved) are staged per chunk, in cache
    // right before the thread's tiles consume them.
    Func xs = t.pair == 2 ? a.xs : a.xr;
    if (t.stage_x) {
      if (t.xs_root) xs.compute_root().parallel(a.d);
      else xs.compute_at(red.body, red.outer);
      if (t.pair == 2) xs.vectorize(a.e);
      else xs.vectorize(c0);
    }
    if (t.pair == 2) stage_dy_pairs(a, red);
    else a.dys.compute_at(red.body, red.chunk).vectorize(n, 16);
    red.intm.compute_at(red.body, tgi).reorder_storage(n, c0).reorder(n, c0, kw).vectorize(n, 16)
        .unroll(n).unroll(c0).unroll(kw);
    Stage u = red.intm.update();
    if (t.pair == 2) u.reorder(a.r[4], n, c0, kw, a.r[0], red.rows).atomic().vectorize(a.r[4]);
    else u.reorder(n, c0, kw, a.r[0], red.rows);
    u.vectorize(n, 16).unroll(n).unroll(c0).unroll(kw);

    // The transpose to c0-innermost: gathers over the few valid lanes of the n-innermost acc.
    stage_root(a.out, c0, 0, {a.kd, a.g}, {"kdg"});
  }
};

}  // namespace

const DwSchedule* dw_cout_lanes_schedule() { return the<DwCoutLanes>(); }

}  // namespace tbex::sched
