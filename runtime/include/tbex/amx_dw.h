#pragma once
/** tbex_amx_dw: the inner kernel of the dw_amx_blocked schedule, called by the kernels it
 * generates (a Halide extern stage). It computes bf16 dW sums on AMX-BF16 tiles in 2 x 2
 * blocks: two operand tiles of dy (16 output channels x kk positions, for two output blocks)
 * times two of x (kk/2 position pairs x 16 input lanes, for two taps or input blocks), four
 * fp32 accumulator tiles that stay in tile registers over a chunk of output rows (Halide 21
 * lowers one accumulator per allocation, reloaded per chunk, so it cannot express this
 * blocking). Products are exact in fp32 and the sums fp32, as in every other bf16 schedule; a
 * tile's sum runs over the output rows in order, so how calls, chunks and blocks are cut never
 * changes a result.
 *
 * The kernel reads x and dy as the caller holds them (6HD) and stages each chunk's operands
 * itself, in L2: dy transposed (a row of 16 channels per output channel) and x as position
 * pairs. A tile multiply pairs output position q of a row with q + We/2 (We: the row's
 * positions rounded up to even), so every tap of a phase along w reads one staged copy of x at
 * an offset.
 *
 * Buffers (dims innermost first; element type in brackets):
 *   x   [bf16] (c0, w, h, c1, d, b): the input, 6HD, c0's stride 1;
 *   dy  [bf16] (c0, w, h, c1, d, b): the output gradient, 6HD, c0's stride 1;
 *   out [fp32] (c0, n, kw, kh, c1g, kd, g, part): per part of the reduction, the sums over its
 *       output positions of x(c0 of block g*cin1_g + c1g at (wo*sw + kw*dw - pl,
 *       ho*sh + kh*dh - pt, do*sd + kd*dd - pf), 0 in the padding) x dy(channel g*cout_g + n at
 *       (wo, ho, do)); c0 and n in whole tiles of 16, c0's stride 1. Part k holds batches
 *       [k*part_len, (k+1)*part_len) (part_by_batch) or, split along depth, the output depths
 *       [k*part_len, (k+1)*part_len) of every batch; one part of all the batches gives dW itself
 *       (the caller adds the parts, in order, for the split reduction). Blocks past the last one
 *       read the last (the caller masks such sums, as it masks channels of other groups).
 * A bounds query (a buffer without host memory) is answered with the whole input.
 * Returns 0, or -1 when a buffer's layout is not the one above or staging memory is not to be
 * had (the Halide extern-stage convention: the pipeline then fails with an error). */
#include <cstdint>

struct halide_buffer_t;  // HalideRuntime.h

namespace tbex {
/** Output positions a chunk of tbex_amx_dw's visits walks: long enough that storing and
 * reloading the four accumulators is small beside the multiplies, short enough that the
 * chunk's staged x rows (every tap along h and d of every input block) and dy rows stay in L2. */
constexpr int kAmxDwChunkPositions = 1024;
/** Output rows (of row_positions each) in one chunk: whole planes of plane_rows rows where a
 * plane is shorter than a chunk, else a piece of one plane (chunks never straddle planes, so a
 * chunk's x rows are one window of each plane it reads). The kernel walks these chunks; the
 * cost model prices the same. */
inline int amx_dw_chunk_rows(int row_positions, int plane_rows) {
  const int rows = (kAmxDwChunkPositions + row_positions - 1) / row_positions;
  return rows >= plane_rows ? rows / plane_rows * plane_rows : rows;
}
/** How many chunks of amx_dw_chunk_rows rows `planes` planes of plane_rows rows make. */
inline int64_t amx_dw_chunks(int row_positions, int plane_rows, int64_t planes) {
  const int rows = amx_dw_chunk_rows(row_positions, plane_rows);
  if (rows >= plane_rows) {
    const int per = rows / plane_rows;
    return (planes + per - 1) / per;
  }
  return planes * ((plane_rows + rows - 1) / rows);
}
}  // namespace tbex

/** The kernel's arguments besides its buffers: the conv's geometry (x: batch, in_*; dy:
 * out_*; row_positions: We, out_w rounded up to even; real_g groups of cin1_g input blocks and
 * cout_g output channels; strides, dilations, head pads), how the reduction's parts are cut
 * (part_by_batch, part_len: see out), kk positions per tile multiply (even, dividing
 * row_positions, at most 32). */
#define TBEX_AMX_DW_ARGS                                                                       \
  halide_buffer_t *x, halide_buffer_t *dy, int32_t batch, int32_t in_d, int32_t in_h,          \
      int32_t in_w, int32_t in_c1, int32_t out_d, int32_t out_h, int32_t out_w, int32_t out_c1, \
      int32_t row_positions, int32_t real_g, int32_t cin1_g, int32_t cout_g, int32_t stride_d,  \
      int32_t stride_h, int32_t stride_w, int32_t dil_d, int32_t dil_h, int32_t dil_w,          \
      int32_t pad_d, int32_t pad_h, int32_t pad_w, int32_t part_by_batch, int32_t part_len,     \
      int32_t kk, halide_buffer_t *out

extern "C" int tbex_amx_dw(TBEX_AMX_DW_ARGS);

/** The same loops on tile registers emulated in memory (fp32 sums of exact bf16 products) and
 * operands staged by scalar code, for any CPU: how tests run the kernel's indexing where the
 * CPU has no AMX. Not fast. */
extern "C" int tbex_amx_dw_emulated(TBEX_AMX_DW_ARGS);
