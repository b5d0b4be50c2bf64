#pragma once

#include "Halide.h"

namespace tbex::lower {

/** Puts the broadcast operand of each bf16 pair dot product (VDPBF16PS) where the instruction can
 * read it from memory. Halide matches `vector_reduce_add(f32(a) * f32(b))` to
 * dpbf16ps(acc, a, b) in the order its simplifier leaves the product, which puts a repeated
 * pair (dy's pair for every lane) first; only the last operand of VDPBF16PS may be an embedded
 * broadcast ({1to16}), so LLVM loads the pair with a separate VBROADCASTSS. On Zen 4 that
 * broadcast takes a slot of the dot-product pipes: a 13-position, 1-block dX tile ran at 70% of
 * the dot rate, and a microbenchmark of dots with separate broadcasts at 0.67 per cycle against
 * 0.97 with embedded ones. The pass writes such a reduction as a call of Halide's own runtime
 * wrapper (dpbf16psx16) with the pair last; the sums are the same instructions' (bit-identical).
 * Only for targets with AVX512_BF16 (sched::has_bf16_dot): the call has no portable lowering. */
void put_dot_broadcasts_last(Halide::Pipeline& pipeline);

}  // namespace tbex::lower
