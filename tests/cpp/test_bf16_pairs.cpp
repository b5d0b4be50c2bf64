// dW and dX of bf16 inputs as dot products of bf16 pairs (dw_tiled / dx_tiled pair=2): dX pairs
// output channels, dW output rows. Each is compiled for the host (with
// VDPBF16PS in its inner loop where the host has AVX512_BF16, skipped with the reason elsewhere)
// and for the same host without the feature (Halide's portable lowering of the same algorithm),
// both against the float64 reference. Inputs are multiples of 1/8: every product and partial sum
// is exact in fp32, so any summation order gives the reference to the last bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "Halide.h"
#include "lower/pipeline.h"
#include "lowered_check.h"
#include "schedules/cost_model.h"
#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "tbex/aot.h"
#include "tbex/knobs.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::Case;

const Case kCases[] = {
    {"plain", 2, 16, 16, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"strided", 2, 16, 32, 1, {7, 9, 11}, {3, 3, 3}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1, 1, 0, 2}},
    {"strided_exact", 1, 16, 32, 1, {4, 6, 12}, {3, 3, 3}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1, 1, 0, 2}},
    {"grouped_mag4", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 0, 1}},
    {"odd_channels", 1, 20, 37, 1, {4, 5, 9}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 0, 2, 1}},
};

using sched::without_bf16_dot;

/** Why `t` cannot run the native tests ("" when it can). */
std::string no_bf16_dot(const Halide::Target& t) {
  if (sched::has_bf16_dot(t)) return "";
  return "the host has no AVX512_BF16 (Halide target " + t.to_string() +
         " lacks avx512_zen4 / avx512_sapphirerapids): the portable test covers the algorithm";
}

/** The targets a pair test compiles for, each with whether it has bf16 dot products: the host
 * without the feature (the portable lowering), and the host itself where it has it. */
std::vector<std::pair<Halide::Target, bool>> pair_targets() {
  const Halide::Target native = lower::host_target();
  std::vector<std::pair<Halide::Target, bool>> targets{{without_bf16_dot(native), false}};
  if (no_bf16_dot(native).empty()) targets.push_back({native, true});
  return targets;
}

/** The assembly has a VDPBF16PS whose last operand is an embedded 32-bit broadcast. */
bool has_folded_dot(const std::string& s) {
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);)
    if (line.find("vdpbf16ps") != std::string::npos && line.find("{1to16}") != std::string::npos)
      return true;
  return false;
}

/** Runs dx_tiled with `variant` compiled for `t` and checks it against the reference. */
void check(const Case& c, const Halide::Target& t, const std::string& variant, bool want_dot,
           bool one_block = true) {
  const Problem p = test::dx_problem(c, DType::kBFloat16);  // res_dtype float32
  lower::Lowered l = lower::lower(p, lower::select(p, {"dx_tiled", variant}, 2, t), 2, t);
  ASSERT_EQ(l.variant, variant);
  const std::string s = test::assembly(l.pipeline, l.args, t, std::string("bf16_pairs_") + c.name);
  EXPECT_EQ(s.find("vdpbf16ps") != std::string::npos, want_dot) << c.name << " " << t.to_string();
  // One block per tile: each dy pair feeds one dot, read as its embedded broadcast
  // (lower/dot_operands.h), not loaded by a VBROADCASTSS of its own.
  if (want_dot && one_block) EXPECT_TRUE(has_folded_dot(s)) << c.name;
  test::check_bf16_dx(c, p, l.pipeline, l.args, t, 11);
}

class Bf16PairsTest : public ::testing::TestWithParam<int> {};

// Halide 21's Zen 5 host target carries both Zen features: the portable form drops both.
TEST(Bf16Pairs, WithoutDotDropsEveryBf16Feature) {
  const Halide::Target zen5("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41-avx512_zen4-avx512_zen5");
  ASSERT_TRUE(sched::has_bf16_dot(zen5));
  const Halide::Target t = without_bf16_dot(zen5);
  EXPECT_FALSE(sched::has_bf16_dot(t)) << t.to_string();
  const Halide::Target spr("x86-64-linux-avx512_sapphirerapids");
  EXPECT_FALSE(sched::has_bf16_dot(without_bf16_dot(spr)));
  EXPECT_TRUE(t.has_feature(Halide::Target::AVX512)) << t.to_string();
}

TEST_P(Bf16PairsTest, PortableLoweringMatchesReference) {
  const Halide::Target t = without_bf16_dot(lower::host_target());
  ASSERT_FALSE(sched::has_bf16_dot(t));
  check(kCases[GetParam()], t, "qt=4,ct=1,pair=2", false);
}

TEST_P(Bf16PairsTest, NativeDotProductsMatchReference) {
  const Halide::Target t = lower::host_target();
  if (const std::string why = no_bf16_dot(t); !why.empty()) GTEST_SKIP() << why;
  check(kCases[GetParam()], t, "qt=4,ct=1,pair=2", true);
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16PairsTest, ::testing::Range(0, (int)std::size(kCases)),
                         [](const ::testing::TestParamInfo<int>& i) { return kCases[i.param].name; });

// Pointwise dX (1x1x1, unit strides, no pads: ops::dysp_is_dy) broadcasts its dy pairs from dy in
// place, the pair loops walking (pair in block, block): two 6HD blocks of output channels, two
// groups of one block each, and 24 channels (a block and a half: staged, as everywhere else).
// Of one tap, the tiles unroll the walk over a block's pairs (dx_tiled's unrolls_pair_walk).
TEST(Bf16Pairs, PointwiseDxReadsDyPairsInPlace) {
  const Case cases[] = {
      {"pointwise_two_blocks", 2, 32, 32, 1, {3, 5, 7}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
      {"pointwise_grouped", 1, 32, 32, 2, {2, 4, 9}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
      {"pointwise_block_and_half", 1, 16, 24, 1, {2, 3, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
  };
  const auto targets = pair_targets();
  for (const Case& c : cases) {
    const Problem p = test::dx_problem(c, DType::kBFloat16);
    const bool in_place = p.group.cout_g % 16 == 0;
    EXPECT_EQ(ops::dysp_is_dy(p), in_place) << c.name;
    for (const std::string& v : {std::string("qt=4,ct=1,pair=2"), std::string("qt=3,ct=2,pair=2")}) {
      if (v.find("ct=2") != std::string::npos && p.group.cin1_g % 2 != 0) continue;
      for (const auto& [t, dot] : targets) {
        const lower::Lowered l = lower::lower(p, lower::select(p, {"dx_tiled", v}, 2, t), 2, t);
        EXPECT_EQ(l.schedule_detail.find("dy read in place") != std::string::npos, in_place)
            << c.name << " " << l.schedule_detail;
        check(c, t, v, dot, v.find("ct=1") != std::string::npos);
      }
    }
  }
}

// Padded dX at unit strides reads its dy pairs from dy in place too (ops::dysp_reads_dy): the
// reduction leaves out the depth and height taps into pads, and the row's tiles are partitioned
// on the width's (edge tiles apart; rows of 2 tiles or fewer unrolled instead), the taps along
// the row unrolled. Rows of one to six tiles, a pad wider than a tile (a prologue of two
// tiles), one-sided pads, dilations, two groups, and 24 output channels (a block and a half:
// staged, as everywhere else).
TEST(Bf16Pairs, PaddedDxReadsDyPairsInPlace) {
  const Case cases[] = {
      {"padded_five_tiles", 1, 16, 32, 1, {3, 4, 13}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
      {"padded_one_tile", 1, 16, 16, 1, {3, 3, 3}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
      {"padded_two_tiles", 1, 16, 16, 1, {3, 3, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
      {"padded_dilated", 1, 16, 16, 1, {4, 5, 12}, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2, 2, 2, 2}},
      {"padded_wider_than_tile", 1, 16, 16, 1, {2, 3, 11}, {1, 2, 7}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 0, 3, 3}},
      {"padded_one_side", 2, 16, 16, 1, {3, 4, 9}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0, 2, 2, 0}},
      {"padded_grouped", 1, 32, 32, 2, {3, 4, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
      {"padded_block_and_half", 1, 16, 24, 1, {3, 4, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
  };
  const auto targets = pair_targets();
  for (const Case& c : cases) {
    const Problem p = test::dx_problem(c, DType::kBFloat16);
    const bool in_place = p.group.cout_g % 16 == 0;
    EXPECT_EQ(ops::dysp_reads_dy(p), in_place) << c.name;
    EXPECT_FALSE(ops::dysp_is_dy(p)) << c.name;
    // A tile of 3 positions; of 2 where the pad is wider than that (a prologue of two tiles).
    const int qt = c.k[2] == 7 ? 2 : 3;
    const std::string v = "qt=" + std::to_string(qt) + ",ct=1,pair=2";
    const bool peeled = (c.in[2] + qt - 1) / qt <= 2;
    for (const auto& [t, dot] : targets) {
      const lower::Lowered l = lower::lower(p, lower::select(p, {"dx_tiled", v}, 2, t), 2, t);
      const std::string& d = l.schedule_detail;
      EXPECT_EQ(d.find("dy read in place") != std::string::npos, in_place) << c.name << " " << d;
      EXPECT_EQ(d.find("(edge tiles apart)") != std::string::npos, in_place && !peeled) << c.name << " " << d;
      EXPECT_EQ(d.find("tiles unrolled") != std::string::npos, in_place && peeled) << c.name << " " << d;
      check(c, t, v, dot);
    }
  }
}

// dW pairs output rows (an odd Ho pairs its last row with zeros); x rows are staged per chunk,
// which the pair form does twice: wide channels, and a staging-bound seed-like case.
const Case kDwCases[] = {
    {"wide_odd_rows", 1, 64, 64, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"wide_strided", 2, 48, 64, 1, {5, 7, 6}, {3, 3, 2}, {2, 2, 1}, {1, 1, 1}, {1, 0, 1, 1, 0, 1}},
    {"wide_grouped", 1, 64, 64, 2, {4, 6, 5}, {2, 3, 3}, {1, 1, 1}, {1, 2, 1}, {0, 1, 2, 2, 1, 1}},
    // The seed's shape scaled down: 16 channels, stride 2 (many x bytes per FMA: staging-bound).
    {"seedlike", 4, 16, 16, 1, {4, 12, 12}, {2, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 1, 0, 1}},
};

void check_dw(const Case& c, const Halide::Target& t, const std::string& variant, bool want_dot) {
  const Problem p = test::dw_problem(c, DType::kBFloat16);
  lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", variant}, 2, t), 2, t);
  ASSERT_EQ(l.variant, variant);
  EXPECT_EQ(test::assembly(l.pipeline, l.args, t, std::string("bf16_pairs_dw_") + c.name)
                    .find("vdpbf16ps") != std::string::npos,
            want_dot)
      << c.name << " " << t.to_string();
  test::check_bf16_dw(c, p, l.pipeline, l.args, t, 21);
}

class Bf16DwPairsTest : public ::testing::TestWithParam<int> {};

TEST_P(Bf16DwPairsTest, PortableLoweringMatchesReference) {
  check_dw(kDwCases[GetParam()], without_bf16_dot(lower::host_target()), "nt=4,kwt=1,ch=1,parts=1,pair=2",
           false);
}

TEST_P(Bf16DwPairsTest, NativeDotProductsMatchReference) {
  const Halide::Target t = lower::host_target();
  if (const std::string why = no_bf16_dot(t); !why.empty()) GTEST_SKIP() << why;
  check_dw(kDwCases[GetParam()], t, "nt=4,kwt=1,ch=1,parts=1,pair=2", true);
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16DwPairsTest, ::testing::Range(0, (int)std::size(kDwCases)),
                         [](const ::testing::TestParamInfo<int>& i) { return kDwCases[i.param].name; });

// With the reduction split in parts, pair tiles stage x per input block (one block's rows right
// before its tiles: dw_tiled's x_per_block_applies); in one part, per chunk. Both against the
// reference.
TEST(Bf16Pairs, DwPairsStageXPerBlockWhenSplitInParts) {
  const auto targets = pair_targets();
  for (const Case& c : kDwCases) {
    const Problem p = test::dw_problem(c, DType::kBFloat16);
    for (const std::string& parts : {std::string("1"), std::string("2")}) {
      const std::string v = "nt=4,kwt=1,ch=1,parts=" + parts + ",pair=2";
      for (const auto& [t, dot] : targets) {
        const lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", v}, 2, t), 2, t);
        EXPECT_EQ(l.schedule_detail.find("x staged per input block") != std::string::npos, parts == "2")
            << c.name << " " << l.schedule_detail;
        check_dw(c, t, v, dot);
      }
    }
  }
}

// Kernels one row high stage their x row pairs by output row pair (ops::pairs_staged_by_output_row):
// 1x1x1 with an odd Ho, and rows with a top pad (the first pair's first row in it), strided depth
// and width taps, each in chunks of one row pair and of all of them.
TEST(Bf16Pairs, DwPairsOfOneRowKernelsMatchReference) {
  const Case cases[] = {
      {"pointwise_odd_rows", 2, 32, 32, 1, {3, 5, 6}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
      {"one_row_padded", 1, 32, 16, 1, {3, 5, 9}, {3, 1, 3}, {2, 1, 2}, {1, 1, 1}, {1, 1, 1, 0, 1, 1}},
  };
  for (const Case& c : cases) {
    const Problem p = test::dw_problem(c, DType::kBFloat16);
    ASSERT_TRUE(ops::pairs_staged_by_output_row(p)) << c.name;
    const std::string all = std::to_string((p.geo.out[1] + 1) / 2);
    for (const std::string& ch : {std::string("1"), all}) {
      const std::string v = "nt=4,kwt=1,ch=" + ch + ",parts=1,pair=2";
      check_dw(c, without_bf16_dot(lower::host_target()), v, false);
      if (no_bf16_dot(lower::host_target()).empty()) check_dw(c, lower::host_target(), v, true);
    }
  }
}

// dw_cout_lanes' pair form (few input channels: output channels in the lanes, an x pair of one
// lane broadcast into each dot): a stem-like stride-2 row with pads, an odd Ho (its last row
// paired with zeros) and several real groups.
const Case kDwCoutCases[] = {
    {"stemlike", 2, 3, 32, 1, {3, 11, 12}, {2, 5, 5}, {1, 2, 2}, {1, 1, 1}, {1, 0, 2, 2, 2, 2}},
    {"few_odd_rows", 1, 4, 16, 1, {4, 5, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"few_grouped", 1, 6, 64, 2, {3, 6, 6}, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 1, 1}},
    // One row high (x row pairs staged by output row pair: ops::pairs_staged_by_output_row), top pad.
    {"few_one_row", 1, 3, 16, 1, {3, 5, 8}, {2, 1, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 1}},
};

void check_dw_cout(const Case& c, const Halide::Target& t, const std::string& variant, bool want_dot,
                   bool want_folded = false) {
  const Problem p = test::dw_problem(c, DType::kBFloat16);
  ASSERT_EQ(sched::find_schedule(sched::dw_registry(), "dw_cout_lanes")->why_not(p), "") << c.name;
  lower::Lowered l = lower::lower(p, lower::select(p, {"dw_cout_lanes", variant}, 2, t), 2, t);
  ASSERT_NE(l.variant.find("pair=2"), std::string::npos) << l.variant;
  const std::string s = test::assembly(l.pipeline, l.args, t, std::string("bf16_pairs_dwc_") + c.name);
  EXPECT_EQ(s.find("vdpbf16ps") != std::string::npos, want_dot) << c.name << " " << t.to_string();
  // One vector of channels: each x pair feeds its one dot as an embedded broadcast
  // (lower/dot_operands.h); with more, the broadcast is shared in a register.
  if (want_folded) EXPECT_TRUE(has_folded_dot(s)) << c.name << " " << l.variant;
  test::check_bf16_dw(c, p, l.pipeline, l.args, t, 21);
}

class Bf16DwCoutPairsTest : public ::testing::TestWithParam<int> {};

TEST_P(Bf16DwCoutPairsTest, PortableLoweringMatchesReference) {
  check_dw_cout(kDwCoutCases[GetParam()], without_bf16_dot(lower::host_target()), "pair=2", false);
}

TEST_P(Bf16DwCoutPairsTest, NativeDotProductsMatchReference) {
  const Halide::Target t = lower::host_target();
  if (const std::string why = no_bf16_dot(t); !why.empty()) GTEST_SKIP() << why;
  check_dw_cout(kDwCoutCases[GetParam()], t, "nv=1,kwt=1,pair=2", true, true);
  check_dw_cout(kDwCoutCases[GetParam()], t, "pair=2", true);
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16DwCoutPairsTest, ::testing::Range(0, (int)std::size(kDwCoutCases)),
                         [](const ::testing::TestParamInfo<int>& i) { return kDwCoutCases[i.param].name; });

// Batch pairs (pair=3: dot products over pairs of batch entries, so each x row is staged once):
// an even batch of 2 and of 4, in one part and split in two (by depth, by batch pairs), in
// chunks of one row and of all rows, against the reference. The own form where row pairs would
// stage rows twice (Kh > 1) and dots pay; an odd batch refuses pair=3 naming the variant.
TEST(Bf16Pairs, DwBatchPairsMatchReference) {
  const auto targets = pair_targets();
  for (const Case& c : {kDwCases[1], kDwCases[3]}) {
    const Problem p = test::dw_problem(c, DType::kBFloat16);
    ASSERT_TRUE(sched::dw_batch_pairs_apply(p)) << c.name;
    const std::string rows = std::to_string(p.geo.out[1]);
    for (const std::string& v : {std::string("nt=4,kwt=1,ch=1,parts=1,pair=3"), "nt=4,kwt=1,ch=" + rows + ",parts=2,pair=3"}) {
      for (const auto& [t, dot] : targets) {
        const lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", v}, 2, t), 2, t);
        EXPECT_NE(l.schedule_detail.find("over batch pairs"), std::string::npos) << l.schedule_detail;
        check_dw(c, t, v, dot);
      }
    }
    const Halide::Target t = lower::host_target();
    const lower::Lowered own = lower::lower(p, lower::select(p, {"dw_tiled", ""}, 2, t), 2, t);
    EXPECT_EQ(own.schedule_detail.find("over batch pairs") != std::string::npos, sched::bf16_dots_pay(t))
        << own.schedule_detail;
  }
  const Problem odd = test::dw_problem(kDwCases[0], DType::kBFloat16);
  ASSERT_EQ(odd.geo.n % 2, 1);
  try {
    const Halide::Target t = lower::host_target();
    const lower::Lowered l = lower::lower(odd, lower::select(odd, {"dw_tiled", "pair=3"}, 2, t), 2, t);
    ADD_FAILURE() << "pair=3 accepted for an odd batch: " << l.variant;
  } catch (const UserError& e) {
    EXPECT_EQ(e.param(), "variant");
    EXPECT_NE(std::string(e.what()).find("even batch"), std::string::npos) << e.what();
  }
}

// The estimate charges row pairs' x staging twice and batch pairs' once: for the seed's shape
// (stride 2, 3 row taps) in chunks of one output row (pair), x_rows_of(2) = 5 pair rows against
// x_rows_of(1) = 3 rows per row; the steps are the same.
TEST(Bf16Pairs, DwBatchPairsEstimateStagesXOnce) {
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target zen4("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_zen4");
  Case c = kDwCases[3];
  c.in = {4, 32, 32};
  const Problem p = test::dw_problem(c, DType::kBFloat16);
  const auto* s = sched::dw_tiled_schedule();
  const sched::Estimate rows = s->estimate(p, {zen4, 1, "nt=4,kwt=3,ch=1,parts=1,pair=2"});
  const sched::Estimate batch = s->estimate(p, {zen4, 1, "nt=4,kwt=3,ch=1,parts=1,pair=3"});
  EXPECT_LT(batch.passes, 0.8 * rows.passes) << batch.passes << " " << rows.passes;
  EXPECT_NEAR(batch.compute, rows.compute, 0.1 * rows.compute);
  knobs::unset("TBEX_CALIBRATE");
}

TEST(Bf16Pairs, DwPairsAreOfferedWhereStagingDominatesToo) {
  // The estimate weighs staging x twice against the dot rate; the form is a candidate.
  const Problem p = test::dw_problem(kDwCases[3], DType::kBFloat16);
  const Halide::Target t = lower::host_target();
  const lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", "pair=2"}, 2, t), 2, t);
  EXPECT_NE(l.variant.find("pair=2"), std::string::npos) << l.variant;
  bool offered = false;
  for (const std::string& v : sched::find_schedule(sched::dw_registry(), "dw_tiled")
                                  ->candidates(p, {t, 2, ""}))
    offered = offered || v.find("pair=2") != std::string::npos;
  EXPECT_EQ(offered, sched::bf16_dots_pay(t)) << "candidates offer the other form where dots pay";
}

TEST(Bf16Pairs, AutoPicksPairsOnlyWhereTheyBeatFmas) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const Problem p = test::dw_problem(kDwCases[0], dt);
    for (const Halide::Target& t : {lower::host_target(), without_bf16_dot(lower::host_target())}) {
      const lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", ""}, 2, t), 2, t);
      const bool pairs = l.schedule_detail.find("bf16 pair dot products") != std::string::npos;
      EXPECT_EQ(pairs, dt == DType::kBFloat16 && sched::bf16_dots_pay(t)) << l.schedule_detail;
    }
  }
}

TEST(Bf16Pairs, DxAutoPicksPairsOnlyWhereTheyBeatFmas) {
  const Case& c = kCases[0];
  const ConvGeometry g = test::geometry(c);
  const Dims5 yd = test::y_dims(g), wd = test::w_dims(g);
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    const Problem p = make_backprop_input_problem(shape_fz3d(wd, 1), dt, shape_6hd(yd), dt,
                                                  {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                                  {c.n, c.in[0], c.in[1], c.in[2], c.cin},
                                                  test::para_for(c, true));
    for (const Halide::Target& t : {lower::host_target(), without_bf16_dot(lower::host_target())}) {
      const auto d = lower::select(p, {"dx_tiled", ""}, 2, t);
      const lower::Lowered l = lower::lower(p, d, 2, t);
      const bool pairs = l.schedule_detail.find("bf16 pair dot products") != std::string::npos;
      EXPECT_EQ(pairs, dt == DType::kBFloat16 && sched::bf16_dots_pay(t)) << l.schedule_detail;
    }
  }
}

}  // namespace
}  // namespace tbex

namespace tbex {
namespace {

// C++ source has no bf16 dot products (Halide's C backend has no bf16 type): the AOT decision
// for it takes the fp32 FMA form, and an explicit pair=2 is refused with the parameter named.
TEST(Bf16Pairs, CppSourceUsesFmaFormAndRefusesPairs) {
  const Case& c = kCases[0];
  const ConvGeometry g = test::geometry(c);
  const Dims5 yd = test::y_dims(g), wd = test::w_dims(g);
  const Problem p = make_backprop_input_problem(shape_fz3d(wd, 1), DType::kBFloat16, shape_6hd(yd),
                                                DType::kBFloat16, {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                                {c.n, c.in[0], c.in[1], c.in[2], c.cin},
                                                test::para_for(c, true));
  const auto dir = std::filesystem::temp_directory_path() / ("tbex_bf16_cpp_" + std::to_string(::getpid()));
  AotOptions o;
  o.name = "k";
  o.out_dir = dir.string();
  o.emit = {"cpp"};
  o.schedule = "dx_tiled";
  emit_aot(p, o);
  std::stringstream manifest;
  manifest << std::ifstream(dir / "k.manifest.json").rdbuf();
  EXPECT_NE(manifest.str().find("pair=1"), std::string::npos) << manifest.str();
  o.variant = "qt=4,ct=1,pair=2";
  try {
    emit_aot(p, o);
    ADD_FAILURE() << "pair=2 emitted as C++ source";
  } catch (const UserError& e) {
    EXPECT_EQ(e.param(), "variant");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tbex
