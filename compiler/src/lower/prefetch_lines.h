#pragma once

#include <string>
#include <vector>

#include "Halide.h"

namespace tbex::lower {

/** Mends the prefetches Halide lowers for x86 targets (one per 64-byte line, in a loop
 * "prefetch_split_<buffer>.<dim>"), and places them.
 * - Halide steps that loop by 64 *elements* where its extent counts 64-byte lines: for 16-bit
 *   data it prefetched every other line over twice the region, for 32-bit every fourth over four
 *   times. The pass steps it by one line (64 bytes / element size), so the region it prefetches
 *   is the one the schedule asked for. Zen 4, the seed's fp32 dW (next chunk's rows prefetched,
 *   1 thread, interleaved runs, min / median of 4): 9.57 / 9.67 ms against 9.86 / 10.02.
 * - With `spread_over` paths of loop vars (each outermost first; the first path found is used):
 *   a prefetch nest placed right before (in the same block) a serial loop of the path's first var
 *   with a constant extent moves into it, each iteration of the path's deepest loop found within
 *   it (an inner level may run any count) prefetching an even share of the lines at the top of
 *   its body. A schedule prefetching the next block (or chunk) of its staged operand at the
 *   block loop thus spreads the reads over the block's tiles (or the tiles' rows), which hides
 *   them behind the FMAs instead of issuing one burst that stalls on the memory path before
 *   them. Zen 4, d dW bf16 (1 thread, min / median of 4): 1.92 / 1.94 ms against 2.09 / 2.15
 *   without a prefetch and 2.00 / 2.12 with the burst.
 * The prefetches never change what the pipeline computes. */
void mend_prefetches(Halide::Pipeline& pipeline, const Halide::Target& target,
                     const std::vector<std::vector<std::string>>& spread_over);

}  // namespace tbex::lower
