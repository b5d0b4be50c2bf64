/** dx_amx_cols: bf16 dX for few input channels (a network's stem: Cin = 3) on AMX-BF16 tiles
 * whose columns are (kw, input channel) pairs. dx_amx's tiles hold the input channels in their
 * 16 columns (3 useful for the stem); here Kw taps x `lanes` channels fill them (the stem's 7 x 4
 * = 28 of two tiles' 32), each tile sums a row's (kd, kh) taps and output channels, and tbex's
 * kernel (tbex_amx_dx_cols, runtime/src/amx_dx_cols.cpp) adds each output position's kw taps
 * from the stored tiles. Strides and dilations along every dim, in the output's own frame (no
 * phase decomposition: a tap's columns land on the positions its stride reaches). Halide stages
 * the weights and, for a bias or a bf16/fp16 result, adds and casts the kernel's fp32 sums. */
#include <algorithm>

#include "schedules/amx_tile.h"
#include "schedules/loops.h"
#include "schedules/tiling.h"
#include "tbex/amx_dx_cols.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** dy bytes a call stages up to which it takes more rows: the staged rows are read across the
 * call's rows (each by about Kh / sh of them) and stay in L2 beside the weights and sums. */
constexpr double kStageBytes = 384 * 1024;

/** dy rows (dim 1) or depths (dim 0) that `n` consecutive output rows or depths read. */
double dy_span(const Problem& p, int dim, int n) {
  const ConvGeometry& g = p.geo;
  return std::min<double>(g.out[dim], double(n - 1) / g.stride[dim] +
                                          double(g.kernel[dim] - 1) * g.dilation[dim] / g.stride[dim] + 1);
}

/** Rows (h) of one extern call: the most dividing H (no ragged last call) whose staged dy rows
 * (every depth tap's, bf16) stay within kStageBytes. */
int call_rows(const Problem& p) {
  const ConvGeometry& g = p.geo;
  const double row_bytes = double(g.kernel[0]) * p.group.cout_g * g.out[2] * 2;
  for (int r = (int)g.in[1]; r > 1; --r)
    if (g.in[1] % r == 0 && dy_span(p, 1, r) * row_bytes <= kStageBytes) return r;
  return 1;
}

/** Depths of one extern call: the most dividing D that leave at least 4 calls a thread (the
 * slowest thread decides), so each staged plane serves every depth tap of the call's depths. */
int call_depths(const Problem& p, int threads) {
  const ConvGeometry& g = p.geo;
  const int64_t others = g.n * (g.in[1] / call_rows(p));
  for (int dc = (int)g.in[0]; dc > 1; --dc)
    if (g.in[0] % dc == 0 && others * (g.in[0] / dc) >= 4 * threads) return dc;
  return 1;
}

class DxAmxCols final : public AmxTileSchedule<ops::DxAlgorithm> {
 public:
  std::string name() const override { return "dx_amx_cols"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = amx_dx_pairs_why_not(p); !why.empty()) return why;
    if (std::string why = few_cin_why_not(p, "dx_amx"); !why.empty()) return why;
    if (p.group.real_g != 1)
      return std::to_string(p.group.real_g) + " real groups: the kernel sums one group's block";
    const int lanes = amx_dx_cols_lanes(cin_valid(p));
    if (p.geo.kernel[2] * lanes > 32)
      return "Kw " + std::to_string(p.geo.kernel[2]) + " x " + std::to_string(lanes) +
             " channels a tap fill more than two tiles of 16 columns";
    // Halide's stages around the kernel (weights, bias and cast) compile without LargeBuffers.
    return amx_offsets_why_not(std::max(dx_elems(p) * 4, dy_elems(p) * 2));
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const int lanes = amx_dx_cols_lanes(cin_valid(p));
    return "AMX-BF16 tiles of " + std::to_string(amx_dx_cols_rows((int)p.geo.out[2])) +
           " dy positions x (kw, channel) columns (tbex_amx_dx_cols): " +
           std::to_string(p.geo.kernel[2]) + " taps x " + std::to_string(lanes) + " channels in " +
           std::to_string(amx_dx_cols_tiles((int)p.geo.kernel[2], lanes)) + " column tiles, " +
           std::to_string(ops::dx_k_step(p)) + " channels per tile multiply, " +
           std::to_string(call_rows(p)) + " rows x " + std::to_string(call_depths(p, ctx.threads)) +
           " depths per call, " + std::to_string(ctx.threads) + " threads";
  }
  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override;
  Estimate estimate(const Problem& p, const Context& ctx) const override;
};

Estimate DxAmxCols::estimate(const Problem& p, const Context& ctx) const {
  const ConvGeometry& g = p.geo;
  const int kk = ops::dx_k_step(p), lanes = amx_dx_cols_lanes(cin_valid(p));
  const int nt = amx_dx_cols_tiles((int)g.kernel[2], lanes), rows = amx_dx_cols_rows((int)g.out[2]);
  const int64_t tiles = ceil_div(g.out[2], rows), pairs = ceil_div(tiles, 2);
  const Machine m = Machine::of(ctx.target);
  const double positions = double(g.n) * g.in[0] * g.in[1] * g.in[2];
  LoopNest n;
  n.threads = ctx.threads;
  // A step: one channel chunk of one live (kd, kh) tap, MP x NT multiplies on MP dy and NT
  // weight tiles; a load priced as tbex_amx_dx's (kBlockMultiplyCost), a tile of `rows` rows at
  // rows/16 of a whole one (14-row tiles measured 13.2 cycles a multiply against 15.2 for 16).
  n.tile.fmas = 0;
  n.tile.loads = 2 * rows + 2 * (kk / 2.0);
  n.tile.accumulators = 4, n.tile.operands = 0;
  n.tile.unit_cycles = (double(tiles) / pairs + nt) * kBlockMultiplyCost * m.tile_multiply_cycles * rows / 16;
  // Steps of a visit (an output row's pair of tiles): its live taps, on average over the rows.
  const double live_dh = double(ops::inside_pairs(p, 0)) / g.in[0] * ops::inside_pairs(p, 1) / g.in[1];
  n.steps_per_visit = live_dh * p.group.cout_g / kk;
  n.visits = double(g.n) * g.in[0] * g.in[1] * pairs;
  n.visit_cycles = kBlockDrainCost * m.tile_multiply_cycles;
  n.visit_footprint = int64_t(live_dh * (nt * p.group.cout_g * 32.0 + 2.0 * rows * p.group.cout_g * 2));
  n.chunk_footprint = n.visit_footprint;
  const int call = call_rows(p), depths = call_depths(p, ctx.threads);
  const double calls = double(g.n) * (g.in[0] / depths) * (g.in[1] / call);
  n.units = int64_t(calls);
  // Passes: the weights staged; each call's dy staged (the planes its depths reach, the rows
  // its rows reach, once); the columns added into the output, a position's live kw taps of
  // `lanes` lanes (a load and an add per 4 lanes) and a 64-byte store, its fp32 written;
  // without cols_out, read back by out.
  const double staged = calls * dy_span(p, 0, depths) * dy_span(p, 1, call) * p.group.cout_g * g.out[2];
  const double live_w = double(ops::inside_pairs(p, 2)) / g.in[2];
  n.pass_bytes = dw_out_elems(p) * (input_bytes(p) + 2) + staged * input_bytes(p) + dx_elems(p) * 4 +
                 (ops::dx_blocks_out(p) ? 0 : dx_elems(p) * 8);
  n.pass_ops = staged * kStageCopyCycles * m.issue + positions * (live_w * 2 * ceil_div(lanes, 4) + 4);
  const double executed = n.visits * n.steps_per_visit * 16.0 * nt * rows * tiles / pairs * kk;
  n.lane_use = std::min(1.0, g.flops() / 2 / executed);
  return evaluate(n, m);
}

void DxAmxCols::apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const {
  a.use_cols();
  // The weights' region is what the extern's bounds query answers, unknown to Halide when it
  // compiles: the vectorized dims are bound to it.
  a.wzc.bound(a.wzc.args()[0], 0, 2).bound(a.wzc.args()[1], 0, 16);
  stage_tile_weights(a.wzc);
  // One extern call per (batch, block of depths, block of rows).
  Var ho("ho"), hi("hi"), dout("dout"), din("din"), t("t"), par("par");
  a.out.split(a.h, ho, hi, call_rows(p), TailStrategy::GuardWithIf)
      .split(a.d, dout, din, call_depths(p, ctx.threads), TailStrategy::GuardWithIf)
      .reorder(a.c0, a.w, hi, a.c1, din, ho, dout, a.b)
      .fuse(ho, dout, t)
      .fuse(t, a.b, par)
      .parallel(par);
  if (a.cols_out) return;  // the extern writes the output
  a.out.vectorize(a.c0);
  a.extc.compute_at(a.out, par);  // the call's sums, then its bias and cast
}

}  // namespace

const DxSchedule* dx_amx_cols_schedule() { return the<DxAmxCols>(); }

}  // namespace tbex::sched
