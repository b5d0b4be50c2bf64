#pragma once
/** Problem arithmetic the schedule families share: tile-size helpers, the sizes the cost model's
 * passes count, and the rules that decide whether a schedule applies or stages an operand. No
 * Halide scheduling here (that is schedules/loops.h). */
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tbex/problem.h"

namespace tbex::sched {

/** Largest divisor of n that is <= cap (at least 1). */
inline int largest_divisor_upto(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return (int)d;
  return 1;
}

/** Reduction rows per chunk so that a tile visit, `row_bytes` and `row_points` reduction points
 * per row, stays within `l1_bytes` (Machine::l1_visit_bytes): the largest divisor of `rows`
 * within, but at least ~128 points (fewer per visit leave the tile's zeroing, storing and loop
 * exits unamortized). Tiles
 * that share an operand then run back to back from L1; streaming every visit from L2 measured
 * 5-16% slower on Sapphire Rapids (e1, g and seed dW, 1x1x1 dW) though the calibrated L2 read
 * rate covers it. */
inline int l1_chunk_rows(int64_t rows, int64_t row_bytes, int64_t row_points, int64_t l1_bytes) {
  const int64_t min_rows = (128 + row_points - 1) / std::max<int64_t>(1, row_points);
  return largest_divisor_upto(rows, std::max<int64_t>(min_rows, l1_bytes / std::max<int64_t>(1, row_bytes)));
}

using ops::cin_valid;
/** Valid output channels of a real group: min(cout_g, mag_factor * Cout/groups). */
inline int64_t cout_valid(const Problem& p) {
  return std::min(p.group.cout_g, p.group.mag_factor * p.geo.cout_pg());
}

inline bool is_strided(const Problem& p) {
  return p.geo.stride[0] * p.geo.stride[1] * p.geo.stride[2] > 1;
}
/** Width of x's padded frame (W + left and right pads). */
inline int64_t padded_w(const Problem& p) { return p.geo.in[2] + p.geo.pads[4] + p.geo.pads[5]; }
/** Elements of x (every block's 16 lanes) over its rows padded along h and w: what the dW
 * schedules that stage x in the padded frame write (depth unpadded: taps reading its pads are
 * left out of the reduction). */
inline double padded_x_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return double(g.n) * g.in[0] * g.cin1() * 16 * (g.in[1] + g.pads[2] + g.pads[3]) * padded_w(p);
}
/** Rows of x (along h) that `ch` output rows read: (ch-1)*sh + (Kh-1)*dh + 1. */
inline int64_t x_rows_of(const Problem& p, int64_t ch) {
  const ConvGeometry& g = p.geo;
  return (ch - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1;
}

/** dW's forms (DwTiles::pair, key "pair"): fp32 products, bf16 dot products over output row
 * pairs (ops::DwAlgorithm::pairs) or over batch pairs (DwAlgorithm::batch_pairs). */
constexpr int kDwRowPairs = 2, kDwBatchPairs = 3;
/** Reduction points one step of form `pair` takes per lane: 2 for either pair form. */
inline int dw_pair_points(int pair) { return pair == 1 ? 1 : 2; }

/** Rows of x dW stages per chunk of `ch` output rows, or with row pairs (two rows each in bf16:
 * 64 bytes a column, as an fp32 row) per chunk of `ch` output row pairs: one per pair where they
 * are indexed by output row pair (ops::pairs_staged_by_output_row), else the rows the pairs
 * span. Batch pairs stage a chunk's rows as fp32 does, each row holding two batches. */
inline int64_t dw_staged_x_rows(const Problem& p, int64_t ch, int pair) {
  if (pair != kDwRowPairs) return x_rows_of(p, ch);
  return ops::pairs_staged_by_output_row(p) ? ch : x_rows_of(p, 2 * ch);
}

/** The staging rule of x's padded fp32 rows (dW): only when the rows are dense. A stride beyond
 * the dilated kernel (along h or w) leaves rows and columns nobody reads: a padded box would
 * mostly hold those (with huge strides and pads, more than memory), so x is read in place. */
inline bool stage_x_rows(const Problem& p) {
  const ConvGeometry& g = p.geo;
  for (int i = 1; i < 3; ++i)
    if (g.stride[i] > (g.kernel[i] - 1) * g.dilation[i] + 1) return false;
  return true;
}

/** Whether dW's pair form (DwAlgorithm::pairs: bf16 dot products over output row pairs) is
 * offered: bf16 inputs whose x rows are staged (stage_x_rows; the pair form stages them). */
inline bool dw_pairs_apply(const Problem& p) {
  return p.in_dtype == DType::kBFloat16 && stage_x_rows(p);
}
/** Whether dW's batch pair form is offered: the pair form's inputs and an even batch. */
inline bool dw_batch_pairs_apply(const Problem& p) { return dw_pairs_apply(p) && p.geo.n % 2 == 0; }
/** Reduction rows dW's chunks split: output rows, or row pairs in the row pair form. */
inline int64_t dw_rows_of(const Problem& p, int pair) {
  return pair == kDwRowPairs ? (p.geo.out[1] + 1) / 2 : p.geo.out[1];
}
/** Batch entries dW's reduction walks: the batch, or its pairs in the batch pair form. */
inline int64_t dw_batch_of(const Problem& p, int pair) {
  return pair == kDwBatchPairs ? p.geo.n / 2 : p.geo.n;
}

/** Sizes the cost model's passes count (TBE layouts, padding lanes included). */
inline double input_bytes(const Problem& p) { return p.in_dtype == DType::kFloat32 ? 4 : 2; }
inline double dy_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return double(g.n) * g.out[0] * g.out[1] * g.out[2] * g.cout1() * 16;
}
/** dy zero-padded by the taps' reach in the stride-phase frame, as dX stages it. */
inline double staged_dy_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  double e = double(g.n) * g.cout1() * 16;
  for (int i = 0; i < 3; ++i) e *= g.out[i] + double(g.kernel[i] - 1) * g.dilation[i] / g.stride[i];
  return e;
}
inline double dx_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return double(g.n) * g.in[0] * g.in[1] * g.in[2] * g.cin1() * 16;
}
/** dW's output (= the filter's FRACTAL_Z_3D) entries. */
inline int64_t dw_out_count(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return p.group.real_g * g.kernel[0] * g.kernel[1] * g.kernel[2] * p.group.cin1_g *
         p.group.cout_g * 16;
}
inline double dw_out_elems(const Problem& p) { return double(dw_out_count(p)); }

/** Valid input lanes of a block up to which the few-input-channel schedules apply: beyond this,
 * the dense schedules' c0 lanes are mostly useful. */
constexpr int kFewCinMaxValid = 8;

/** "" when the first input block of a real group holds few valid lanes (at most
 * kFewCinMaxValid): the few-input-channel schedules put output channels or positions in the
 * lanes instead; else why not (`dense` names the schedule whose c0 lanes are then useful). */
inline std::string few_cin_why_not(const Problem& p, const std::string& dense) {
  if (p.group.cin1_g != 1)
    return std::to_string(p.group.cin1_g) + " input blocks per real group fill c0 lanes";
  const int cv = cin_valid(p);
  if (cv > kFewCinMaxValid)
    return std::to_string(cv) + " valid input channels per block (more than " +
           std::to_string(kFewCinMaxValid) + ") fill " + dense + "'s c0 lanes";
  return "";
}

/** "" when dW's fp32 output fits an accumulator held apart from it (under 1 GiB), else why not. */
inline std::string dw_accumulator_why_not(const Problem& p) {
  const int64_t bytes = 4 * dw_out_count(p);
  if (bytes >= (int64_t(1) << 30))
    return "output of " + std::to_string(bytes) + " bytes is too big to accumulate apart";
  return "";
}

/** "" for depthwise problems (one input channel per group: only the diagonal of a real group's
 * block is nonzero), else why the diagonal schedules do not apply. */
inline std::string diag_why_not(const Problem& p) {
  const int64_t cin_pg = p.geo.cin_pg();
  if (cin_pg != 1)
    return std::to_string(cin_pg) + " input channels per group: the block is " +
           (p.geo.groups == 1 ? "dense" : "block-diagonal, not diagonal");
  return "";
}

/** dX's stride-phase frame: the most positions one phase holds along dim i (0 d, 1 h, 2 w),
 * i.e. the q with x = q*s + phase for x in [0, in): ceil(in / s). */
inline int64_t phase_extent(const Problem& p, int i) {
  const ConvGeometry& g = p.geo;
  return (g.in[i] + g.stride[i] - 1) / g.stride[i];
}

/** The dy rows (od, oh) one row of dX positions reads: its phase's (kd, kh) taps, not every
 * tap (a stride-2 h reads half of Kh's rows per row; the stem's 3 x 7 taps read 3 x 4). What
 * the tiles along a row share, so their chunk footprint. */
inline int64_t dx_dy_rows(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return int64_t(ops::phase_tap_extent(g.kernel[0], g.stride[0], g.dilation[0])) *
         ops::phase_tap_extent(g.kernel[1], g.stride[1], g.dilation[1]);
}

/** Bytes of the fp32 weights the few-cin dX tiles (dx_cout_lanes, dx_w_lanes) read for one w
 * phase of a row: the valid input lanes x every output channel x the phase's taps (its (kd, kh)
 * rows x its kw taps, the largest phase's). Where this fits an L1, dx_cout_lanes' tiles along a
 * phase row find every phase's weights there (dx_streamed_phase_weight_bytes: which do not). */
inline int64_t dx_phase_weight_bytes(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return int64_t(cin_valid(p)) * p.group.cout_g * dx_dy_rows(p) *
         ops::phase_tap_extent(g.kernel[2], g.stride[2], g.dilation[2]) * 4;
}

/** dX's taps of each stride phase along one dim: for each phase r in [0, s), how many of the K
 * taps k have k * dl = r (mod s) (the stem's 7 kh taps at stride 2: 4 and 3). */
inline std::vector<int> phase_tap_counts(int64_t K, int64_t s, int64_t dl) {
  std::vector<int> n(size_t(s), 0);
  for (int64_t k = 0; k < K; ++k) ++n[size_t(k * dl % s)];
  return n;
}

/** Bytes of fp32 weights a few-cin dX tile visit (dx_cout_lanes) reads from beyond an L1 of `l1`
 * bytes, averaged over the stride phases: the tiles along a phase row find a phase's weights in
 * the L1 where they fit it, and stream them where not. Phases differ in taps: the stem's (kh x
 * kw) 4 x 4 taps hold 36 KB, 4 x 3 and 3 x 4 27 KB, 3 x 3 20 KB. l1 = 0: every phase streams
 * (the average is then a phase's weights). */
inline double dx_streamed_phase_weight_bytes(const Problem& p, int64_t l1) {
  const ConvGeometry& g = p.geo;
  const double per_tap = double(cin_valid(p)) * p.group.cout_g * 4;
  double sum = 0;
  int64_t phases = 0;
  for (int nd : phase_tap_counts(g.kernel[0], g.stride[0], g.dilation[0]))
    for (int nh : phase_tap_counts(g.kernel[1], g.stride[1], g.dilation[1]))
      for (int nw : phase_tap_counts(g.kernel[2], g.stride[2], g.dilation[2])) {
        const double bytes = per_tap * nd * nh * nw;
        if (bytes > double(l1)) sum += bytes;
        ++phases;
      }
  return sum / double(phases);
}

/** Bytes of the fp32 dy rows one row of dX positions reads in one real group (every channel). */
inline int64_t dx_row_dy_bytes(const Problem& p) {
  return dx_dy_rows(p) * p.geo.out[2] * p.group.cout_g * 4;
}

/** Bytes of the fp32 dy rows one depth slice of dX positions reads in one real group (every
 * channel) at unit stride: each kd tap's rows under the slice's rows and the kh taps' reach. */
inline int64_t dx_slice_dy_bytes(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return g.kernel[0] * (g.in[1] + (g.kernel[1] - 1) * g.dilation[1]) * g.out[2] *
         p.group.cout_g * 4;
}

/** Bytes of dX's staging and output passes: dy read in its dtype and written in fp32, dX written
 * `out_passes` times (a strided diagonal form writes its phase frame, then gathers it). */
inline double dx_pass_bytes(const Problem& p, int out_passes = 1) {
  return staged_dy_elems(p) * (input_bytes(p) + 4) + dx_elems(p) * 4 * out_passes;
}

}  // namespace tbex::sched
