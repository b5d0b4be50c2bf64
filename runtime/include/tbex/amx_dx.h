#pragma once
/** tbex_amx_dx: the inner kernel of the dx_amx_blocked schedule, called by the kernels it
 * generates (a Halide extern stage). It computes bf16 dX sums on AMX-BF16 tiles in 2 x 2
 * blocks: two tiles of 16 positions along w times two 16-lane input blocks, four fp32
 * accumulator tiles sharing two dy and two weight tiles per multiply (Halide 21 lowers one
 * accumulator per allocation, so it cannot express this blocking). Products are exact in fp32
 * and the sums fp32, as in every other bf16 schedule; only the summation order differs.
 *
 * The kernel reads dy as the caller holds it (6HD) and stages, per batch and depth of a call,
 * the rows of dy its taps reach: a position's kk channels side by side (runs of up to three 6HD
 * blocks), so that a tile of 16 positions is one contiguous run; 0 outside the volume along w.
 * Rows outside the volume along h and d are neither staged nor multiplied. Strided, a tile's
 * positions are 16 of one stride phase along w (sw apart, reading consecutive dy positions),
 * and each position walks its phase's taps only.
 *
 * Buffers (dims innermost first; element type in brackets):
 *   dy  [bf16] (c0, w, h, c1, d, b): the output gradient, 6HD, c0's stride 1;
 *   wt  [bf16] (e, c0, row): the weights as rows of 16 lane pairs, row = (c1*taps + tap) *
 *       cout_g/2 + channel pair, tap = (kd*Kh + kh)*Kw + kw (ops::DxAlgorithm::wzk);
 *   out [fp32] (c0, w, h, c1, d, b): the sums over the channels g*cout_g + n of real group
 *       g = c1 / cin1_g and the taps of dy(channel, (w + pl - kw*dw) / sw, (h + pt - kh*dh) / sh,
 *       (d + pf - kd*dd) / sd) x weight, over the taps whose quotients are whole (dy 0 outside
 *       the volume and in blocks past out_c1); c0 whole 16-lane blocks, its stride 1.
 * A bounds query (a buffer without host memory) is answered with the whole of dy along w, h,
 * c1 and d, and the weight rows of out's blocks. Returns 0, or -1 when a buffer's layout is not
 * the one above or staging memory is not to be had (the Halide extern-stage convention: the
 * pipeline then fails with an error). */
#include <cstdint>

struct halide_buffer_t;  // HalideRuntime.h

namespace tbex {
/** Whether tbex_amx_dx walks a call's rows of the output as one row of rows x in_w positions
 * (when the buffers' rows lie back to back, as the schedule's do): pointwise along h and w
 * (Kh = Kw = 1, no pads there, so dy's rows are the output's), more than one row a call. Only
 * the call's last tile of 16 positions is then ragged. The kernel and the cost model ask this. */
inline bool amx_dx_flat_rows(int kh_extent, int kw_extent, int pad_h, int pad_w, int in_w, int out_w,
                             int rows) {
  return kh_extent == 1 && kw_extent == 1 && pad_h == 0 && pad_w == 0 && in_w == out_w && rows > 1;
}
}  // namespace tbex

/** The kernel's arguments besides its buffers: dy's extents (out_*: depth, height, width and
 * 16-channel blocks), the taps (extents, strides, dilations, head pads), real groups of cin1_g input
 * blocks and cout_g output channels (a multiple of 16), kk output channels per tile multiply
 * (even, at most 32, dividing cout_g). */
#define TBEX_AMX_DX_ARGS                                                                        \
  halide_buffer_t *dy, halide_buffer_t *wt, int32_t out_d, int32_t out_h, int32_t out_w,        \
      int32_t out_c1, int32_t kd_extent, int32_t kh_extent, int32_t kw_extent, int32_t stride_d, \
      int32_t stride_h, int32_t stride_w, int32_t dil_d, int32_t dil_h, int32_t dil_w,           \
      int32_t pad_d, int32_t pad_h, int32_t pad_w, int32_t cin1_g, int32_t cout_g, int32_t kk,   \
      halide_buffer_t *out

extern "C" int tbex_amx_dx(TBEX_AMX_DX_ARGS);

/** The same loops on tile registers emulated in memory (fp32 sums of exact bf16 products), for
 * any CPU: how tests run the kernel's indexing where the CPU has no AMX. Not fast. */
extern "C" int tbex_amx_dx_emulated(TBEX_AMX_DX_ARGS);
