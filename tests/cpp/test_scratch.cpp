// The scratch cache kernels allocate their intermediate buffers from: 128-byte alignment, large
// blocks reused after free (for requests they fit, at most twice their size), small ones not
// cached, the retained total bounded, trim empties it; and a JIT kernel's second call reuses the
// blocks of its first.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tbex/scratch.h"
#include "tbex/tbex.h"

namespace tbex {
namespace {

TEST(Scratch, AlignedAndReused) {
  scratch_trim();
  const size_t big = size_t(1) << 20;
  void* a = scratch_alloc(big);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 128, 0u);
  std::memset(a, 1, big);
  const ScratchStats s0 = scratch_stats();
  scratch_free(a);
  EXPECT_EQ(scratch_stats().cached_bytes, s0.cached_bytes + (int64_t)big);
  void* b = scratch_alloc(big - 1000);  // fits the cached block
  EXPECT_EQ(b, a);
  EXPECT_EQ(scratch_stats().reuses, s0.reuses + 1);
  scratch_free(b);
  void* c = scratch_alloc(big / 4);  // the cached block is more than twice as large: not used
  EXPECT_NE(c, a);
  scratch_free(c);
  void* small = scratch_alloc(1000);  // below the threshold: never cached
  scratch_free(small);
  scratch_free(nullptr);
  EXPECT_LE(scratch_stats().cached_bytes, (int64_t)kScratchMaxCached);
  scratch_trim();
  EXPECT_EQ(scratch_stats().cached_bytes, 0);
}

TEST(Scratch, RetainedTotalIsBounded) {
  scratch_trim();
  std::vector<void*> blocks;
  const size_t each = kScratchMaxCached / 3;
  for (int i = 0; i < 5; ++i) blocks.push_back(scratch_alloc(each));
  for (void* p : blocks) scratch_free(p);
  EXPECT_LE(scratch_stats().cached_bytes, (int64_t)kScratchMaxCached);
  EXPECT_GT(scratch_stats().cached_bytes, 0);
  scratch_trim();
}

TEST(Scratch, KernelCallsReuseTheirBuffers) {
  // Strided dX stages fp16 dy whole (zero-padded, converted to fp32) in a root buffer of
  // ~0.6 MB (at unit stride dy is read in place, or staged row by row beside the tiles).
  ParaDict para;
  para.strides = std::vector<int64_t>{1, 2, 2, 2, 1};
  para.pads = std::vector<int64_t>{1, 1, 1, 1, 1, 1};
  para.dilations = std::vector<int64_t>{1, 1, 1, 1, 1};
  para.res_dtype = "float32";
  Problem p = make_backprop_input_problem(shape_fz3d({32, 32, 3, 3, 3}, 1), DType::kFloat16,
                                          {1, 16, 2, 16, 16, 16}, DType::kFloat16, {32, 32, 3, 3, 3},
                                          {1, 32, 32, 32, 32}, para);
  auto k = compile(p);
  // fp16 bits of 0.5 and 0.25.
  std::vector<uint16_t> w(32 * 32 * 27, 0x3800), dy(16 * 2 * 16 * 16 * 16, 0x3400);
  std::vector<float> out(1 * 32 * 2 * 32 * 32 * 16);
  k->run_dense({w.data(), dy.data()}, out.data());
  const ScratchStats before = scratch_stats();
  k->run_dense({w.data(), dy.data()}, out.data());
  const ScratchStats after = scratch_stats();
  EXPECT_GT(after.reuses, before.reuses);
  EXPECT_EQ(after.allocations, before.allocations) << "the second call took new blocks";
}

}  // namespace
}  // namespace tbex
