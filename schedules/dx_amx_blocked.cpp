/** dx_amx_blocked: bf16 dX on AMX-BF16 tiles in 2 x 2 blocks (two tiles of 16 positions of
 * one stride phase along w x two input blocks: four accumulator tiles sharing each loaded dy and
 * weight tile). Halide 21 lowers one accumulator per allocation, so the blocked loop is tbex's own
 * inner kernel (tbex_amx_dx, runtime/src/amx_dx.cpp), called as a Halide extern stage per
 * (batch, depth, block of rows). The kernel stages the dy rows each call reaches itself (a
 * position's kk channels side by side) and skips the taps whose rows lie in the padding along h
 * and d; Halide stages the weights (as dx_amx does) and writes the 6HD output (bias, cast) from
 * the extern's fp32 sums.
 *
 * Measured on Sapphire Rapids (b_c3d, one thread, the inner loops alone): 29 ms against 37 for
 * the same loops with one accumulator per multiply and 47 for dx_amx; a tile load whose rows
 * are strided 256 bytes apart (a position's channels, as dx_amx's dy stage) cost 5-10% more than
 * one contiguous run. */
#include <algorithm>

#include "schedules/amx_tile.h"
#include "tbex/amx_dx.h"
#include "schedules/loops.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

constexpr int kTileRows = 16;

/** Rows (h) of one extern call: its fp32 sums (every block of the row) ~128 KB, so out's pass
 * over them reads L2; the most rows up to that dividing H (no ragged last call). */
int call_rows(const Problem& p) {
  const ConvGeometry& g = p.geo;
  const int64_t row_bytes = ceil_div(g.in[2], kTileRows) * kTileRows * g.cin1() * 16 * 4;
  const int want = (int)std::max<int64_t>(1, 131072 / row_bytes);
  for (int r = std::min<int>(want, (int)g.in[1]); r > 1; --r)
    if (g.in[1] % r == 0) return r;
  return 1;
}

class DxAmxBlocked final : public AmxTileSchedule<ops::DxAlgorithm> {
 public:
  std::string name() const override { return "dx_amx_blocked"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = amx_dx_pairs_why_not(p); !why.empty()) return why;
    // Halide's stages around the kernel (weights, bias and cast) compile without LargeBuffers.
    return amx_offsets_why_not(std::max(dx_elems(p) * 4, dy_elems(p) * 2));
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    return "AMX-BF16 2 x 2 blocks of 16c0 x " + std::to_string(kTileRows) + "w tiles (tbex_amx_dx), " +
           std::to_string(ops::dx_k_step(p)) + " channels per tile multiply, " +
           std::to_string(call_rows(p)) + " rows per call (dy staged per call), " +
           std::to_string(ctx.threads) + " threads";
  }
  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override;
  Estimate estimate(const Problem& p, const Context& ctx) const override;
};

Estimate DxAmxBlocked::estimate(const Problem& p, const Context& ctx) const {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  const int kk = ops::dx_k_step(p);
  // A position walks its stride phase's taps: on average walked / positions per dim (K without
  // a stride), of which inside_share's lie inside the volume.
  double taps = 1;
  for (int i = 0; i < 3; ++i)
    taps *= double(ops::tap_pairs_1d(p.op, g.in[i], g.out[i], g.kernel[i], g.stride[i], g.dilation[i],
                                     g.pads[2 * i])
                       .walked) /
            g.in[i];
  // The rows the kernel walks: each call's rows as one where it flattens them.
  const int rows = call_rows(p);
  const bool flat = !is_strided(p) && amx_dx_flat_rows((int)g.kernel[1], (int)g.kernel[2], (int)g.pads[2],
                                                       (int)g.pads[4], (int)g.in[2], (int)g.out[2], rows);
  const int64_t row_positions = flat ? rows * g.in[2] : g.in[2];
  const double walked_rows = flat ? double(g.in[1]) / rows : double(g.in[1]);
  // A row's tiles: 16 positions of one stride phase along w each, in pairs per phase.
  int64_t tiles = 0, tile_pairs = 0, phase_tiles = 0;
  for (int64_t j = 0; j < std::min(g.stride[2], row_positions); ++j) {
    const int64_t t = ceil_div(ceil_div(row_positions - j, g.stride[2]), kTileRows);
    tiles += t, tile_pairs += ceil_div(t, 2), phase_tiles = std::max(phase_tiles, t);
  }
  const int64_t block_pairs = gd.real_g * ceil_div(gd.cin1_g, 2);
  const Machine m = Machine::of(ctx.target);
  LoopNest n;
  n.threads = ctx.threads;
  // A step: one channel chunk of one tap, 4 tile multiplies on two dy and two weight tiles
  // (fewer at a ragged edge or with one block per group). The measured rate covers the operand
  // stream (dy rows from L1 across kw, weights from L2), so no memory term is added.
  // The operand tiles' loads bound a step (kBlockMultiplyCost each: one per multiply in a
  // 2 x 2 block, three per two with one block per group, as e1's groups of 16 channels have:
  // 1.45 ms there against dx_amx's 1.17 on Emerald Rapids with AMX, which a multiply's price
  // had ranked the other way).
  const double loads = double(tiles) / tile_pairs + double(g.cin1()) / block_pairs;
  n.tile.fmas = 0;
  n.tile.loads = 2 * kTileRows + 2 * (kk / 2.0);
  n.tile.accumulators = 4, n.tile.operands = 0;
  n.tile.unit_cycles = loads * kBlockMultiplyCost * m.tile_multiply_cycles;
  n.steps_per_visit = taps * gd.cout_g / kk;
  n.visits = double(g.n) * g.in[0] * walked_rows * tile_pairs * block_pairs;
  n.visit_cycles = kBlockDrainCost * m.tile_multiply_cycles;
  // dy's reach of a tile along each dim (phase taps: one tap's row is s positions of dX).
  auto span = [&](int i) { return double((g.kernel[i] - 1) * g.dilation[i]) / g.stride[i] + 1; };
  const double all_taps = double(g.kernel[0]) * g.kernel[1] * g.kernel[2];
  n.visit_footprint = int64_t(2 * 32.0 * gd.cout_g * all_taps +
                              (2 * kTileRows + span(2) - 1) * gd.cout_g * 2 * span(0) * span(1));
  n.chunk_footprint = n.visit_footprint;
  n.units = g.n * g.in[0];
  // Taps whose dy row lies in the padding along h or d are skipped (along w, a tile's positions
  // straddle the edge).
  n.executed = ops::inside_share(p, 0) * ops::inside_share(p, 1);
  // Passes: the weights staged as bf16; each call's staging, reading dy where it lies (the
  // depth's taps, the call's rows and the reach along h, whole tiles and the reach along w) and
  // copying 32-byte runs into L2; without blocks_out, the extern's fp32 sums written and read
  // back by out.
  const double calls = double(g.n) * g.in[0] * ceil_div(g.in[1], rows);
  const double staged_rows = flat ? 1 : double(rows - 1) / g.stride[1] + span(1);
  const double staged_taps = double(g.kernel[0]) / g.stride[0];
  const double staged = calls * staged_taps * staged_rows * gd.real_g * gd.cout_g *
                        (phase_tiles * kTileRows + span(2) - 1);
  n.pass_bytes = dw_out_elems(p) * (input_bytes(p) + 2) + staged * input_bytes(p) +
                 (ops::dx_blocks_out(p) ? 0 : dx_elems(p) * 8);
  n.pass_ops = staged * kStageCopyCycles * m.issue;
  const double walked = double(g.n) * g.in[0] * walked_rows * tiles * kTileRows * g.cin1() * 16 *
                        gd.cout_g * taps * n.executed;
  n.lane_use = std::min(1.0, g.flops() / 2 / walked);
  return evaluate(n, m);
}

void DxAmxBlocked::apply(ops::DxAlgorithm& a, const Problem& p, const Context&) const {
  a.use_blocks();
  // The stages' regions are what the extern's bounds query asks for, unknown to Halide when it
  // compiles: their vectorized dims are bound to what the query always answers.
  a.wzk.bound(a.e, 0, 2).bound(a.c0, 0, 16);
  stage_tile_weights(a.wzk);
  // One extern call per (batch, depth, block of rows); out adds the bias and casts, a 16-lane
  // vector per position.
  Var ho("ho"), hi("hi"), par("par");
  if (a.blocks_out) {  // the extern writes the output: one call per (batch, depth, rows)
    a.out.split(a.h, ho, hi, call_rows(p), TailStrategy::GuardWithIf)
        .reorder(a.c0, a.w, hi, a.c1, ho, a.d, a.b)
        .fuse(a.d, a.b, par)
        .parallel(par);
    return;
  }
  a.out.split(a.h, ho, hi, call_rows(p), TailStrategy::GuardWithIf)
      .reorder(a.c0, a.w, hi, a.c1, ho, a.d, a.b)
      .vectorize(a.c0)
      .fuse(a.d, a.b, par)
      .parallel(par);
  a.ext.compute_at(a.out, ho);
}

}  // namespace

const DxSchedule* dx_amx_blocked_schedule() { return the<DxAmxBlocked>(); }

}  // namespace tbex::sched
