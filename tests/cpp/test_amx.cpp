// dX and dW of bf16 inputs on AMX-BF16 tiles (dx_amx, dx_amx_blocked, dx_amx_cols, dw_amx, dw_amx_blocked). Native: compiled for the host where it has AMX
// (avx512_sapphirerapids and the OS's grant of the tile state), TDPBF16PS asserted in the
// assembly, against the float64 reference; skipped with the reason elsewhere. Portable: the tile
// form's algorithm (use_tiles of DxAlgorithm / DwAlgorithm: the Funcs the schedules tile) under Halide's default
// schedule for a target without AMX, and the blocked kernels on emulated tile registers
// (tbex_amx_dx_emulated, tbex_amx_dx_cols_emulated, tbex_amx_dw_emulated), against the same reference, on every machine. Inputs are
// multiples of 1/8: every product and partial sum is exact in fp32, so any summation order gives
// the reference to the last bit.
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>

#include "Halide.h"
#include "codegen/objects.h"
#include "lower/pipeline.h"
#include "lower/select.h"
#include "lowered_check.h"
#include "ops/ops.h"
#include "schedules/cost_model.h"
#include "schedules/loops.h"
#include "schedules/registry.h"
#include "tbex/amx.h"
#include "tbex/amx_dw.h"
#include "tbex/amx_dx.h"
#include "tbex/amx_dx_cols.h"
#include "tbex/tbex.h"
#include "tbex/thread_pool.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::Case;
using test::dw_problem;
using test::dx_problem;

const Case kCases[] = {
    // W = 7: one tile of 16 rows, 9 past the row's end.
    {"short_row", 2, 16, 16, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    // W = 37: two whole tiles and a ragged one; 64 output channels: two 32-channel steps per tap.
    {"ragged_row", 1, 32, 64, 1, {3, 4, 37}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"grouped_mag4", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 0, 1}},
    // cout_g 48: 16 channels per tile multiply.
    {"odd_channels", 1, 20, 37, 1, {4, 5, 19}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 0, 2, 1}},
    {"dilated", 1, 16, 32, 1, {5, 7, 20}, {3, 2, 3}, {1, 1, 1}, {2, 1, 2}, {2, 2, 1, 0, 2, 2}},
    {"pointwise", 2, 48, 32, 1, {3, 4, 18}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    // 64 output channels x Kw 3: six tile multiplies per (kd, kh), so the taps are split per
    // (kd, kh) into sums over blocks of 8 rows (W 20 pads to 32): H 11 ends in a ragged block.
    {"split_taps", 1, 16, 64, 1, {3, 11, 20}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    // Strided with every extent a multiple of its stride (the scatter form): phases of 2 taps and
    // of 1 (the tap loop predicated around the tile multiply), and a stride-3 axis of one tap
    // per phase.
    {"strided_phases", 2, 16, 32, 1, {4, 6, 9}, {3, 3, 3}, {2, 2, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    // Stride and dilation 2: odd phases meet no tap at all (an empty reduction: dX 0 there).
    {"strided_dilated", 1, 16, 32, 1, {4, 6, 8}, {3, 2, 3}, {2, 2, 2}, {2, 1, 2}, {2, 1, 0, 1, 2, 2}},
    // Three input blocks (dx_amx_blocked: a pair and a single one), W 40: a tile pair and a
    // ragged single tile.
    {"three_blocks", 1, 48, 32, 1, {2, 3, 40}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1, 1, 1, 1}},
    // Two real groups of two blocks each: a pair never spans two groups.
    {"group_pairs", 2, 64, 64, 2, {2, 3, 18}, {3, 1, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0, 0, 1, 1}},
    // 16 input blocks of W 40: dx_amx_blocked calls one row at a time, so with dilation 3 along
    // h its kernel stages only every third row of its reach (rows between are never read).
    {"dilated_rows", 1, 256, 32, 1, {2, 7, 40}, {1, 3, 1}, {1, 1, 1}, {1, 3, 1}, {0, 0, 3, 3, 0, 0}},
    // Six groups of 12 output channels, mag_factor 4: two real groups of 48 channels, the second
    // reaching past dy's 5 blocks (the kernel stages zeros there).
    {"groups_past_dy", 1, 96, 72, 6, {2, 4, 18}, {2, 2, 3}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}},
    // A 3 x 1 x 1 kernel on 16 input blocks of rows of 28: dx_amx_blocked calls 4 rows at a
    // time (from rows 0, 4 and 8), each one row of 112 positions (pointwise along h and w).
    {"temporal_rows", 1, 256, 32, 1, {3, 12, 28}, {3, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0, 0, 0, 0}},
    // Stride 2 along every dim over odd extents (the phase frame ragged: dx_amx has no scatter
    // form here): W 37's phases of 19 and 18 positions, each a tile pair whose second is ragged;
    // two input blocks, a block pair.
    {"strided_ragged", 1, 32, 32, 1, {5, 7, 37}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    // Stride 3 along w (phases of 17, 17 and 16 positions) and 2 along h only, 48 output
    // channels (16 a tile multiply), three input blocks (a pair and a single one).
    {"strided_w3", 2, 48, 48, 1, {2, 6, 50}, {1, 2, 3}, {1, 2, 3}, {1, 1, 1}, {0, 0, 0, 1, 1, 1}},
};

Halide::Target without_amx(Halide::Target t) {
  return t.without_feature(Halide::Target::AVX512_SapphireRapids);
}

/** Why the host cannot run the native tests ("" when it can). */
std::string no_amx() {
  const Halide::Target t = lower::host_target();
  if (sched::has_amx_bf16(t)) return "";
  if (!t.has_feature(Halide::Target::AVX512_SapphireRapids))
    return "the host has no AMX-BF16 (Halide target " + t.to_string() +
           " lacks avx512_sapphirerapids): the portable test covers the algorithm";
  return "the OS did not grant this process the AMX tile state (arch_prctl): the portable test "
         "covers the algorithm";
}

/** Why schedule `name` of registry `reg` does not apply to p on t ("" when it does). */
template <class S>
std::string why(const std::vector<const S*>& reg, const char* name, const Problem& p,
                const Halide::Target& t) {
  const S* s = sched::find_schedule(reg, name);
  const std::string w = s->why_not(p);
  return w.empty() ? s->why_not_on(t) : w;
}

class AmxTest : public ::testing::TestWithParam<int> {};

TEST_P(AmxTest, PortableTileFormMatchesReference) {
  const Case& c = kCases[GetParam()];
  const Problem p = dx_problem(c, DType::kBFloat16);
  ops::DxAlgorithm a = ops::define_backprop_input(p);
  ASSERT_TRUE(a.pairs);
  a.use_tiles();
  const Halide::Target t = without_amx(lower::host_target());
  ASSERT_FALSE(sched::has_amx_bf16(t));
  test::check_bf16_dx(c, p, Halide::Pipeline(a.out), {a.filter, a.dy}, t, 31);
}

TEST_P(AmxTest, NativeTilesMatchReference) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kCases[GetParam()];
  const Problem p = dx_problem(c, DType::kBFloat16);
  const Halide::Target t = lower::host_target();
  if (const std::string why = tbex::why(sched::dx_registry(), "dx_amx", p, t); !why.empty())
    GTEST_SKIP() << c.name << ": " << why;  // a ragged phase frame: dx_amx_blocked's cases
  lower::Lowered l = lower::lower(p, lower::select(p, {"dx_amx", ""}, 2, t), 2, t);
  ASSERT_EQ(l.schedule, "dx_amx");
  EXPECT_TRUE(l.amx_tiles);
  // Halide 21 matches tile operations in 32-bit index arithmetic only.
  EXPECT_FALSE(l.target.has_feature(Halide::Target::LargeBuffers));
  EXPECT_NE(test::assembly(l.pipeline, l.args, l.target, std::string("amx_") + c.name)
                .find("tdpbf16ps"),
            std::string::npos)
      << c.name;
  test::check_bf16_dx(c, p, l.pipeline, l.args, l.target, 31);
}

TEST_P(AmxTest, PortableBlockedKernelMatchesReference) {
  // dx_amx_blocked's extern stage run on emulated tile registers: its bounds query, block pairs,
  // ragged tiles and offsets on every machine.
  const Case& c = kCases[GetParam()];
  const Problem p = dx_problem(c, DType::kBFloat16);
  ops::DxAlgorithm a = ops::define_backprop_input(p);
  ASSERT_TRUE(a.blocked) << c.name;
  a.use_blocks();
  a.wzk.compute_root();
  Halide::Pipeline pipeline(a.out);
  pipeline.set_jit_externs(
      {{"tbex_amx_dx", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dx_emulated))}});
  test::check_bf16_dx(c, p, pipeline, {a.filter, a.dy}, without_amx(lower::host_target()), 31);
}

TEST_P(AmxTest, NativeBlockedKernelMatchesReference) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kCases[GetParam()];
  const Problem p = dx_problem(c, DType::kBFloat16);
  const Halide::Target t = lower::host_target();
  lower::Lowered l = lower::lower(p, lower::select(p, {"dx_amx_blocked", ""}, 2, t), 2, t);
  ASSERT_EQ(l.schedule, "dx_amx_blocked");
  EXPECT_TRUE(l.amx_tiles);
  l.pipeline.set_jit_externs(codegen::jit_externs());
  test::check_bf16_dx(c, p, l.pipeline, l.args, l.target, 31);
}

INSTANTIATE_TEST_SUITE_P(Cases, AmxTest, ::testing::Range(0, (int)std::size(kCases)),
                         [](const ::testing::TestParamInfo<int>& i) { return kCases[i.param].name; });

// dx_amx_cols (tap columns, at most 8 input channels): strides, dilations, pads, rows of dy
// positions in tiles of various rows.
const Case kColsCases[] = {
    // The stem's shape, small: 3 channels (4 columns a tap) x Kw 7 over two column tiles,
    // stride 2 along h and w, dy rows of 11 positions (one tile of 11).
    {"stem", 2, 3, 32, 1, {4, 9, 21}, {2, 3, 7}, {1, 2, 2}, {1, 1, 1}, {1, 0, 3, 3, 3, 3}},
    // 5 channels (8 columns a tap), Kw 3 dilated: 24 columns; dy rows of 17 positions: two
    // tiles of 9, the second starting at position 8 (overlapping the first).
    {"dilated_w", 1, 5, 16, 1, {3, 6, 19}, {1, 2, 3}, {1, 1, 1}, {1, 1, 2}, {0, 0, 0, 1, 2, 2}},
    // One channel (1 column a tap), Kw 5: one column tile; stride 3 along d and w, dilation 2
    // along h; dy rows of 33 positions: three tiles of 11 (a pair and a single one).
    {"one_channel", 1, 1, 34, 1, {7, 5, 99}, {2, 2, 5}, {3, 1, 3}, {1, 2, 1}, {1, 1, 1, 0, 2, 2}},
    // 2 channels, cout_g 48 (16 channels per tile multiply), stride 2 along d: depth taps whose
    // phase skips a depth, rows of 16 dy positions (one whole tile).
    {"two_channels", 2, 2, 40, 1, {5, 4, 16}, {3, 2, 2}, {2, 1, 1}, {1, 1, 1}, {1, 1, 0, 1, 0, 1}},
    // Pads beyond the kernel: output rows and depths no tap reaches (their sums 0).
    {"wide_pads", 1, 4, 16, 1, {3, 4, 6}, {1, 2, 3}, {1, 1, 1}, {1, 1, 1}, {2, 2, 3, 2, 1, 1}},
    // Two groups (mag_factor 2: one real group of 4 lanes), weights 0 across them.
    {"grouped", 1, 4, 32, 2, {3, 5, 12}, {2, 3, 3}, {1, 1, 2}, {1, 1, 1}, {1, 0, 1, 1, 1, 1}},
};

class AmxColsTest : public ::testing::TestWithParam<int> {};

TEST_P(AmxColsTest, PortableKernelMatchesReference) {
  // dx_amx_cols's extern stage on emulated tile registers: its bounds query, columns, staged
  // planes, tiles and the sums of a position's taps on every machine.
  const Case& c = kColsCases[GetParam()];
  const Problem p = dx_problem(c, DType::kBFloat16);
  ops::DxAlgorithm a = ops::define_backprop_input(p);
  ASSERT_TRUE(a.cols) << c.name;
  a.use_cols();
  a.wzc.compute_root();
  Halide::Pipeline pipeline(a.out);
  pipeline.set_jit_externs(
      {{"tbex_amx_dx_cols", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dx_cols_emulated))}});
  test::check_bf16_dx(c, p, pipeline, {a.filter, a.dy}, without_amx(lower::host_target()), 37);
}

TEST_P(AmxColsTest, NativeKernelMatchesReference) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kColsCases[GetParam()];
  const Problem p = dx_problem(c, DType::kBFloat16);
  const Halide::Target t = lower::host_target();
  for (int threads : {1, 2}) {
    lower::Lowered l = lower::lower(p, lower::select(p, {"dx_amx_cols", ""}, threads, t), threads, t);
    ASSERT_EQ(l.schedule, "dx_amx_cols");
    EXPECT_TRUE(l.amx_tiles);
    l.pipeline.set_jit_externs(codegen::jit_externs());
    test::check_bf16_dx(c, p, l.pipeline, l.args, l.target, 37);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AmxColsTest, ::testing::Range(0, (int)std::size(kColsCases)),
                         [](const ::testing::TestParamInfo<int>& i) { return kColsCases[i.param].name; });

// dW: a row of odd length (padded to even positions), strides, groups, dilations.
const Case kDwCases[] = {
    {"odd_row", 1, 32, 32, 1, {4, 5, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"strided", 2, 16, 32, 1, {5, 9, 13}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1, 1, 0, 1}},
    {"grouped_mag4", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 0, 1}},
    {"dilated", 1, 16, 16, 1, {5, 7, 20}, {3, 2, 3}, {1, 1, 1}, {2, 1, 2}, {2, 2, 1, 0, 2, 2}},
    // 3 input channels (the stem's), Kw 7 strided: the tile rows are (kw, lane) pairs, 21 real
    // over two tiles of 16 (ops acctk).
    {"few_lanes", 2, 3, 32, 1, {4, 9, 21}, {2, 3, 7}, {1, 2, 2}, {1, 1, 1}, {1, 0, 1, 1, 3, 3}},
    // 5 channels, Kw 3 dilated: 15 tap rows in one tile.
    {"few_lanes_dilated", 1, 5, 16, 1, {3, 6, 17}, {1, 2, 3}, {1, 1, 1}, {1, 1, 2}, {0, 0, 0, 1, 2, 2}},
    // Two real groups of two input blocks and two output blocks each (dw_amx_blocked: its pairs
    // never span two groups).
    {"group_blocks", 2, 64, 64, 2, {3, 4, 10}, {2, 2, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}},
    // 240 output rows of 6 positions: dw_amx_blocked's sums carried over two chunks of rows;
    // three output blocks (a pair and a single one).
    {"many_rows", 2, 32, 48, 1, {10, 12, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    // Four output and input blocks, strided and padded along w: with threads, dw_amx_blocked's
    // calls take pairs of output blocks (each stages x again), then kd, then half the input
    // blocks (a split dim); two phases along w.
    {"block_pairs", 2, 64, 64, 1, {3, 7, 11}, {2, 3, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 0}},
};

class AmxDwTest : public ::testing::TestWithParam<int> {};

TEST_P(AmxDwTest, PortableTileFormMatchesReference) {
  const Case& c = kDwCases[GetParam()];
  const Problem p = dw_problem(c, DType::kBFloat16);
  ops::DwAlgorithm a = ops::define_backprop_filter(p);
  a.use_tiles();
  test::check_bf16_dw(c, p, Halide::Pipeline(a.out), {a.x, a.dy}, without_amx(lower::host_target()), 41);
}

TEST_P(AmxDwTest, PortableTapRowsMatchReference) {
  // The (kw, lane) row form on every case with one block of input lanes (the schedule uses it
  // for blocks of <= 8 lanes; the algorithm holds for any lane count).
  const Case& c = kDwCases[GetParam()];
  const Problem p = dw_problem(c, DType::kBFloat16);
  if (p.group.cin1_g != 1) GTEST_SKIP() << "tap rows cover one block of input lanes";
  ops::DwAlgorithm a = ops::define_backprop_filter(p);
  a.use_tap_rows();
  test::check_bf16_dw(c, p, Halide::Pipeline(a.out), {a.x, a.dy}, without_amx(lower::host_target()), 41);
}

TEST_P(AmxDwTest, NativeTilesMatchReference) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kDwCases[GetParam()];
  const Problem p = dw_problem(c, DType::kBFloat16);
  const Halide::Target t = lower::host_target();
  lower::Lowered l = lower::lower(p, lower::select(p, {"dw_amx", ""}, 2, t), 2, t);
  ASSERT_EQ(l.schedule, "dw_amx");
  EXPECT_TRUE(l.amx_tiles);
  EXPECT_FALSE(l.target.has_feature(Halide::Target::LargeBuffers));
  EXPECT_NE(test::assembly(l.pipeline, l.args, l.target, std::string("amx_dw_") + c.name).find("tdpbf16ps"),
            std::string::npos)
      << c.name;
  test::check_bf16_dw(c, p, l.pipeline, l.args, l.target, 41);
}

TEST_P(AmxDwTest, PortableBlockedKernelMatchesReference) {
  // dw_amx_blocked's extern stage run on emulated tile registers: its bounds query, pairs of
  // entries and output blocks, chunks and offsets on every machine.
  const Case& c = kDwCases[GetParam()];
  const Problem p = dw_problem(c, DType::kBFloat16);
  if (p.group.cout_g % 16 != 0) GTEST_SKIP() << c.name << ": output channels not in whole tiles";
  ops::DwAlgorithm a = ops::define_backprop_filter(p);
  a.use_blocks();
  a.ext.bound(a.c0, 0, 16).compute_root();  // (an extern computed inline is called per point)
  Halide::Pipeline pipeline(a.out);
  pipeline.set_jit_externs(
      {{"tbex_amx_dw", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dw_emulated))}});
  test::check_bf16_dw(c, p, pipeline, {a.x, a.dy}, without_amx(lower::host_target()), 41);
}

TEST_P(AmxDwTest, PortableBlockedKernelPartsMatchReference) {
  // The reduction cut into parts (each summed by its own extern call, then added in order): the
  // splits dw_amx_blocked's variants make (over batch, or depth when the batch is smaller), and
  // more parts than batches (the last part sums nothing), on emulated tile registers.
  const Case& c = kDwCases[GetParam()];
  const Problem p = dw_problem(c, DType::kBFloat16);
  if (p.group.cout_g % 16 != 0) GTEST_SKIP() << c.name << ": output channels not in whole tiles";
  std::vector<ops::ReductionParts> cuts;
  for (int want : {2, 3})
    if (sched::dw_parts(p, want) > 1) cuts.push_back(sched::dw_reduction_parts(p, want));
  cuts.push_back({(int)p.geo.n + 1, true, 1});
  for (const ops::ReductionParts& parts : cuts) {
    SCOPED_TRACE(std::string(c.name) + ": " + std::to_string(parts.count) + " parts of " +
                 std::to_string(parts.per) + (parts.by_batch ? " batches" : " depths"));
    ops::DwAlgorithm a = ops::define_backprop_filter(p);
    a.use_blocks(parts);
    a.ext.bound(a.c0, 0, 16).compute_root();
    Halide::Pipeline pipeline(a.out);
    pipeline.set_jit_externs(
        {{"tbex_amx_dw", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dw_emulated))}});
    test::check_bf16_dw(c, p, pipeline, {a.x, a.dy}, without_amx(lower::host_target()), 41);
  }
}

TEST_P(AmxDwTest, NativeBlockedKernelMatchesReference) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kDwCases[GetParam()];
  const Problem p = dw_problem(c, DType::kBFloat16);
  if (p.group.cout_g % 16 != 0) GTEST_SKIP() << c.name << ": output channels not in whole tiles";
  const Halide::Target t = lower::host_target();
  // Every variant (the reduction's parts) at one call, and at calls cut along parts and blocks.
  for (const std::string& variant : lower::candidates(p, "dw_amx_blocked", 2, t))
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(c.name) + " [" + variant + "] " + std::to_string(threads) + " threads");
      lower::Lowered l =
          lower::lower(p, lower::select(p, {"dw_amx_blocked", variant}, threads, t), threads, t);
      ASSERT_EQ(l.schedule, "dw_amx_blocked");
      EXPECT_TRUE(l.amx_tiles);
      l.pipeline.set_jit_externs(codegen::jit_externs());
      test::check_bf16_dw(c, p, l.pipeline, l.args, l.target, 41);
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, AmxDwTest, ::testing::Range(0, (int)std::size(kDwCases)),
                         [](const ::testing::TestParamInfo<int>& i) { return kDwCases[i.param].name; });

TEST(Amx, WhyNotNamesTheDtypeTheStrideAndTheTarget) {
  const auto why = [](const Problem& p, const Halide::Target& t) {
    return tbex::why(sched::dx_registry(), "dx_amx", p, t);
  };
  const Halide::Target host = lower::host_target();
  for (DType dt : {DType::kFloat32, DType::kFloat16})
    EXPECT_NE(why(dx_problem(kCases[0], dt), host).find("bf16 inputs only"), std::string::npos);
  const Case strided{"strided", 1, 16, 16, 1, {5, 6, 7}, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}};
  EXPECT_NE(why(dx_problem(strided, DType::kBFloat16), host).find("stride"), std::string::npos);
  const std::string no_target = why(dx_problem(kCases[0], DType::kBFloat16), without_amx(host));
  EXPECT_NE(no_target.find("avx512_sapphirerapids"), std::string::npos) << no_target;
  // Code for another machine with AMX is not asked about this process's grant.
  const Halide::Target spr("x86-64-windows-avx-avx2-avx512-avx512_skylake-avx512_cannonlake-"
                           "avx512_sapphirerapids-f16c-fma-sse41");
  EXPECT_EQ(why(dx_problem(kCases[0], DType::kBFloat16), spr), "");
}

TEST(Amx, BlockedWhyNotNamesTheDtypeAndTheTarget) {
  const auto why = [](const Problem& p, const Halide::Target& t) {
    return tbex::why(sched::dx_registry(), "dx_amx_blocked", p, t);
  };
  const Halide::Target host = lower::host_target();
  for (DType dt : {DType::kFloat32, DType::kFloat16})
    EXPECT_NE(why(dx_problem(kCases[0], dt), host).find("bf16 inputs only"), std::string::npos);
  // Strided: the kernel walks each phase's own taps. Asked of an AMX target (the host's own
  // where it has AMX): the answer is about the problem, whatever machine runs the test.
  const Halide::Target amx = host.with_feature(Halide::Target::AVX512_SapphireRapids);
  EXPECT_EQ(why(dx_problem(kCases[7], DType::kBFloat16), amx), "");
  EXPECT_NE(why(dx_problem(kCases[0], DType::kBFloat16), without_amx(host)).find("avx512_sapphirerapids"),
            std::string::npos);
}

TEST(Amx, ColsWhyNotNamesTheDtypeTheChannelsTheColumnsAndTheBufferSize) {
  const auto why = [](const Problem& p) {
    return tbex::why(sched::dx_registry(), "dx_amx_cols", p, lower::host_target());
  };
  const Case& stem = kColsCases[0];
  EXPECT_NE(why(dx_problem(stem, DType::kFloat32)).find("bf16 inputs only"), std::string::npos);
  // 16 input channels fill dx_amx's columns.
  EXPECT_NE(why(dx_problem(kCases[0], DType::kBFloat16)).find("valid input channels"), std::string::npos);
  // 5 channels (8 columns a tap) x Kw 7: 56 columns.
  Case wide = stem;
  wide.cin = 5;
  EXPECT_NE(why(dx_problem(wide, DType::kBFloat16)).find("more than two tiles"), std::string::npos);
  // Halide's stages around the kernel index with 32 bits: an output of 2 GiB or more.
  Case huge = stem;
  huge.n = 1024, huge.in = {64, 256, 256};
  EXPECT_NE(why(dx_problem(huge, DType::kBFloat16)).find("32-bit offsets"), std::string::npos);
}

TEST(Amx, BlockedKernelWritesFloat16AndBiasThroughOut) {
  // fp16 result with a bias: the extern's fp32 sums go through out (bias, one rounding), so the
  // result is dx_tiled's (fp32 sums of exact products: any order gives the same sums here).
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kCases[1];
  const ConvGeometry g = test::geometry(c);
  ParaDict para = test::para_for(c, true);
  para.res_dtype = "float16";
  const Problem p = make_backprop_input_problem(
      shape_fz3d(test::w_dims(g), c.groups), DType::kBFloat16, shape_6hd(test::y_dims(g)),
      DType::kBFloat16, {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
      {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para, {c.cin}, DType::kFloat32);
  ASSERT_EQ(p.res_dtype, DType::kFloat16);
  const test::Bf16Operands o = test::bf16_dx_operands(c, 17);
  std::vector<float> bias(c.cin);
  for (int64_t i = 0; i < c.cin; ++i) bias[i] = float(i % 7) / 8 - 0.25f;
  std::vector<std::vector<uint16_t>> outs;
  for (const char* s : {"dx_amx_blocked", "dx_tiled"}) {
    auto k = compile(p, CompileOptions{s});
    ASSERT_EQ(k->schedule_name(), s);
    outs.emplace_back(test::count(p.dx_shape()), 0x7e00);
    k->run_dense({o.first.data(), o.dy.data(), bias.data()}, outs.back().data());
  }
  EXPECT_EQ(outs[0], outs[1]);
}

TEST(Amx, DwWhyNotNamesTheDtypeAndTheTarget) {
  const auto why = [](const Problem& p, const Halide::Target& t) {
    return tbex::why(sched::dw_registry(), "dw_amx", p, t);
  };
  const Halide::Target host = lower::host_target();
  for (DType dt : {DType::kFloat32, DType::kFloat16})
    EXPECT_NE(why(dw_problem(kDwCases[0], dt), host).find("bf16 inputs only"), std::string::npos);
  // Strides along w are stride phases of the transposed x: they apply.
  EXPECT_TRUE(why(dw_problem(kDwCases[1], DType::kBFloat16), without_amx(host)).find("avx512_sapphirerapids") !=
              std::string::npos);
  const Halide::Target spr("x86-64-windows-avx-avx2-avx512-avx512_skylake-avx512_cannonlake-"
                           "avx512_sapphirerapids-f16c-fma-sse41");
  EXPECT_EQ(why(dw_problem(kDwCases[1], DType::kBFloat16), spr), "");
}

TEST(Amx, AutoPicksTilesOnlyWhereTheTargetHasThem) {
  // A layer whose tiles are full (64 channels, W = 32): the tile multiplies beat VDPBF16PS.
  const Case c{"layer", 1, 64, 64, 1, {8, 8, 32}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}};
  const Halide::Target host = lower::host_target();
  for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const Problem p = dx_problem(c, dt);
    const std::string pick = lower::select(p, {"auto", ""}, 1, host).schedule;
    EXPECT_EQ(pick == "dx_amx" || pick == "dx_amx_blocked",
              dt == DType::kBFloat16 && sched::has_amx_bf16(host))
        << dtype_name(dt) << ": " << pick;
    const std::string elsewhere = lower::select(p, {"auto", ""}, 1, without_amx(host)).schedule;
    EXPECT_TRUE(elsewhere != "dx_amx" && elsewhere != "dx_amx_blocked") << elsewhere;
    const Problem q = dw_problem(c, dt);
    const std::string dw_pick = lower::select(q, {"auto", ""}, 1, host).schedule;
    EXPECT_EQ(dw_pick == "dw_amx" || dw_pick == "dw_amx_blocked",
              dt == DType::kBFloat16 && sched::has_amx_bf16(host))
        << dtype_name(dt) << ": " << dw_pick;
    const std::string dw_elsewhere = lower::select(q, {"auto", ""}, 1, without_amx(host)).schedule;
    EXPECT_TRUE(dw_elsewhere != "dw_amx" && dw_elsewhere != "dw_amx_blocked") << dw_elsewhere;
  }
}

TEST(Amx, TapsSplitPerDepthAndHeightOnlyWhereVisitsStayLong) {
  // The split form where a (kd, kh) visit runs >= 6 tile multiplies, unstrided; else one visit
  // walks every tap (the drain of a short visit costs more than the split saves).
  const sched::Context ctx{lower::host_target(), 2, ""};
  auto split = [&](const char* name) {
    for (const Case& c : kCases)
      if (std::string(c.name) == name)
        return sched::dx_amx_schedule()->describe(dx_problem(c, DType::kBFloat16), ctx).find(
                   "taps split per (kd, kh)") != std::string::npos;
    ADD_FAILURE() << name;
    return false;
  };
  EXPECT_TRUE(split("split_taps"));
  EXPECT_TRUE(split("ragged_row"));     // 64 channels: 2 steps x Kw 3
  EXPECT_FALSE(split("short_row"));     // 16 channels: 1 step x Kw 3
  EXPECT_FALSE(split("pointwise"));     // one tap
  EXPECT_FALSE(split("strided_phases"));  // the scatter form
}

TEST(Amx, DwFoldsTapsIntoRowsOnlyForFewLanes) {
  const sched::Context ctx{lower::host_target(), 2, ""};
  for (const Case& c : kDwCases) {
    const std::string d = sched::dw_amx_schedule()->describe(dw_problem(c, DType::kBFloat16), ctx);
    const bool few = std::string(c.name).rfind("few_lanes", 0) == 0;
    EXPECT_EQ(d.find("rows (kw, lane)") != std::string::npos, few) << c.name << ": " << d;
  }
}

TEST(Amx, DwStagesXOnceWhereChunksWouldRestageIt) {
  // Taps along depth restage a chunk's x for every kd: staged once there, per chunk elsewhere
  // (the native cases above run both forms).
  const sched::Context ctx{lower::host_target(), 2, ""};
  auto once = [&](const Case& c) {
    const std::string d = sched::dw_amx_schedule()->describe(dw_problem(c, DType::kBFloat16), ctx);
    EXPECT_NE(d.find("x staged transposed"), std::string::npos) << d;
    return d.find("transposed once") != std::string::npos;
  };
  EXPECT_TRUE(once(kDwCases[0]));   // odd_row: kd 3
  EXPECT_FALSE(once(kDwCases[2]));  // grouped_mag4: kd 1
}

/** Schedule `s`'s output for p (out_elems values) at 1 and at 2 threads, byte for byte. */
void expect_same_at_one_and_two_threads(const Problem& p, const test::Bf16Operands& o, const char* s,
                                        int64_t out_elems, const std::string& what) {
  const int before = num_threads();
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto k = compile(p, CompileOptions{s});
    outs.emplace_back(out_elems, -7.0f);
    k->run_dense({o.first.data(), o.dy.data()}, outs.back().data());
  }
  set_num_threads(before);
  EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4)) << what << " " << s;
}

TEST(Amx, ResultIsTheSameAtAnyThreadCount) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  const Case& c = kCases[1];
  const Problem p = dx_problem(c, DType::kBFloat16);
  const test::Bf16Operands o = test::bf16_dx_operands(c, 31);
  for (const char* s : {"dx_amx", "dx_amx_blocked"})
    expect_same_at_one_and_two_threads(p, o, s, test::count(p.dx_shape()), c.name);
}

TEST(Amx, DwResultIsTheSameAtAnyThreadCount) {
  if (const std::string why = no_amx(); !why.empty()) GTEST_SKIP() << why;
  // strided: calls along kd; block_pairs: along pairs of output blocks, then kd.
  for (const Case* c : {&kDwCases[1], &kDwCases[8]}) {
    const Problem p = dw_problem(*c, DType::kBFloat16);
    const test::Bf16Operands o = test::bf16_dw_operands(*c, 51);
    for (const char* s : {"dw_amx", "dw_amx_blocked"})
      expect_same_at_one_and_two_threads(p, o, s, test::count(p.dw_shape()), c->name);
  }
}

TEST(Amx, DwBlockedWhyNotNamesTheDtypeTheRowAndTheTarget) {
  const auto why = [](const Problem& p, const Halide::Target& t) {
    return tbex::why(sched::dw_registry(), "dw_amx_blocked", p, t);
  };
  const Halide::Target host = lower::host_target();
  for (DType dt : {DType::kFloat32, DType::kFloat16})
    EXPECT_NE(why(dw_problem(kDwCases[0], dt), host).find("bf16 inputs only"), std::string::npos);
  // Rows of 4 output positions: a tile multiply would take 4.
  const Case w4{"w4", 1, 16, 32, 1, {3, 4, 6}, {1, 2, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 1, 0, 0}};
  EXPECT_NE(why(dw_problem(w4, DType::kBFloat16), host).find("rows of 4 output positions"),
            std::string::npos);
  EXPECT_NE(why(dw_problem(kDwCases[0], DType::kBFloat16), without_amx(host)).find("avx512_sapphirerapids"),
            std::string::npos);
}

TEST(Amx, DwBlockedCallsSplitTheBlocksOverTheThreads) {
  // One call on one thread; with threads, calls along the reduction's parts and the real groups
  // until there are about 4 a thread, then along pairs of output blocks, kd and the input blocks
  // (each restaging an operand) only until there are 2 a thread (results do not depend on the
  // cut, only on the parts).
  const Halide::Target t = lower::host_target();
  auto describe = [&](const Case& c, int threads, const std::string& variant = "") {
    return sched::find_schedule(sched::dw_registry(), "dw_amx_blocked")
        ->describe(dw_problem(c, DType::kBFloat16), sched::Context{t, threads, variant});
  };
  // group_blocks: N 2, output depth 3 (so 3 parts of one slice each), 2 real groups, Kd 2, 2
  // input blocks.
  const Case& groups = kDwCases[6];
  EXPECT_NE(describe(groups, 1).find("one call"), std::string::npos) << describe(groups, 1);
  EXPECT_NE(describe(groups, 1).find("[parts=3] "), std::string::npos) << describe(groups, 1);
  EXPECT_NE(describe(groups, 2).find("6 calls (part 3 x g 2)"), std::string::npos) << describe(groups, 2);
  // Unsplit: the groups' 2 calls, then kd's (dy restaged) until each thread has 2.
  EXPECT_NE(describe(groups, 2, "parts=1").find("4 calls (g 2 x kd 2)"), std::string::npos)
      << describe(groups, 2, "parts=1");
  // many_rows: N 2, output depth 10 (4 parts of 3 slices, the last 1), Kd 3, 2 input blocks:
  // the parts alone give each of 2 threads 2 calls.
  const Case& rows = kDwCases[7];
  EXPECT_NE(describe(rows, 2).find("reduction split in 4 parts (depth)"), std::string::npos) << describe(rows, 2);
  EXPECT_NE(describe(rows, 2).find("4 calls (part 4)"), std::string::npos) << describe(rows, 2);
  const Case& pairs = kDwCases[8];  // block_pairs: 4 output blocks, Kd 2, 4 input blocks
  EXPECT_NE(describe(pairs, 2, "parts=1").find("4 calls (n 2 x kd 2)"), std::string::npos)
      << describe(pairs, 2, "parts=1");
}

}  // namespace
}  // namespace tbex
