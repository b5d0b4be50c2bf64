/** dw_amx: bf16 dW on AMX-BF16 tiles. The dW GEMM (M = 16 input lanes c0, N = 16 output
 * channels, K = output positions) with one 16 x 16 fp32 tile register per output tile (one kw,
 * kh, kd, input block and output block): per step one tile load of x (16 lanes x KK positions,
 * the transposed stage's rows), one of dy (KK/2 position pairs x 16 channels, the layout
 * TDPBF16PS reads) and one tile multiply. The reduction is chunked as dw_tiled's (rows of one
 * output slab per chunk, staged in cache right before the thread's tiles consume them); a
 * chunk's tile is read back through a tile store and added to the fp32 sums. Where chunks
 * would transpose x twice or more (taps along depth), x is staged once for all of them.
 *
 * Halide lowers a tile only when its update is one vectorized multiply-add over (K, channels,
 * lanes) with unpredicated loads: the chunk divides the rows, K divides the padded row, and
 * tiles are whole (cout_g is a multiple of 16). A block of at most 8 valid input lanes (the
 * stem's 3) folds the taps along w into the tile's rows: 16 (kw, lane) pairs per tile (ops
 * acctk), not 16 lanes per kw mostly padding (h dW bf16 on Sapphire Rapids: 41 -> 16 ms). */
#include <algorithm>
#include <sstream>

#include "schedules/amx_tile.h"
#include "schedules/loops.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** dW's transposed x (ops::DwAlgorithm::xT) as the tile loops read it: words of four lanes
 * scattered along positions, then split into rows of the widest vector whose round-up pads a
 * row least. The caller places it (compute_root or per chunk). */
void schedule_tile_x(ops::DwAlgorithm& a, const Problem& p) {
  const int64_t row = ceil_div(padded_w(p), p.geo.stride[2]);
  int lanes = 32;
  for (int v : {16, 8})
    if (ceil_div(row, v) * v < ceil_div(row, lanes) * lanes) lanes = v;
  a.xT.vectorize(a.wq, lanes, TailStrategy::RoundUp).unroll(a.c0);
  a.xq.compute_at(a.xT, a.h).reorder(a.q, a.wq).vectorize(a.q).unroll(a.wq, 4, TailStrategy::RoundUp);
}

struct AmxDwTiles {
  int kk = 2;      ///< positions per tile multiply (ops::dw_k_step)
  int ch = 1;      ///< output rows per reduction chunk (divides Ho)
  int parts = 1;   ///< reduction split into this many partial sums (dw_parts; not the threads)
  int64_t tiles = 1;
  double restage = 1;   ///< times a chunk-staged x is staged per x element (taps along d, halo rows)
  bool x_root = false;  ///< x staged once for all chunks (see tiles_of)
  int tap_rows = 0;     ///< > 0: the tile's rows are (kw, lane) pairs, this many real (ops acctk)
  int row_extent = 16;  ///< rows of the tiles along the row dim: 16 lanes, or whole tiles of tap rows
};

AmxDwTiles tiles_of(const Problem& p) {
  const ConvGeometry& g = p.geo;
  AmxDwTiles t;
  const int we = ops::dw_padded_row(p);
  t.kk = ops::dw_k_step(p);
  // ~512 positions per chunk amortize reading the tile back; a chunk's rows stay in L2.
  t.ch = largest_divisor_upto(g.out[1], std::max<int64_t>(1, 512 / we));
  t.tiles = (p.group.cout_g / 16) * g.kernel[2] * g.kernel[1] * p.group.cin1_g * g.kernel[0] *
            p.group.real_g;
  // One block of at most 8 valid lanes (the stem's 3): a tile of lane rows would be mostly
  // padding, so its rows carry (kw, lane) pairs instead (16 of them, not 16 lanes per kw).
  const int lanes = cin_valid(p);
  if (p.group.cin1_g == 1 && p.group.real_g == 1 && lanes <= 8 && g.kernel[2] > 1) {
    t.tap_rows = (int)g.kernel[2] * lanes;
    t.row_extent = (int)ceil_div(t.tap_rows, 16) * 16;
    t.tiles = (p.group.cout_g / 16) * (t.row_extent / 16) * g.kernel[1] * g.kernel[0];
  }
  // Staging (x transposed, dy as pairs) is a large share beside the tile multiplies, and split
  // over output tiles every thread stages every chunk: the reduction is split instead, each part
  // staging its share (a fixed count, whatever the threads: results do not depend on them).
  // Sapphire Rapids, 1 -> 2 threads with tiles spread: c2 dW 11.7 -> 7.5 ms, d 1.59 -> 1.52.
  t.parts = dw_parts(p, kDwSplitParts);
  // Chunk-staged, x is transposed again for every kd tap along depth and for the halo rows a
  // chunk shares with the next; staged once for all chunks, the tiles read it from further out.
  // Once wins where chunks restage x twice or more (Sapphire Rapids, 1 thread: e1 1.7 -> 1.28
  // ms, c2 10.6 -> 9.2, b 59 -> 55; the seed and d, staging once, lose 5-10%; g, 1.6x, even).
  t.restage = double(g.kernel[0]) / g.stride[0] * x_rows_of(p, t.ch) / (double(t.ch) * g.stride[1]);
  t.x_root = t.restage >= 2;
  return t;
}

class DwAmx final : public AmxTileSchedule<ops::DwAlgorithm> {
 public:
  std::string name() const override { return "dw_amx"; }
  std::string why_not(const Problem& p) const override {
    return amx_dw_why_not(p);
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const AmxDwTiles t = tiles_of(p);
    std::ostringstream s;
    s << "AMX-BF16 tile " << (t.tap_rows ? "16 (kw, lane) rows" : "16c0") << " x 16n, " << t.kk << " positions per tile multiply, " << t.tiles
      << " tiles over " << ctx.threads << " threads, K chunks of " << t.ch << " rows x "
      << ops::dw_padded_row(p) << " cols, "
      << (t.parts > 1 ? "reduction split in " + std::to_string(t.parts) + " parts, " : "")
      << "x staged transposed " << (t.x_root ? "once" : "per chunk") << ", dy as position pairs"
      << (t.tap_rows ? ", rows (kw, lane): " + std::to_string(t.tap_rows) + " real" : "");
    return s.str();
  }
  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override;
  Estimate estimate(const Problem& p, const Context& ctx) const override;
};

Estimate DwAmx::estimate(const Problem& p, const Context& ctx) const {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  const AmxDwTiles t = tiles_of(p);
  const int we = ops::dw_padded_row(p);
  LoopNest n;
  n.threads = ctx.threads;
  // A step: the x tile (16 lane rows) and the dy tile, one tile multiply.
  const Machine m = Machine::of(ctx.target);
  n.tile = amx_step(16, t.kk, m);
  // Tap rows read a chunk's small copy of x (xTk: a few lanes) from L1, and a multiply at the
  // unit's rate held for them (the stem: 23 ms predicted, 25.7 measured on Emerald Rapids with
  // AMX). The fits include staging x at root (x_root): it is not priced apart.
  if (!t.tap_rows) price_one_accumulator(n, m);
  n.steps_per_visit = double(t.ch) * we / t.kk;
  n.visits = double(t.tiles) * g.n * g.out[0] * (g.out[1] / t.ch);
  // A visit streams ch rows of x (16 lanes, the row's positions) and of dy (16 channels).
  n.visit_bytes = t.ch * 2.0 * (16.0 * we + 16.0 * we);
  n.visit_footprint = (int64_t)n.visit_bytes;
  const int64_t x_rows = x_rows_of(p, t.ch), w_pad = padded_w(p);
  n.chunk_footprint = x_rows * w_pad * 32 * gd.cin1_g * gd.real_g * g.kernel[0] +
                      int64_t(t.ch) * we * 2 * gd.cout_g * gd.real_g;
  n.units = t.parts > 1 ? t.parts : t.tiles;
  // Passes: staging each chunk (x transposed, dy as pairs, both bf16; split over tiles, by every
  // thread for its own), the output stage with the partial sums, and the per-chunk additions of
  // the tile read back.
  const double x_elems = padded_x_elems(p);
  const double stagers = tile_stagers(t.tiles, ctx.threads, t.parts, p.group.real_g);
  const double x_staged = t.x_root ? x_elems / stagers : x_elems * t.restage;
  n.pass_bytes = stagers * (x_staged + dy_elems(p)) * (input_bytes(p) + 2) +
                 dw_out_elems(p) * 8 * (t.parts > 1 ? 1 + t.parts : 1) + n.visits * 16 * 16 * 4 * 2;
  if (t.tap_rows) {  // xTk: xT's rows copied per (kw, lane) for every chunk (bf16, read + write)
    const double chunks = double(g.n) * g.out[0] * (g.out[1] / t.ch);
    n.pass_bytes += chunks * double(t.row_extent) * we * x_rows * g.kernel[0] * 4;
  }
  n.lane_use = amx_lane_use(p, n, 16, t.kk);
  return evaluate(n, m);
}

void DwAmx::apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const {
  const AmxDwTiles t = tiles_of(p);
  // The tile's rows: 16 lanes c0 of one (kw, ...), or 16 (kw, lane) pairs kr of the tap rows.
  Func acc = t.tap_rows ? a.acctk : a.acct;
  const Var rows = t.tap_rows ? a.kr : a.c0;
  if (t.tap_rows) {
    internal_check(a.tap_rows == t.tap_rows, "dw_amx: the algorithm's tap rows differ from the plan's");
    a.use_tap_rows();
  } else {
    a.use_tiles();
  }
  DwReduction red = split_dw_reduction(acc, a.rt, p, t.parts, t.ch);
  // Whole tiles even where the output reads fewer valid rows (a block of < 16 input channels).
  if (t.parts > 1) {
    Func sum = acc;  // the partial sums added
    sum.compute_root().bound(rows, 0, t.row_extent).vectorize(a.n, 16);
    sum.update().vectorize(a.n, 16);
  }
  red.body.compute_root().bound(rows, 0, t.row_extent).vectorize(a.n, 16);
  Var no("no"), ni("ni"), ro("ro"), ri("ri");
  Stage s = red.body.update();
  // A tile: 16 output channels ni x 16 rows; the tiles: output blocks x (kw, or blocks of tap
  // rows) x the other taps.
  VarOrRVar row_in = rows, tap = a.kw;
  if (t.tap_rows) {
    s.split(a.kr, ro, ri, 16);
    row_in = ri, tap = ro;
  }
  s.split(a.n, no, ni, 16)
      .reorder(ni, row_in, no, tap, a.kh, a.c1g, a.kd, a.g, red.chunk, red.mid, red.outer);
  const Var tgi = spread_tiles(s, {no, tap, a.kh, a.c1g, a.kd, a.g}, t.tiles, ctx.threads, red,
                               t.parts, {ni, row_in}, {});
  s.vectorize(ni).unroll(row_in);
  // Tap rows: copies of xT's rows, per chunk beside the tiles that read them.
  if (t.tap_rows) a.xTk.compute_at(red.body, red.chunk).vectorize(a.wq, 16, TailStrategy::RoundUp);

  // Staging per reduction chunk, in cache right before the thread's tiles consume it.
  if (t.x_root) {
    Var db("db");
    a.xT.compute_root().fuse(a.d, a.b, db).parallel(db);
  } else {
    a.xT.compute_at(red.body, red.chunk);
  }
  schedule_tile_x(a, p);
  a.dyV.compute_at(red.body, red.chunk).vectorize(a.e).vectorize(a.n, 16);

  amx_tile(red.intm, red.body, tgi, a.n, rows, a.rt[0], t.kk, {red.rows});

  stage_root(a.out, a.c0, 0, {a.kd, a.g}, {"kdg"});
}

}  // namespace

const DwSchedule* dw_amx_schedule() { return the<DwAmx>(); }

}  // namespace tbex::sched
