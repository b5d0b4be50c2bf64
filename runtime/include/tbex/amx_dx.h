#pragma once
/** tbex_amx_dx: the inner kernel of the dx_amx_blocked schedule, called by the kernels it
 * generates (a Halide extern stage). It computes unstrided bf16 dX sums on AMX-BF16 tiles in
 * 2 x 2 blocks: two tiles of 16 positions along w times two 16-lane input blocks, four fp32
 * accumulator tiles sharing two dy and two weight tiles per multiply (Halide 21 lowers one
 * accumulator per allocation, so it cannot express this blocking). Products are exact in fp32
 * and the sums fp32, as in every other bf16 schedule; only the summation order differs.
 *
 * Buffers (dims innermost first; element type in brackets):
 *   dy  [bf16] (j, w, kc, h, d, b, g): output channel kc*kk + j of real group g at dy position
 *       (w, h, d) of batch b, 0 outside the volume (the stage Halide computes before the call);
 *   wt  [bf16] (e, c0, row): the weights as rows of 16 lane pairs, row = (c1*taps + tap) *
 *       cout_g/2 + channel pair, tap = (kd*Kh + kh)*Kw + kw (ops::DxAlgorithm::wzk);
 *   out [fp32] (c0, w, h, c1, d, b): the sums over output channels and taps of
 *       dy(w + pl - kw*dw, h + pt - kh*dh, d + pf - kd*dd) x weight.
 * A bounds query (dy or wt without host memory) is answered with the region the call reads:
 * the positions of whole 16-row tiles (the last tile reads past the row's end; its extra rows
 * are dropped). Returns 0 (the Halide extern-stage convention). */
#include <cstdint>

struct halide_buffer_t;  // HalideRuntime.h

extern "C" int tbex_amx_dx(halide_buffer_t* dy, halide_buffer_t* wt, int32_t kd_extent,
                           int32_t kh_extent, int32_t kw_extent, int32_t dil_d, int32_t dil_h,
                           int32_t dil_w, int32_t pad_d, int32_t pad_h, int32_t pad_w,
                           int32_t cin1_g, int32_t cout_g, int32_t kk, halide_buffer_t* out);

/** The same loops on tile registers emulated in memory (fp32 sums of exact bf16 products), for
 * any CPU: how tests run the kernel's indexing where the CPU has no AMX. Not fast. */
extern "C" int tbex_amx_dx_emulated(halide_buffer_t* dy, halide_buffer_t* wt, int32_t kd_extent,
                                    int32_t kh_extent, int32_t kw_extent, int32_t dil_d,
                                    int32_t dil_h, int32_t dil_w, int32_t pad_d, int32_t pad_h,
                                    int32_t pad_w, int32_t cin1_g, int32_t cout_g, int32_t kk,
                                    halide_buffer_t* out);
