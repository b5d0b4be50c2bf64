#pragma once
/** Which (position, tap) pairs of a reduction read an operand row inside its volume, per dim,
 * and which pad taps the algorithms leave out of their reductions (ops.h's forms and the
 * schedules' estimates read these). Depth 0, height 1, width 2. */
#include <cstdint>

#include "tbex/problem.h"

namespace tbex::ops {

/** One dim's (position, tap) pairs a reduction walks, and those whose operand row is inside
 * its volume. dX walks input positions i and the taps k of i's stride phase, reading dy at
 * (i + pad - k*dil)/s; dW and the forward conv walk output positions o and every tap k, reading
 * x at o*s + k*dil - pad. */
struct TapPairs {
  int64_t walked = 0, inside = 0;
};
inline TapPairs tap_pairs_1d(OpKind op, int64_t in, int64_t out, int64_t k, int64_t s, int64_t dil,
                             int64_t pad) {
  TapPairs n;
  for (int64_t pos = 0; pos < (op == OpKind::kBackpropInput ? in : out); ++pos)
    for (int64_t j = 0; j < k; ++j) {
      if (op == OpKind::kBackpropInput) {
        const int64_t t = pos + pad - j * dil;
        if (t % s) continue;  // not a tap of this position's phase
        ++n.walked, n.inside += t / s >= 0 && t / s < out;
      } else {
        const int64_t i = pos * s + j * dil - pad;
        ++n.walked, n.inside += i >= 0 && i < in;
      }
    }
  return n;
}
/** Of those pairs, the share inside. */
inline double inside_share_1d(OpKind op, int64_t in, int64_t out, int64_t k, int64_t s,
                              int64_t dil, int64_t pad) {
  const TapPairs n = tap_pairs_1d(op, in, out, k, s, dil, pad);
  return n.walked ? double(n.inside) / n.walked : 1.0;
}

/** Of p's dim i, the (position, tap) pairs whose operand row is inside (as inside_share_1d
 * counts them). */
inline int64_t inside_pairs(const Problem& p, int i) {
  const ConvGeometry& g = p.geo;
  return tap_pairs_1d(p.op, g.in[i], g.out[i], g.kernel[i], g.stride[i], g.dilation[i], g.pads[2 * i])
      .inside;
}

/** inside_share_1d of p's dim i (0: depth, 1: height, 2: width). */
inline double inside_share(const Problem& p, int i) {
  const ConvGeometry& g = p.geo;
  return inside_share_1d(p.op, g.in[i], g.out[i], g.kernel[i], g.stride[i], g.dilation[i],
                         g.pads[2 * i]);
}

/** Whether leaving out p's dim i pairs whose operand is outside leaves every loop of the
 * reduction's inner walk non-empty. dW (and the forward conv, the same walk) walks the taps
 * outside the positions, and its tiles stage x per chunk of output rows: every tap must read x
 * inside at some output position (tap k alone is one tap over pads shifted by k*dilation), and
 * every output position through some tap (a chunk of one row reading only pads had its staged
 * x box inverted). dX walks a position's taps: every input position must read dy inside
 * through some tap of its phase (a position whose phase has no tap reads nothing either way). */
inline bool every_walk_reads_inside(const Problem& p, int i) {
  const ConvGeometry& g = p.geo;
  const int64_t pad = g.pads[2 * i];
  if (p.op == OpKind::kBackpropInput) {
    for (int64_t pos = 0; pos < g.in[i]; ++pos)  // position pos alone: pads shifted by pos
      if (inside_share_1d(p.op, 1, g.out[i], g.kernel[i], g.stride[i], g.dilation[i],
                          pad + pos) == 0)
        return false;
    return true;
  }
  for (int64_t k = 0; k < g.kernel[i]; ++k)
    if (inside_share_1d(p.op, g.in[i], g.out[i], 1, g.stride[i], g.dilation[i],
                        pad - k * g.dilation[i]) == 0)
      return false;
  for (int64_t pos = 0; pos < g.out[i]; ++pos)  // output position pos alone
    if (inside_share_1d(p.op, g.in[i], 1, g.kernel[i], g.stride[i], g.dilation[i],
                        pad - pos * g.stride[i]) == 0)
      return false;
  return true;
}

/** Whether p's reduction leaves out dim i's (position, tap) pairs whose operand is outside
 * (depth 0, height 1, width 2). Depth and height: wherever one is (dW's tiles narrow their row
 * and depth loops to the rows inside). Width, along the row: dW wherever one is, as likely
 * conditions that Halide partitions out of the row loop (the edge positions run their inside
 * taps, the steady loop none of the checks; Emerald Rapids, 1 thread: f dW 10.49 against 10.81
 * ms, c2 44.6 / 45.0, e1 level to 1% faster, the seed and g level); dX and the forward conv
 * compute every tap along the row.
 * dW skipped depth and height only from 1/64 of a dim's pairs until its tiles read x in place
 * there too (the seed, 1 of 108 row pairs, ran 4% slower skipped on a Zen 3, staged); on
 * Emerald Rapids skipping the 1-1.2% of b, c1 and g and the seed's, x read in place, ran 1.4-3.5%
 * faster (b 254 against 258 ms, c1 89.7 / 92.6, g 36.2 / 37.5, the seed 5.91 / 6.02; f16, x
 * staged: level to 1% faster).
 * dW keeps a dim's pad taps where one of its taps reads nothing but pads: leaving them out
 * would empty that tap's loops, and Halide's bounds of emptied loops asked x read in place for
 * rows outside it (depth -3 on a public case, 4 taps of dilation 4 over pads of 3; depth 6 of 5
 * on a random one), which the input's bounds check refused; likewise where an output position
 * reads nothing but pads (dw_tiled with x staged per one-row chunk: "Allocation xr has a size
 * greater than 2^31: -1024" on a random depthwise geometry). xr reads zeros in such a dim.
 * dX keeps a dim's pad taps where an input position reads dy through none of its taps: leaving
 * them out emptied those positions' tap loops, and Halide's box of the staged dy came out
 * inverted, a negative allocation it rejects at compile time (random geometries: depth 3 with
 * slices 0 and 1 reading only pads; depth 2 whose every tap reads pads, where every schedule
 * failed). Both rules are every_walk_reads_inside; the forward conv, which walks as dW does
 * and reads zero-padded x, follows dW's. */
inline bool skips_outside(const Problem& p, int i) {
  const bool dw = p.op == OpKind::kBackpropFilter;
  return inside_share(p, i) < 1 && (i < 2 || dw) && every_walk_reads_inside(p, i);
}

/** Whether dW's reduction keeps taps of p's dim i that read x's pads (some do, and skips_outside
 * does not leave them out): DwAlgorithm::xr reads zeros there. */
inline bool keeps_pad_taps(const Problem& p, int i) {
  return inside_share(p, i) < 1 && !skips_outside(p, i);
}
/** Whether dW's reduction keeps no tap reading x's pads in any dim: xr is x itself, with no
 * padding select. */
inline bool keeps_no_pad_taps(const Problem& p) {
  return !keeps_pad_taps(p, 0) && !keeps_pad_taps(p, 1) && !keeps_pad_taps(p, 2);
}

/** The share of the multiply-adds the forms that leave out padding execute (the dims
 * skips_outside names). */
inline double inside_tap_share(const Problem& p) {
  double share = 1.0;
  for (int i = 0; i < 3; ++i)
    if (skips_outside(p, i)) share *= inside_share(p, i);
  return share;
}

/** Whether every (position, tap) pair of p's reduction reads its operand inside the volume in
 * all three dims (inside_share 1: no tap reaches a pad). */
inline bool reads_inside(const Problem& p) {
  return inside_share(p, 0) == 1 && inside_share(p, 1) == 1 && inside_share(p, 2) == 1;
}

/** Whether dX's reduction leaves out every depth and height tap that reads a pad of dy (none
 * reads one, or skips_outside): dy's padding select is then on the width alone, which a schedule
 * reading dy in place can partition away along the row (dx_tiled). */
inline bool dy_pads_left_out(const Problem& p) {
  const auto left_out = [&](int i) { return inside_share(p, i) == 1 || skips_outside(p, i); };
  return left_out(0) && left_out(1);
}

}  // namespace tbex::ops
