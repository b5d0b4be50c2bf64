#pragma once
/** tbex_amx_dx_cols: the inner kernel of the dx_amx_cols schedule (dX for few input channels,
 * a network's stem), called by the kernels it generates (a Halide extern stage). Its tile
 * multiplies put the taps along w into the accumulator's columns: a column is a (kw, input
 * channel) pair, `lanes` channels per tap (the valid ones padded to a power of two), so the
 * stem's 3 channels x 7 taps fill 28 of two tiles' 32 columns where one input block's 16 lanes
 * would hold 3. An accumulator of M positions of one dy row x 16 columns sums, for one output
 * row, every (kd, kh) tap and output channel (TDPBF16PS: products exact in fp32, fp32 sums);
 * the kernel then adds each position's columns into the output positions its kw taps reach
 * (ow*sw - pad_w + kw*dw), the only sums made outside the tiles. Strides and dilations along
 * every dim; taps whose dy row lies outside the volume are neither staged nor multiplied.
 *
 * Buffers (dims innermost first; element type in brackets):
 *   dy  [bf16] (c0, w, h, c1, d, b): the output gradient, 6HD, c0's stride 1;
 *   wt  [bf16] (e, j, row): the weights as rows of 16 column pairs, column t*16 + j of row
 *       ((kd*Kh + kh)*tiles + t)*cout_g/2 + n2 the weight of output channel 2*n2 + e, tap
 *       (kd, kh, kw), input channel ci for (kw, ci) = divmod(t*16 + j, lanes); 0 where kw >= Kw or
 *       ci is not a valid channel (tiles: amx_dx_cols_tiles);
 *   out [fp32] (c0, w, h, c1, d, b): dX of input block 0 (the only one: at most 8 valid lanes),
 *       lanes >= `lanes` 0; c0 whole 16-lane blocks, its stride 1.
 * A bounds query (a buffer without host memory) is answered with the whole of dy and of wt.
 * Returns 0, or -1 when a buffer's layout or the arguments are not the ones above or staging
 * memory is not to be had (the Halide extern-stage convention: the pipeline then fails). */
#include <cstdint>

struct halide_buffer_t;  // HalideRuntime.h

namespace tbex {
/** The kernel's columns per tap: the `valid` input channels (1-8) padded to a power of two, so a
 * tap's columns never straddle a 4-lane group and the column sums are whole small vectors. */
inline int amx_dx_cols_lanes(int valid) {
  int l = 1;
  while (l < valid) l *= 2;
  return l;
}
/** Accumulator tiles of 16 columns holding Kw taps of `lanes` columns each. */
inline int amx_dx_cols_tiles(int kw_extent, int lanes) { return (kw_extent * lanes + 15) / 16; }
/** The positions (rows) of each tile along a dy row of `out_w` positions: the row's tiles of at
 * most 16 as even as they come, so a row of 56 is four tiles of 14, not three of 16 and one of 8
 * (a multiply costs its rows). The last tile ends at the row's end. */
inline int amx_dx_cols_rows(int out_w) {
  const int tiles = (out_w + 15) / 16;
  return (out_w + tiles - 1) / tiles;
}
}  // namespace tbex

/** The kernel's arguments besides its buffers: dy's extents (out_*: depth, height, width and
 * 16-channel blocks), the taps (extents, strides, dilations, head pads), the output channels
 * reduced over (cout_g, the weights' rows: a multiple of kk), kk output channels per tile
 * multiply (even, at most 32) and `lanes` columns per tap (1, 2, 4 or 8; Kw * lanes <= 32). */
#define TBEX_AMX_DX_COLS_ARGS                                                                   \
  halide_buffer_t *dy, halide_buffer_t *wt, int32_t out_d, int32_t out_h, int32_t out_w,        \
      int32_t out_c1, int32_t kd_extent, int32_t kh_extent, int32_t kw_extent, int32_t stride_d, \
      int32_t stride_h, int32_t stride_w, int32_t dil_d, int32_t dil_h, int32_t dil_w,           \
      int32_t pad_d, int32_t pad_h, int32_t pad_w, int32_t cout_g, int32_t kk, int32_t lanes,    \
      halide_buffer_t *out

extern "C" int tbex_amx_dx_cols(TBEX_AMX_DX_COLS_ARGS);

/** The same loops on tile registers emulated in memory (fp32 sums of exact bf16 products), for
 * any CPU: how tests run the kernel's indexing where the CPU has no AMX. Not fast. */
extern "C" int tbex_amx_dx_cols_emulated(TBEX_AMX_DX_COLS_ARGS);
