#pragma once
/** Scratch memory for kernels' intermediate buffers (staged inputs, phase frames, accumulators).
 *
 * Halide allocates a compute_root buffer on every call and frees it at the end. Large blocks
 * come from mmap and go back to the OS on free, so each call paid page faults and zeroing for
 * every page again, a sizeable share of a large kernel's time. tbex's kernels allocate through
 * these functions instead: blocks of at least kScratchMinCached bytes are kept after free, up to
 * kScratchMaxCached bytes in all, and handed out again to a later request they fit (at most twice
 * its size). Thread-safe; the memory is 128-byte aligned and not zeroed. */
#include <cstddef>
#include <cstdint>

namespace tbex {

constexpr size_t kScratchMinCached = size_t(128) << 10;  ///< glibc's mmap threshold
constexpr size_t kScratchMaxCached = size_t(512) << 20;  ///< retained at most, all blocks

void* scratch_alloc(size_t bytes);
void scratch_free(void* p);  ///< nullptr is a no-op

struct ScratchStats {
  int64_t allocations = 0;  ///< blocks taken from the system
  int64_t reuses = 0;       ///< requests served from the cache
  int64_t cached_bytes = 0; ///< bytes held in the cache now
};
ScratchStats scratch_stats();

/** Returns every cached block to the system. */
void scratch_trim();

}  // namespace tbex
