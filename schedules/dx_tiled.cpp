/** dx_tiled: the dense dX GEMM. M = input positions (qw..., in the stride-phase frame), N = input
 * channels (c0, c1), K = output channels x taps of the phase: the GEMM register tile of
 * schedules/gemm_tile.h, QT positions x CT channel blocks. With strides the tile lives in the
 * phase frame (all QT positions share one phase, so one tap set) and is stored straight to its
 * 6HD places (the algorithm's scatter form; a ragged frame is gathered per depth slice).
 * Unit strides may chunk the reduction by kernel rows or depth slices (GemmTiles::kt) where a
 * block's weights exceed the L1: the row's tiles then run chunk by chunk against weights held in
 * L1, adding their partial sums to a row kept there.
 *
 * Unit strides read dy in its own frame (fp32 dy and bf16 pairs in place, other 16-bit dy from
 * its unpadded fp32 conversion, staged row by row as the tiles reach it, or whole where
 * dilated), a row's edge tiles leaving out their taps into the width padding
 * (reads_dy_unpadded, folds_width_pads). Strided dy, and dilated rows of more than 2 tiles whose
 * depth or height pad taps stay in the reduction, read a zero-padded copy staged whole. */
#include <algorithm>
#include <array>
#include <utility>

#include "schedules/gemm_tile.h"
#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** The tiles along one row of t's frame. */
int64_t row_tiles(const GemmShape& s, const GemmTiles& t) { return ceil_div(s.row, (int64_t)t.qt); }

/** How the tiles reach dy: in its own frame through dys's padding select (dy itself, or for
 * 16-bit dy its fp32 conversion dyc, staged a row at a time as the tiles reach it or whole), or
 * a zero-padded copy (dys) staged whole, in a pass of its own. */
enum class DyRead { kInPlace, kConvertedRows, kConvertedWhole, kPaddedWhole };

/** Whether the tiles read dy in its own frame (through the padding select), instead of a
 * zero-padded copy: the padded copy's staging pass costs 5-7% of the time (its reads of dy from
 * L3 or DRAM are not overlapped with compute, where the tiles' are), and its tiles multiply
 * every width pad tap. Unchunked, a row read that way must leave out its taps into the width
 * padding, or the padding select stays in its inner loop (e1 dX read in place that way ran no
 * faster than staged): folds_width_pads.
 * fp32 dy at unit strides. Emerald Rapids, 1 thread, staged against in place: e1
 * [qt=14,ct=1,kwt=3] (peeled) 4.06 against 3.62 ms (2 threads 2.25 / 1.89); chunked tiles: f
 * 10.7 / 10.0, c2 43.5 / 40.8, c1 96.1 / 90.2, b 266 / 251. Zen 4, 2 threads, interleaved (min
 * of 3), c1 [qt=8,ct=2,kwt=3] staged by rows against partitioned in place: 64.7 against 61.2
 * ms; the model then takes unchunked partitioned rows for f (7.17 ms chunked against 6.98) and
 * c2 (30.06 / 29.87). Where a depth or height tap into a pad stays in the reduction
 * (ops::dy_pads_left_out fails) only chunked or peeled rows read in place, as measured before.
 * Not with strides (dy indexed through the phase's taps): g dX's scatter form 37 against 51 ms
 * peeled, 55 not, and level or slower with 16 or 32 output channels (the seed, 16: 6.18 against
 * 5.82, the one strided gain measured, was not kept).
 * 16-bit dy is read that way from its fp32 conversion (dyc, unpadded), not from dy itself
 * (converted per broadcast: e1 f16 4.0 against 5.9 ms, c2 43 against 57).
 * bf16 pairs at unit strides (ops::dysp_reads_dy: the pairs are 4-byte words of dy). Zen 4, d
 * dX (pointwise, no select at all), interleaved runs (min / median of 8): its pick [qt=7,ct=1]
 * 1.87 / 1.91 ms in place against 1.93 / 1.97 staged (2 threads 0.92 / 0.95 against 0.95 /
 * 1.01), [qt=4,ct=4] 1.88 / 1.94 against 1.94 / 2.07. Walking n2 as one loop, each broadcast's
 * address took two LEAs (6HD's n2/8, n2%8) and [qt=7,ct=1] ran 8% slower in place than staged:
 * the pair loops walk (pair in block, block) there instead (DxAlgorithm::rp). Padded, with the
 * row's edge tiles apart, 2 threads (min of 3-4), staged against in place: f 3.76 against 3.57
 * ms, e1 1.44 / 1.31, c2 15.7 / 15.2, c1 32.4 / 31.5, b 96.1 / 90.0 (1 thread: f 7.53 / 7.10,
 * e1 2.74 / 2.62, c2 31.6 / 30.3, c1 64.0 / 62.1). */
bool reads_dy_unpadded(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  if (is_strided(p)) return false;
  if (t.pair == 2) return ops::dysp_reads_dy(p);
  return chunked(s, t) || row_tiles(s, t) <= 2 || ops::dy_pads_left_out(p);
}

/** How t's tiles reach dy (DyRead). 16-bit dy's conversion is staged by rows where the depth
 * and height are undilated (slide_dy_rows), whole where dilated: Halide's sliding window did not
 * slide there (each output row converted its whole window of rows again; zero-padded, f dX f16
 * ran 15.4 against 16.6 ms on Zen 4, 1 thread). Undilated unit-stride rows always leave out
 * their depth and height pad taps (every input position reads dy through some tap), so the
 * zero-padded copy is read only with strides, by bf16 pairs that cannot read dy
 * (ops::dysp_reads_dy), and by dilated rows that keep such a tap. Zen 4, f16 dy, 1 thread,
 * interleaved (min of 2-3), zero-padded (by rows where undilated, else whole) against
 * converted: f 15.37 against 14.20 ms (fp32 in place 14.05), c2 62.6 / 60.5 (fp32 60.3), e1
 * 5.73 / 5.61 (fp32 5.38); 2 threads f 7.94 / 7.31, e1 2.91 / 2.84. e1 converted whole ran
 * 5.43 ms (2 threads level): 3 depth taps convert each row 3 times by rows; c2 converted whole
 * ran 62.0. */
DyRead dy_read(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  if (!reads_dy_unpadded(p, s, t)) return DyRead::kPaddedWhole;
  if (t.pair == 2 || p.in_dtype == DType::kFloat32) return DyRead::kInPlace;
  return p.geo.dilation[0] * p.geo.dilation[1] == 1 ? DyRead::kConvertedRows
                                                     : DyRead::kConvertedWhole;
}

/** Whether fp32 tiles reading dy in place walk the output channels of the reduction inside
 * their 6HD blocks (r's n split by 16, the lanes innermost), so that every broadcast's address
 * is affine: lanes 4 bytes apart, positions 64, blocks a plane (one base register a step). As
 * one loop over n, each step computed n / 16 and n % 16 and each position kept an address
 * register of its own (a LEA per broadcast), and LLVM held the broadcasts beside the
 * accumulators and spilled them. Zen 1, c1 dX (32 output channels), 1 thread:
 * [qt=6,ct=1,kwt=1] 651 -> 397 ms (the same tile on 16-bit dy's converted rows: 407),
 * [qt=4,ct=1,kwt=1,kt=9] 447 -> 397, [qt=4,ct=1,kwt=3] 380 -> 372. Where the group has one
 * block (cout_g 16) n already is the lane. */
bool walks_lanes_in_blocks(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  return dy_read(p, s, t) == DyRead::kInPlace && t.pair != 2 && p.group.cout_g > 16 &&
         p.group.cout_g % 16 == 0;
}

/** Whether an unchunked row reads dy through its width padding select (reads_dy_unpadded, and
 * some tap reaches a width pad), so its edge tiles must leave out their taps into the pads:
 * each tile's taps along the row unrolled, and rows of at most 2 tiles unrolled (peeled_row),
 * longer ones partitioned on the select (the edge tiles apart from the inner ones:
 * partitions_edge_tiles).
 * Either way the edge tiles' pad taps read a constant 0 and fold away, as oneDNN's edge blocks
 * leave them out. */
bool folds_width_pads(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  return !chunked(s, t) && reads_dy_unpadded(p, s, t) && ops::inside_share(p, 2) < 1;
}

/** Whether a row of more than 2 tiles is partitioned on dy's width padding (folds_width_pads).
 * Every tile of c1's bf16 row unrolled instead ran level (31.2 against 31.5 ms at 2 threads) and
 * compiled in 0.71 s against 0.53; a row of 2 tiles partitioned ran slower than peeled (e1 dX
 * f32 [qt=14,ct=1,kwt=3] at 1 thread 5.62 against 5.40 ms). */
bool partitions_edge_tiles(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  return folds_width_pads(p, s, t) && row_tiles(s, t) > 2;
}

/** Whether the tiles of a row run unrolled, each with constant positions: at unit stride rows
 * of at most 2 tiles that fold their width pads (folds_width_pads; elsewhere peeling only cost
 * compile time: e1 dX on staged dy 4.07 ms peeled against 4.06, compiled in 0.4 s against 0.3; 4
 * peeled fp32 tiles took 0.9-1.2 s, c2 and f [qt=8,ct=2]); in the stride-phase frame (dy
 * staged, so its tiles share their code) rows of at most 4 tiles: g dX [qt=7,ct=2] 35.8
 * against 37.0 ms at 1 thread, 17.3 against 17.6 at 2, compiled in 0.5 s. */
bool peeled_row(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  if (chunked(s, t)) return false;
  return is_strided(p) ? row_tiles(s, t) <= 4 : folds_width_pads(p, s, t) && row_tiles(s, t) <= 2;
}

/** Whether pair tiles unroll their walk over a block's channel pairs (rp's second dim): kernels
 * of one tap, whose visit is that walk over the blocks and nothing else (d dX bf16: 4 blocks of 8
 * pair steps of 7 dot products; each 8-step loop's exit cost 6%: 1.92 against 2.04 ms at 1
 * thread, Zen 4, interleaved runs). With taps a visit is long already, and 8 copies of each step
 * slowed e1 dX [qt=7,kt=27] from 2.63 to 3.02 ms (c2 and f level). */
bool unrolls_pair_walk(const Problem& p, const GemmTiles& t) {
  return t.pair == 2 && p.geo.kernel[0] * p.geo.kernel[1] * p.geo.kernel[2] == 1;
}

/** 16-bit dy at unit stride and undilated depth and height: converted to fp32 (dyc) a row at a
 * time as the tiles reach it, not in a pass of its own before them. Stored per sweep of a
 * channel block over the rows and computed per output row: Halide's sliding window converts
 * only the rows the last output row did not (the new one, at every depth tap), so the
 * conversion runs beside the tiles, on rows about to be read. Each block's sweep and each depth
 * slice convert the rows again (staged_dy_conversions). Emerald Rapids, f16 dy zero-padded,
 * whole against by rows, 1 / 2 threads: e1 4.17 / 2.27 against 3.77 / 1.99 ms, c1 95.0 / 48.9
 * against 91.4 / 47.0, c2 43.3 / 22.2 against 42.8 / 21.6, b 262 / 139 against 256 / 135, f
 * 10.9 / 5.36 against 10.8 / 5.39; a depth slab per thread (no sliding) ran level with whole.
 * Storage folded to the kernel's rows gained 0.5-1% more, but Halide's bounds of a row's window
 * can exceed the rows the kernel spans (2 taps of dilation 2 read 5 rows) and a fold too small
 * fails at run time, so the storage is not folded. Not for strided dy (g dX by rows of the
 * phase frame 38.6 against 36.1 ms whole; per depth slice level), nor bf16 pairs (b: level). */
void slide_dy_rows(ops::DxAlgorithm& a, const Var& sweep, const Var& row) {
  a.dyc.store_at(a.out, sweep).compute_at(a.out, row).vectorize(a.n, 16);
}

const std::array<std::string, 4> dy_read_names = {
    "dy read in place", "dy converted by rows, read unpadded", "dy converted whole, read unpadded",
    "dy staged whole"};

/** How many times slide_dy_rows converts each element of staged dy: once for each output depth
 * slice whose taps span it ((Kd - 1) * dd + 1 of them: each slice converts its own window), per
 * block sweep of a real group, and again for the kernel's reach beyond each group of hb rows. */
double staged_dy_conversions(const Problem& p, const GemmShape& s, const GemmTiles& t) {
  const ConvGeometry& g = p.geo;
  const double rows = t.hb > 0 ? std::min<double>(t.hb, g.in[1]) : double(g.in[1]);
  return double((g.kernel[0] - 1) * g.dilation[0] + 1) * double(block_passes(s, t)) *
         (1 + double(g.kernel[1] - 1) * g.dilation[1] / rows);
}

class DxTiled final : public GemmTiledSchedule<ops::DxAlgorithm> {
 public:
  std::string name() const override { return "dx_tiled"; }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const GemmShape s = shape_for(p, ctx);
    const GemmTiles t = choose_gemm_tiles(s, ctx.variant);
    return describe_gemm_tile(t, s, "w") + (is_strided(p) ? "stride-phase frame, " : "") +
           (peeled_row(p, s, t) ? "row of " + std::to_string(row_tiles(s, t)) +
                                   " tiles unrolled, "
                             : "") +
           dy_read_names.at(size_t(dy_read(p, s, t))) +
           (partitions_edge_tiles(p, s, t) ? " (edge tiles apart), " : ", ") +
           (walks_lanes_in_blocks(p, s, t) ? "output channels walked within their blocks, " : "") +
           std::to_string(ctx.threads) + " threads";
  }
  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override;

 private:
  /** apply's loop nest; returns the loops Halide may partition (partition_only). */
  PartitionedLoops tile(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const;

 protected:
  GemmShape shape(const Problem& p) const override {
    // 20 candidates: where pairs lead the list holds both forms' tiles (10 over both dropped
    // b_c3d dX bf16's [qt=14,ct=1]); fp32 lists picked as with 10 (Zen 5).
    GemmShape s{"dx_tiled", "TBEX_DX_TILE", phase_extent(p, 2), "the positions along w",
                p.geo.cin1(), "C1", p.group.cin1_g, /*cover_row=*/false, 20};
    // Unit strides: no phase predicate in the reduction, so the kw taps unroll straight and the
    // reduction chunks by kernel rows or depth slices (GemmTiles::kt).
    if (!is_strided(p)) {
      const int kw = (int)p.geo.kernel[2], kh = (int)p.geo.kernel[1], kd = (int)p.geo.kernel[0];
      s.row_taps = kw, s.row_dilation = (int)p.geo.dilation[2];
      for (int taps : {kw, kh * kw, kd * kh * kw})
        if (s.chunk_taps.empty() || taps > s.chunk_taps.back()) s.chunk_taps.push_back(taps);
      s.k_bytes = p.group.cout_g * 64;
      s.slice_rows = p.geo.in[1];
      s.slice_dy_bytes = dx_slice_dy_bytes(p);
    }
    return s;
  }
  Estimate estimate_tiles(const Problem& p, const Context& ctx, const GemmShape& s,
                          const GemmTiles& t) const override;
  bool pairs(const Problem& p) const override { return ops::bf16_pairs(p); }
};

Estimate DxTiled::estimate_tiles(const Problem& p, const Context& ctx, const GemmShape& s,
                                 const GemmTiles& t) const {
  const Machine m = Machine::of(ctx.target);
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  LoopNest n;
  n.threads = ctx.threads;
  // Per step (one output channel of one tap): ct weight vectors, qt dy broadcasts per real
  // group the tile's ct blocks span (each group reduces over its own dy channels).
  const int spanned = spanned_groups(gd.cin1_g, t.ct);
  // Pair tiles keep every position's broadcast live (gemm_tile.cpp, max_qt).
  n.tile = {double(t.qt * t.ct), double(t.qt * spanned + t.ct), t.qt * t.ct,
            t.pair == 2 ? t.qt + std::min(t.ct, 2) : t.ct + spanned, 0,
            double(t.qt * spanned)};
  n.tile.dots = t.pair == 2;
  // Each phase's positions run the taps of that phase only (the RDom predicate).
  const double taps = double(g.kernel[0]) * g.kernel[1] * g.kernel[2] /
                      double(g.stride[0] * g.stride[1] * g.stride[2]);
  // A bf16 pair step is one dot-product instruction per accumulator for two output channels.
  n.steps_per_visit = gd.cout_g * taps / t.pair;
  if (t.kwt > 1) {
    // A step is one output channel at every kw tap: the window's broadcasts serve all taps.
    const int kw = (int)g.kernel[2];
    const double window = double(t.qt + (kw - 1) * g.dilation[2]) * spanned;
    n.tile.fmas = double(t.qt * t.ct * kw);
    n.tile.loads = double(t.ct * kw) + window;
    n.tile.broadcasts = window;
    // Live beside the accumulators: row_taps_operands (the count the tile choice uses).
    n.tile.operands = row_taps_operands(t, kw, (int)g.dilation[2], spanned, ctx.target);
    n.steps_per_visit /= kw;
  }
  const int64_t rows = g.n * phase_extent(p, 0) * g.stride[0] * phase_extent(p, 1) * g.stride[1];
  const int64_t tiles = rows * g.stride[2] * ceil_div(phase_extent(p, 2), t.qt) * (g.cin1() / t.ct);
  n.visits = double(tiles);
  // A visit reads its ct blocks' weights (every output channel and tap of the phase) and qt
  // positions (plus the taps' reach) of dy rows: fp32, or bf16 where pair tiles read them (the
  // pairs stay bf16). Charged as fp32, c1 dX bf16's [qt=8,ct=2] (55 KB of weights per visit)
  // ranked 3% behind [qt=13,ct=1] and ran 11% ahead (Zen 5, 1 thread, interleaved: 32.0 against
  // 35.8 ms).
  const double elem_bytes = t.pair == 2 ? 2 : 4;
  const double w_per_tap = t.ct * 16 * elem_bytes * gd.cout_g;
  const double w_bytes = w_per_tap * taps;
  const double dy_bytes = (t.qt + double(g.kernel[2]) / g.stride[2]) * gd.cout_g * elem_bytes *
                          double(g.kernel[0]) * g.kernel[1] / (g.stride[0] * g.stride[1]);
  // The tiles along a row (wo innermost) share their ct blocks' weights: what they stream
  // together is those weights and the row's dy rows (not every block's weights: the next ct
  // blocks come once per row). Chunks of kt taps: a visit runs one chunk of one tile, reading
  // the chunk's dy window and weights.
  const double dy_rows_bytes = double(dx_row_dy_bytes(p)) * gd.real_g;
  const bool chunks = chunked(s, t);
  const double chunk_count = chunks ? double(s.chunk_taps.back()) / t.kt : 1;
  const double w_chunk = w_bytes / chunk_count;
  // Weights that stay in L1 across the row (weights_stay_in_l1) cost a visit its share; larger
  // ones stream per visit, from the level the row's pass over them and the dy rows fits (one
  // chunk's, not the whole reduction's): b_c3d dX on a Zen 3, [qt=2,ct=2] in depth slices (147
  // KB of weights) 556-567 ms against 630 unchunked (442 KB of weights and 267 KB of dy rows,
  // past the L2). e1 dX (27 KB of weights per block, 1 thread): [qt=4,ct=1] 8.0-8.2 ms against
  // 8.5-8.7 for [qt=6,ct=1], whose last tile of a row of 28 recomputes 2 positions; charged the
  // weights per visit, the narrower tile had ranked level with it.
  // With strides the phases differ in taps: the largest phase's weights must stay.
  const double w_most = w_per_tap * dx_dy_rows(p) *
                        ops::phase_tap_extent(g.kernel[2], g.stride[2], g.dilation[2]) /
                        chunk_count;
  n.visit_bytes = dy_bytes / chunk_count +
                  (weights_stay_in_l1(m, w_most, chunks)
                       ? w_chunk / double(ceil_div(phase_extent(p, 2), t.qt))
                       : w_chunk);
  n.visit_footprint = int64_t(w_chunk + dy_bytes / chunk_count);
  n.chunk_footprint = int64_t(w_chunk + dy_rows_bytes / chunk_count);
  n.units = g.n * phase_extent(p, 0) * g.stride[0];
  // Passes: weights and dy staged in fp32 (dy zero-padded by the taps' reach, or converted
  // unpadded); the tiles store dX in place, but a ragged phase frame is gathered into 6HD per
  // depth slice (from L2: only the writes count).
  const double w_elems = dw_out_elems(p);  // the filter has dW's shape
  const DyRead read = dy_read(p, s, t);
  const double dy_copy = read == DyRead::kPaddedWhole ? staged_dy_elems(p) : dy_elems(p);
  const bool whole = read == DyRead::kConvertedWhole || read == DyRead::kPaddedWhole;
  n.pass_bytes = (w_elems + (whole ? dy_copy : 0)) * (input_bytes(p) + elem_bytes) +
                 (is_strided(p) && !ops::dx_scatters(p) ? dx_elems(p) * 4 : 0);
  // Rows staged as the tiles reach them: dy itself read once from memory (the rows converted
  // again for other depth taps and block sweeps are in cache), and a conversion and a store
  // per staged vector each time, from the tiles' thread.
  if (read == DyRead::kConvertedRows) {
    n.pass_bytes += dy_elems(p) * input_bytes(p);
    n.pass_ops = 2 * dy_copy * staged_dy_conversions(p, s, t) / m.lanes;
  }
  // Row groups (GemmTiles::hb). Without them each block of a real group after the first reads
  // a depth slice's dy rows again where they overflow the L2 (slice_dy_overflows_l2, the rule
  // own_hb groups by); with them each group of rows reads the group's blocks' weights again
  // where they overflow the L2.
  if (s.slice_rows > 0) {
    const double slices = double(g.n) * g.in[0] * gd.real_g;
    const int64_t passes = block_passes(s, t);
    const double group_weights = double(passes) * w_bytes;
    if (t.hb == 0 && passes > 1 && slice_dy_overflows_l2(s, m)) {
      n.reread_bytes = slices * double(passes - 1) * s.slice_dy_bytes;
      n.reread_footprint = s.slice_dy_bytes;
    } else if (t.hb > 0 && group_weights > m.l2) {
      n.reread_bytes = slices * double(ceil_div(s.slice_rows, (int64_t)t.hb)) * group_weights;
      n.reread_footprint = int64_t(group_weights);
    }
  }
  if (chunks) {
    // Each visit then adds its partial sums to the row in L1 (a load and a store per
    // accumulator vector, what evaluate charges a visit for its accumulators); each row is
    // zeroed and copied out once. The copy is a burst of stores nothing overlaps, where
    // unchunked tiles store from registers between their reduction steps: c1 dX on Emerald
    // Rapids (33.5 MB of dX), [qt=8,ct=2,kwt=3] in chunks of 9 taps 96 ms against 90 unchunked,
    // the same time in the tile loop and 5% of it in the copy.
    n.visits *= chunk_count;
    n.steps_per_visit /= chunk_count;
    n.pass_ops += 2.0 * dx_elems(p) / m.lanes;
    n.burst_write_bytes = dx_elems(p) * 4;
  }
  n.lane_use = lane_use_of(g.flops() / t.pair, n);
  n.executed = ops::inside_tap_share(p);
  // A row that folds its width pads leaves out the taps into them too.
  if (folds_width_pads(p, s, t)) n.executed *= ops::inside_share(p, 2);
  return evaluate(n, m);
}

/** Loop partitioning pays in three places only: the chunked form's loop over a row's tiles (awo:
 * the tiles at the row's ends read the width pads; whole, f dX ran 12.4 against 10.4 ms, c2 49.5
 * against 44.2), an unchunked row of tiles reading dy in place (partitions_edge_tiles) and dy's
 * staging (converted and padded per row: e1 f16 dX whole 4.03 against 3.91). The copies of the tile body the depth, row and position loops were split into cost
 * compile time only (Emerald Rapids: f dX 0.71 -> 0.52 s, e1 0.51 -> 0.32, c1 0.58 -> 0.43, c2
 * 0.61 -> 0.51 s), and every form ran level or faster built whole (f 9.9 against 10.4 ms). */
void DxTiled::apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const {
  PartitionedLoops loops = tile(a, p, ctx);  // first: the pair form swaps its Funcs into `a`
  partition_only(a.out, {a.dys, a.dysp}, std::move(loops));
}

namespace {
/** A padded dy staged whole, its positions 4 at a time along w. Halide does not partition the
 * staging loop where its simplifier merges the pad tests of w and h into one (the seed's pads 0
 * and 1: a test and a masked load per 16-lane position, 21 instructions); unrolled, LLVM shares
 * the tests within the group (29 instructions for 4 positions). GuardWithIf: rows of any width. */
void unroll_padded_rows(Func f, const Var& w) {
  const Var wo("w_rows"), wi("w_4");
  f.split(w, wo, wi, 4, TailStrategy::GuardWithIf).unroll(wi);
}
}  // namespace

PartitionedLoops DxTiled::tile(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const {
  const GemmShape s = shape_for(p, ctx);
  const GemmTiles t = choose_gemm_tiles(s, ctx.variant);
  const DyRead read = dy_read(p, s, t);
  const Var c0 = a.c0, qw = a.qw, c1 = a.c1, b = a.b;
  PartitionedLoops partitioned;
  Func acc = a.acc;
  if (t.pair == 2) {
    a.use_pairs();
    acc = a.accp;
    stage_root(a.wzp, c0, 0, {a.kd, a.g}, {"t1"});
    a.wzp.vectorize(a.e);  // (e, c0): one 64-byte row of 16 bf16 pairs
    if (read == DyRead::kPaddedWhole) {
      stage_root(a.dysp, a.n2, 8, {a.d, a.b, a.g}, {"t2", "t1"});
      a.dysp.vectorize(a.e);
      unroll_padded_rows(a.dysp, a.w);
    }
  } else {
    stage_dx_weights(a, p, t.ct);
    if (read == DyRead::kPaddedWhole) {
      stage_root(a.dys, a.n, 16, {a.d, a.b, a.g}, {"t2", "t1"});
      unroll_padded_rows(a.dys, a.w);
    } else if (read == DyRead::kConvertedWhole) {
      stage_root(a.dyc, a.n, 16, {a.d, a.b, a.g}, {"t2", "t1"});
    }
  }
  const bool peel = peeled_row(p, s, t);
  const auto walk_lanes_in_blocks = [&](Func f) {
    if (!walks_lanes_in_blocks(p, s, t)) return;
    RVar rno("rno"), rni("rni");
    f.update().split(a.r[0], rno, rni, 16);
  };
  // The register tile computed at loop `at` of `owner` (register_tile), on acc's reduction.
  const RowTaps taps = t.kwt == 1                           ? RowTaps::kNone
                       : taps_inside_positions(ctx.target) ? RowTaps::kTapsInner
                                                           : RowTaps::kTapsOuter;
  const auto tile_at = [&](Func owner, const VarOrRVar& at) {
    register_tile(acc, owner, at, c0, qw, c1, rvars(t.pair == 2 ? a.rp : a.r), t.pair == 2, taps,
                  unrolls_pair_walk(p, t));
  };
  Var wo("wo"), wi("wi"), c1o("c1o"), c1i("c1i"), par("par");
  if (a.scatter) {
    const RVar rwo = scatter_tiles(a, t.qt, t.ct);
    tile_at(a.out, rwo);
    // A row of fewer positions than a multiple of qt ends in a shorter tile; the tile keeps its
    // constant extent (its registers), computing a few phase-frame positions no one stores.
    acc.bound_extent(qw, t.qt);
    if (peel) a.out.update().unroll(rwo);
    return {};
  }
  if (a.strided) {
    // A ragged phase frame (an extent its stride does not divide) is computed per output depth
    // slice (one qd, pd) right before that slice is gathered into 6HD, so it stays in L2.
    a.out.compute_root().vectorize(c0).parallel(a.d);
    a.dxp.compute_at(a.out, a.d)
        .split(qw, wo, wi, t.qt)
        .split(c1, c1o, c1i, t.ct)
        .reorder(c0, wi, c1i, wo, a.pw, a.qh, a.ph, c1o, a.qd, a.pd, b)
        .vectorize(c0)
        .unroll(wi)
        .unroll(c1i);
    tile_at(a.dxp, wo);
    if (peel) a.dxp.unroll(wo);
    return {};
  }
  // Groups of hb output rows, every channel block inside each group (GemmTiles::hb): the loop
  // over one row's tiles is at hi.
  Var ho("ho"), hi("hi");
  const Var row = t.hb > 0 ? hi : a.h;
  if (chunked(s, t)) {
    // Reduction chunks (one kernel row, or one depth slice, of taps): acc holds the row of ct
    // blocks in L1; for each chunk every tile of the row computes its partial sums in registers
    // (part, an rfactor) and adds them to acc, so the chunk's weights stay in L1 across the row.
    // r = (n, jw, jh, jd): a depth slice keeps jh inside the chunk, a kernel row takes it out.
    Var u("ku"), v("kv"), awo("awo"), awi("awi");
    const bool slices = t.kt == p.geo.kernel[1] * p.geo.kernel[2] && p.geo.kernel[1] > 1;
    std::vector<RVar> in_part{a.r[0], a.r[1]}, chunks{a.r[3]};
    if (slices) in_part.push_back(a.r[2]);
    else chunks.insert(chunks.begin(), a.r[2]);
    Func part = slices ? acc.update().rfactor(a.r[3], v)
                       : acc.update().rfactor({{a.r[2], u}, {a.r[3], v}});
    acc.compute_at(a.out, row).vectorize(c0);
    std::vector<VarOrRVar> order{c0, awi, c1, awo};
    order.insert(order.end(), chunks.begin(), chunks.end());
    acc.update()
        .split(qw, awo, awi, t.qt, TailStrategy::RoundUp)
        .reorder(order)
        .vectorize(c0)
        .unroll(awi)
        .unroll(c1);
    register_tile(part, acc, awo, c0, qw, c1, in_part, false, taps);
    walk_lanes_in_blocks(part);
    partitioned.push_back({acc.update(), awo});
  }
  a.out.split(a.w, wo, wi, t.qt).split(c1, c1o, c1i, t.ct);
  if (t.hb > 0)
    a.out.split(a.h, ho, hi, t.hb, TailStrategy::GuardWithIf)
        .reorder(c0, wi, c1i, wo, hi, c1o, ho, a.d, b);
  else
    a.out.reorder(c0, wi, c1i, wo, a.h, c1o, a.d, b);
  a.out.compute_root()
      .vectorize(c0)
      .unroll(wi)
      .unroll(c1i)
      .fuse(a.d, b, par)
      .parallel(par);
  if (read == DyRead::kConvertedRows) slide_dy_rows(a, c1o, row);
  if (!chunked(s, t)) {
    tile_at(a.out, wo);
    walk_lanes_in_blocks(acc);
  }
  if (peel) a.out.unroll(wo);
  // The taps along the row: r = (n, jw, jh, jd), rp = (e, j, blk, jw, jh, jd) read in place.
  if (folds_width_pads(p, s, t) && t.kwt == 1) acc.update().unroll(t.pair == 2 ? a.rp[3] : a.r[1]);
  if (partitions_edge_tiles(p, s, t)) partitioned.push_back({Stage(a.out), wo});
  return partitioned;
}

}  // namespace

const DxSchedule* dx_tiled_schedule() { return the<DxTiled>(); }

}  // namespace tbex::sched
