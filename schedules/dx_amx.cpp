/** dx_amx: dense bf16 dX on AMX-BF16 tiles. The GEMM of dx_tiled (M = positions along w, N =
 * the 16 lanes of an input block, K = output channels x taps) with a whole 16 x 16 fp32
 * accumulator in one tile register: per (tap, K chunk) one tile load of dy (QT positions x KK
 * channels, the pair stage's rows: a position's channels back to back), one of the weights (the
 * pair stage's 64-byte rows of 16 lanes x 2 channels, the layout TDPBF16PS reads) and one tile
 * multiply. Products are exact in fp32 and sums fp32, as in every other bf16 schedule.
 *
 * Halide lowers the accumulator stored in MemoryType::AMXTile to tile instructions when the
 * update is exactly one vectorized multiply-add over (K, lanes, positions) with unpredicated
 * loads, and every tile is a whole 16 x 16 (a short or ragged row computes positions past its
 * end and drops them). Strided, the taps of a stride phase are the reduction's predicate, as in
 * the other schedules: it names only the tap loops outside the tile multiply, so the matcher
 * takes it and a phase walks its own taps (27 for stride 2, kernel 3, where walking every
 * phase's most, 64 slots, with zero weights past its taps ran 2x slower: g dX bf16 12.8 ->
 * 6.2 ms on Sapphire Rapids). Each phase's tiles are stored straight to their 6HD places (the
 * scatter form, so only where every extent is a multiple of its stride).
 *
 * A tile multiply reaches the unit's rate only with both operand tiles in L1 (Sapphire Rapids:
 * ~5 ns per multiply; one operand from L2 ~9 ns, both ~12). A whole tap set's weights (27 taps
 * x 128 channels: 108 KB) do not fit, so where visits stay long enough the tile walks one
 * (kd, kh) at a time and adds into sums kept per block of rows (splits_taps). */
#include <algorithm>

#include "schedules/amx_tile.h"
#include "schedules/loops.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** Positions per tile: always the 16 rows of a tile register (Halide 21 lowers no shorter
 * tile), positions past the row's end computed and dropped. */
constexpr int kTileRows = 16;

/** Unstrided, a tile's reduction is split per (kd, kh) when such a visit still runs at least
 * this many tile multiplies (Kw taps x cout_g / KK channel chunks). A visit ends in a drain:
 * the accumulator's multiply chain completes, the tile is stored and added to the sums (~45 ns
 * on Sapphire Rapids), and the next visit waits for it (Halide gives every visit the same tile
 * register). Measured there (bf16 dX): b_c3d (12 per visit) 52.5 -> 49.7 ms, c2 (6) 6.2 -> 5.8;
 * e1 (3) 0.75 -> 1.5: the drain outweighs what the split saves. */
constexpr int kMinSplitSteps = 6;

/** Rows of the input (h) whose fp32 sums a split visit adds into: ~16 KB of them, so the sums
 * stay in L1 beside one (kd, kh)'s weights. */
int split_rows(const Problem& p) {
  const int64_t wp = ceil_div(p.geo.in[2], kTileRows) * kTileRows;
  return (int)std::max<int64_t>(1, 16384 / (wp * 16 * 4));
}

/** Whether the tile's reduction is split per (kd, kh): see kMinSplitSteps. */
bool splits_taps(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return !is_strided(p) && g.kernel[0] * g.kernel[1] > 1 &&
         g.kernel[2] * (p.group.cout_g / ops::dx_k_step(p)) >= kMinSplitSteps;
}

class DxAmx final : public AmxTileSchedule<ops::DxAlgorithm> {
 public:
  std::string name() const override { return "dx_amx"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = amx_dx_pairs_why_not(p); !why.empty()) return why;
    if (is_strided(p) && !ops::dx_scatters(p))
      return "strided with an extent its stride does not divide: the phase frame is ragged "
             "(dx_tiled gathers it per depth slice)";
    return amx_offsets_why_not(std::max({dx_elems(p) * 4, staged_dy_elems(p) * 2, dy_elems(p) * 2}));
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    return "AMX-BF16 tile 16c0 x " + std::to_string(kTileRows) + "w, " +
           std::to_string(ops::dx_k_step(p)) + " channels per tile multiply, " +
           (splits_taps(p) ? "taps split per (kd, kh) over blocks of " +
                                 std::to_string(split_rows(p)) + " rows, "
                           : std::string()) +
           std::to_string(ctx.threads) + " threads";
  }
  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override;
  Estimate estimate(const Problem& p, const Context& ctx) const override;
};

Estimate DxAmx::estimate(const Problem& p, const Context& ctx) const {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  const int qt = kTileRows, kk = ops::dx_k_step(p);
  // Taps per phase: strided, a phase walks its own taps (on average K / s per dim); its
  // footprint is that of the phase with the most (slots).
  int slots[3];
  for (int i = 0; i < 3; ++i) slots[i] = ops::phase_tap_extent(g.kernel[i], g.stride[i], g.dilation[i]);
  const double taps = double(g.kernel[0]) * g.kernel[1] * g.kernel[2] /
                      (double(g.stride[0]) * g.stride[1] * g.stride[2]);
  LoopNest n;
  n.threads = ctx.threads;
  // A step: the dy tile (qt rows) and the weight tile, one tile multiply.
  const Machine m = Machine::of(ctx.target);
  n.tile = amx_step(qt, kk, m);
  // Strided, each tile is stored straight to its 6HD places (the scatter form): no drain.
  price_one_accumulator(n, m, /*drains=*/!is_strided(p));
  n.steps_per_visit = gd.cout_g / kk * taps;
  // Tiles of qt positions along each phase's rows (the whole row without a stride).
  n.visits = double(g.n) * g.in[0] * g.in[1] * g.stride[2] * ceil_div(phase_extent(p, 2), qt) *
             g.cin1();
  const double w_bytes = 32.0 * gd.cout_g * taps;  // one input block's bf16 lane pairs
  const double reach = g.stride[2] == 1 ? double(g.kernel[2] - 1) * g.dilation[2] : slots[2] - 1;
  const double dy_bytes = (qt + reach) * gd.cout_g * 2 * double(slots[0]) * slots[1];
  n.visit_bytes = w_bytes + dy_bytes;
  n.visit_footprint = (int64_t)n.visit_bytes;
  // The tiles along a row share their block's weights; a row streams its dy rows.
  n.chunk_footprint =
      int64_t(w_bytes) + int64_t(slots[0] * slots[1]) * g.out[2] * gd.cout_g * 2 * gd.real_g;
  n.units = g.n * phase_extent(p, 0);  // (batch, depth) rows; strided: depth of the phase frame
  // Passes: weights and dy staged as bf16 pairs (dy zero-padded by the taps' reach).
  n.pass_bytes = (dw_out_elems(p) + staged_dy_elems(p)) * (input_bytes(p) + 2);
  if (splits_taps(p)) {
    // Per (kd, kh): a visit walks kw and the channels only; its weights stay in L1 across the
    // tiles of a block of rows, whose dy rows it streams; every visit adds its tile read back
    // (16 x 16 fp32, read and written) to the block's sums.
    const double kdh = double(g.kernel[0]) * g.kernel[1];
    n.steps_per_visit /= kdh;
    n.visits *= kdh;
    n.visit_bytes = w_bytes / kdh + dy_bytes / kdh;
    n.visit_footprint = (int64_t)n.visit_bytes;
    n.chunk_footprint = int64_t(w_bytes / kdh) + int64_t(split_rows(p)) * (g.in[2] + reach) *
                                                      gd.cout_g * 2 + 16384;
    n.pass_bytes += n.visits * 16 * 16 * 4 * 2;
  }
  // Multiply-adds the tiles execute, useful or not (a shifted last tile repeats positions).
  n.lane_use = amx_lane_use(p, n, qt, kk);
  return evaluate(n, m);
}

void DxAmx::apply(ops::DxAlgorithm& a, const Problem& p, const Context&) const {
  const int qt = kTileRows, kk = ops::dx_k_step(p);
  a.use_tiles();
  // The pair stages: weights as (e, c0) rows of 64 bytes per channel pair, dy as rows of a
  // position's channels (both bf16).
  stage_tile_weights(a.wzk);
  stage_root(a.dysk, a.n, 16, {a.d, a.b, a.g}, {"t2", "t1"});
  if (a.scatter) {  // strided: each phase's tiles stored straight to 6HD, one block per tile
    const RVar rwo = scatter_tiles(a, qt, 1);
    amx_tile(a.acct, a.out, rwo, a.c0, a.qw, a.rt[0], kk, {a.rt[1], a.rt[2], a.rt[3]});
    return;
  }

  // Tiles of qt positions x 16 lanes along w; an input block's tiles sweep its (d, n) slab.
  // Unsplit, a visit walks every tap (the block's weights stay in L2 while its slab streams);
  // split, the tile walks (kw, channels) of one (kd, kh), and per (kd, kh) the tiles of a block
  // of rows run back to back (the weights stay in L1) and add into the block's fp32 sums.
  const bool split = splits_taps(p);
  Var wo("wo"), wi("wi"), ho("ho"), hi("hi"), par("par"), qo("qo"), qi("qi");
  a.out.compute_root().split(a.w, wo, wi, qt, TailStrategy::GuardWithIf);
  if (split)
    a.out.split(a.h, ho, hi, split_rows(p), TailStrategy::GuardWithIf)
        .reorder(a.c0, wi, wo, hi, ho, a.c1, a.d, a.b);
  else
    a.out.reorder(a.c0, wi, wo, a.h, a.c1, a.d, a.b).unroll(wi);
  a.out.vectorize(a.c0).fuse(a.d, a.b, par).parallel(par);
  if (!split) {
    amx_tile(a.acct, a.out, wo, a.c0, a.qw, a.rt[0], kk, {a.rt[1], a.rt[2], a.rt[3]});
    return;
  }
  Var u("u"), v("v");
  Func intm = a.acct.update().rfactor({{a.rt[2], u}, {a.rt[3], v}});
  // Whole tiles: a row's sums are padded to a multiple of qt positions (the rest dropped).
  a.acct.compute_at(a.out, ho).split(a.qw, qo, qi, qt, TailStrategy::RoundUp).vectorize(a.c0);
  a.acct.update()
      .split(a.qw, qo, qi, qt, TailStrategy::RoundUp)
      .reorder(a.c0, qi, qo, a.qh, a.rt[2], a.rt[3])
      .vectorize(a.c0);
  amx_tile(intm, a.acct, qo, a.c0, a.qw, a.rt[0], kk, {a.rt[1]});
}

}  // namespace

const DxSchedule* dx_amx_schedule() { return the<DxAmx>(); }

}  // namespace tbex::sched
