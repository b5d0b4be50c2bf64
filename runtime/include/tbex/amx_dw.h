#pragma once
/** tbex_amx_dw: the inner kernel of the dw_amx_blocked schedule, called by the kernels it
 * generates (a Halide extern stage). It computes bf16 dW sums on AMX-BF16 tiles in 2 x 2
 * blocks: two operand tiles of x (16 input lanes x kk positions, for two taps or input blocks)
 * times two of dy (kk/2 position pairs x 16 output channels), four fp32 accumulator tiles that
 * stay in tile registers over a chunk of output rows (Halide 21 lowers one accumulator per
 * allocation, reloaded per chunk, so it cannot express this blocking). Products are exact in
 * fp32 and the sums fp32, as in every other bf16 schedule; a tile's sum runs over the output
 * rows in order, so how calls, chunks and blocks are cut never changes a result.
 *
 * Buffers (dims innermost first; element type in brackets):
 *   x   [bf16] (wq, c0, h, c1g, d, b, g, ph): x transposed (ops::DwAlgorithm::xT): lane c0 of
 *       block c1g of real group g at padded-frame position (wq*sw + ph, h, d) of batch b, 0 in
 *       the padding; wq's stride 1;
 *   dy  [bf16] (e, n, row): dy as position pairs (ops::DwAlgorithm::dyV): output channel n of
 *       real group g at output position wo = 2*(row % (We/2)) + e of output row (ho, do, b),
 *       row = (((b*Do + do)*Ho + ho)*real_g + g)*We/2 + wo/2, 0 past Wo; strides e 1, n 2;
 *   out [fp32] (n, c0, kw, kh, c1g, kd, g): the sums over batch and output positions of
 *       x(wo*sw + kw*dw, ho*sh + kh*dh, do*sd + kd*dd) x dy(wo, ho, do) (ops::DwAlgorithm::acct);
 *       n and c0 in whole tiles of 16, n's stride 1.
 * A bounds query (x or dy without host memory) is answered with the region the call reads.
 * Returns 0, or -1 when a buffer's layout is not the one above (the Halide extern-stage
 * convention: the pipeline then fails with an error). */
#include <cstdint>

struct halide_buffer_t;  // HalideRuntime.h

namespace tbex {
/** Output positions (whole rows of row_positions) a chunk of tbex_amx_dw's visits walks: long
 * enough that storing and reloading the four accumulators is small beside the multiplies, short
 * enough that the chunk's x rows (every tap along h and d of every input block) and dy rows stay
 * in L2. The kernel walks chunks of amx_dw_chunk_rows rows; the cost model prices the same. */
constexpr int kAmxDwChunkPositions = 1024;
inline int amx_dw_chunk_rows(int row_positions) {
  return (kAmxDwChunkPositions + row_positions - 1) / row_positions;
}
}  // namespace tbex

extern "C" int tbex_amx_dw(halide_buffer_t* x, halide_buffer_t* dy, int32_t batch, int32_t out_d,
                           int32_t out_h, int32_t row_positions, int32_t real_g, int32_t stride_d,
                           int32_t stride_h, int32_t stride_w, int32_t dil_d, int32_t dil_h,
                           int32_t dil_w, int32_t kk, halide_buffer_t* out);

/** The same loops on tile registers emulated in memory (fp32 sums of exact bf16 products), for
 * any CPU: how tests run the kernel's indexing where the CPU has no AMX. Not fast. */
extern "C" int tbex_amx_dw_emulated(halide_buffer_t* x, halide_buffer_t* dy, int32_t batch,
                                    int32_t out_d, int32_t out_h, int32_t row_positions,
                                    int32_t real_g, int32_t stride_d, int32_t stride_h,
                                    int32_t stride_w, int32_t dil_d, int32_t dil_h, int32_t dil_w,
                                    int32_t kk, halide_buffer_t* out);
