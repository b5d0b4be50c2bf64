// The cost model's estimates of the dX and dW schedules' memory terms and tile rules: weights
// kept in L1 on AVX2, row taps where the accumulators hide the FMA latency, row groups taking turns
// on a slice, chunks paying their copy-out, dy read in place or converted unpadded, dW's threads
// staging only their groups' x, x read in place where staging dominates.
// No timed assertions: the model's predictions are compared with each other, never with a clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "schedules/calibrate.h"
#include "schedules/cost_model.h"
#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "ops/ops.h"
#include "support/files.h"
#include "support/json.h"
#include "tbex/knobs.h"
#include "tbex/tbex.h"
#include "tbex/tune.h"
#include "cost_model_problems.h"

namespace tbex {
namespace {

TEST(CostModel, DxTilesOnAvx2WhereTheWeightsStayInL1) {
  // A grouped dX whose block weights (16 output channels x 27 taps x 64 bytes) stay in L1: one
  // tap at a time is the own choice on AVX2 (the row-taps tile stays a candidate), and a tile
  // covering the row of 28 exactly ranks ahead of the widest one, whose last tile recomputes 2
  // positions, by more than select's tie margin (2%): the weights are charged once per row,
  // not per visit. Where a block's weights stream (kLarge: 128 output channels), tiles keep
  // the row taps by default. The built-in constants: exactly latency x pipes accumulators.
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx2("x86-64-linux-sse41-avx-avx2-f16c-fma");
  const Conv grouped{2, 64, 8, 28, 28, 64, {3, 3, 3}, {1, 1, 1}, 1, 4};
  const auto* s = sched::dx_tiled_schedule();
  const sched::Context ctx{avx2, 1, ""};
  const Problem p = dx_problem(grouped);
  const auto keys = s->candidates(p, ctx);
  const auto first_of = [](const std::vector<std::string>& ks, const std::string& tile) {
    for (const auto& k : ks)
      if (k.rfind(tile, 0) == 0) return k;
    return std::string();
  };
  // (hb=28: no row groups, each block of a real group of 1 reads its own dy.)
  EXPECT_EQ(first_of(keys, "qt=4,ct=1,"), "qt=4,ct=1,kwt=1,kt=27,hb=28");
  EXPECT_NE(std::find(keys.begin(), keys.end(), "qt=4,ct=1,kwt=3,kt=27,hb=28"), keys.end());
  EXPECT_NE(s->describe(p, ctx).find("[qt=6,ct=1,kwt=1,kt=27,hb=28]"), std::string::npos)
      << s->describe(p, ctx);
  const double own = s->estimate(p, ctx).cycles;
  const double exact = s->estimate(p, {avx2, 1, "qt=4,ct=1,kwt=1,kt=27,hb=28"}).cycles;
  EXPECT_LT(exact, 0.98 * own) << exact << " vs " << own;
  const std::string large = first_of(s->candidates(dx_problem(kLarge), ctx), "qt=4,ct=1,");
  EXPECT_EQ(large.rfind("qt=4,ct=1,kwt=3,", 0), 0u) << large;
  knobs::unset("TBEX_CALIBRATE");
}

/** The host's calibration with its 256-bit FMA rate and latency replaced, stored in a directory
 * of its own and made the process's (TBEX_TUNING_DB beside it): how a test prices the host
 * target as another AVX2 core would. */
void calibrate_as(const std::string& name, double fma_per_cycle, double fma_latency) {
  const std::string dir = ::testing::TempDir() + "tbex_cm_" + std::to_string(::getpid()) + "_" + name;
  ASSERT_EQ(support::make_dirs(dir), "");
  static const sched::Calibration measured = sched::load_or_measure(dir + "/measured.json");
  sched::Calibration c = measured;
  c.w256.fma_per_cycle = c.w256.bcast_fma_per_cycle = c.w256.reg_bcast_fma_per_cycle = fma_per_cycle;
  c.w256.fma_latency = fma_latency;
  ASSERT_EQ(support::write_atomic(dir + "/machine.json", json::to_text(sched::to_json(c))), "");
  knobs::set("TBEX_TUNING_DB", dir + "/tuning.json");
  knobs::set("TBEX_CALIBRATE", "1");
}

TEST(CostModel, DxRowTapsWhereTheAccumulatorsHideTheFmaLatency) {
  // e1's grouped dX on AVX2, its block weights in L1. Where the tile's 8 ymm accumulators are
  // exactly the FMAs in flight the latency needs (a Zen 3: latency 4 x 2 pipes), one tap at a
  // time is the own choice at the widest tile (measured faster there); where they hide it with
  // room to spare (Zen 1: latency 5 x 1 pipe), the own tile is the widest holding the row taps
  // (kwt=3 ran 4-7% ahead on every unit-stride dX row), and both stay candidates.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "the host has no AVX2 + FMA: its calibration has no 256-bit rates";
  const Halide::Target avx2("x86-64-linux-sse41-avx-avx2-f16c-fma");
  const Conv grouped{2, 64, 8, 28, 28, 64, {3, 3, 3}, {1, 1, 1}, 1, 4};
  const auto* s = sched::dx_tiled_schedule();
  const Problem p = dx_problem(grouped);
  const sched::Context ctx{avx2, 1, ""};
  const auto has = [&](const std::string& key) {
    const auto keys = s->candidates(p, ctx);
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  calibrate_as("zen3", 2.0, 4.0);
  EXPECT_NE(s->describe(p, ctx).find("[qt=6,ct=1,kwt=1,"), std::string::npos) << s->describe(p, ctx);
  EXPECT_TRUE(has("qt=4,ct=1,kwt=3,kt=27,hb=28"));
  // 6 ymm accumulators (qt=3): 0.75x Zen 3's latency x pipes, one tap at a time.
  EXPECT_NE(s->describe(p, {avx2, 1, "qt=3,ct=1"}).find("[qt=3,ct=1,kwt=1,"), std::string::npos);
  calibrate_as("zen1", 1.0, 5.0);
  EXPECT_NE(s->describe(p, ctx).find("[qt=4,ct=1,kwt=3,"), std::string::npos) << s->describe(p, ctx);
  EXPECT_TRUE(has("qt=4,ct=1,kwt=1,kt=27,hb=28"));
  // 6 ymm on Zen 1: 1.2x its latency x pipe, room enough (f dX's dilated row measured so).
  EXPECT_NE(s->describe(p, {avx2, 1, "qt=3,ct=1"}).find("[qt=3,ct=1,kwt=3,"), std::string::npos)
      << s->describe(p, {avx2, 1, "qt=3,ct=1"});
  // An asked tile keeps its own width; a tile too narrow to hide the latency keeps one tap.
  EXPECT_NE(s->describe(p, {avx2, 1, "qt=6,ct=1"}).find("[qt=6,ct=1,kwt=1,"), std::string::npos);
  EXPECT_NE(s->describe(p, {avx2, 1, "qt=2,ct=1"}).find("[qt=2,ct=1,kwt=1,"), std::string::npos);
  knobs::unset("TBEX_TUNING_DB");
  knobs::unset("TBEX_CALIBRATE");
}

TEST(CostModel, DxRowGroupsWhereBlocksTakeTurnsOnASlice) {
  // b_c3d's dX: a depth slice's dy rows (3 x 58 rows of 56 positions x 128 channels, 5 MB)
  // overflow twice the L2 of any x86 core. With one block per tile, each of the 4 blocks of the
  // real group would read them again from L3: the tile runs in groups of 8 rows (the blocks
  // inside each group), the ungrouped tile stays a candidate, and the model prices the rereads.
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx2("x86-64-linux-sse41-avx-avx2-f16c-fma");
  const auto* s = sched::dx_tiled_schedule();
  const Problem p = dx_problem(kLarge);
  const sched::Context own{avx2, 1, ""}, grouped{avx2, 1, "qt=4,ct=1,kwt=3,kt=3"},
      whole{avx2, 1, "qt=4,ct=1,kwt=3,kt=3,hb=56"};
  EXPECT_NE(s->describe(p, grouped).find(",hb=8] "), std::string::npos) << s->describe(p, grouped);
  EXPECT_NE(s->describe(p, grouped).find("channel blocks inside groups of 8 rows"),
            std::string::npos);
  EXPECT_EQ(s->describe(p, whole).find("groups of"), std::string::npos) << s->describe(p, whole);
  EXPECT_LT(s->estimate(p, grouped).cycles, s->estimate(p, whole).cycles);
  const auto keys = s->candidates(p, own);
  const auto count = [&](const char* part) {
    return std::count_if(keys.begin(), keys.end(), [&](const std::string& k) {
      return k.find(part) != std::string::npos;
    });
  };
  EXPECT_GE(count(",hb=8"), 1);
  EXPECT_GE(count(",hb=56"), 1) << "the ungrouped tile";
  // A tile holding every block of its real group has no second pass: no groups.
  EXPECT_EQ(s->describe(p, {avx2, 1, "qt=1,ct=4,kwt=1,kt=3"}).find("groups of"),
            std::string::npos);
  // Rows per group are positive; strided dX has no row groups.
  EXPECT_THROW(s->describe(p, {avx2, 1, "qt=4,ct=1,hb=0"}), UserError);
  Conv strided = kLarge;
  strided.s[0] = strided.s[1] = strided.s[2] = 2;
  try {
    s->describe(dx_problem(strided), {avx2, 1, "qt=4,ct=1,hb=8"});
    ADD_FAILURE() << "hb accepted on a strided dX";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("hb is only offered for unit-stride"), std::string::npos)
        << e.what();
  }
  knobs::unset("TBEX_CALIBRATE");
}

TEST(CostModel, DxChunksPayTheRowsCopyOut) {
  // A chunked dX reduction sums a row in L1 and copies it out in a burst the tile loop does not
  // overlap; unchunked tiles store from registers between their steps. The chunked variant's
  // passes carry that copy (read for ownership and write-back of all of dX) on top of its
  // staging; the unchunked one's do not. (fp16 dy: both stage it; fp32 chunks read it in place.)
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx512("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512");
  const auto* s = sched::dx_tiled_schedule();
  const Problem p = dx_problem(kLarge, DType::kFloat16);
  const sched::Machine m = sched::Machine::of(avx512);
  const sched::Estimate chunked = s->estimate(p, {avx512, 1, "qt=8,ct=2,kwt=3,kt=3,hb=8"});
  const sched::Estimate whole = s->estimate(p, {avx512, 1, "qt=8,ct=2,kwt=3,kt=27,hb=8"});
  const double dx_bytes = 4.0 * kLarge.n * kLarge.d * kLarge.h * kLarge.w * kLarge.cin;
  const double bw = dx_bytes <= double(m.l3) ? m.l3_bw : m.dram_bw;
  EXPECT_GE(chunked.passes - whole.passes, 2 * dx_bytes / bw);
  knobs::unset("TBEX_CALIBRATE");
}

/** dX of depth 3 with 2 taps of dilation 3 and depth pads 0 and 1 (W 24, H 8, 16 -> 32
 * channels): slice 1 reads dy through neither tap, so the depth's pad taps stay in the reduction
 * (ops::skips_outside). */
Problem depth_pad_kept_dx(DType dtype) {
  ParaDict para;
  para.strides = {1, 1, 1, 1, 1};
  para.pads = {0, 1, 1, 1, 1, 1};
  para.dilations = {1, 3, 1, 1, 1};  // N, D, H, W, C
  para.groups = 1;
  return make_backprop_input_problem(shape_fz3d({32, 16, 2, 3, 3}, 1), dtype,
                                     {1, 1, 2, 8, 24, 16}, dtype, {32, 16, 2, 3, 3},
                                     {1, 3, 8, 24, 16}, para);
}

TEST(CostModel, DxReadsFp32DyInPlaceWithTheRowsEdgeTilesApart) {
  // dx_tiled reads fp32 dy in place (no staging pass) at unit strides: chunked tiles; rows of at
  // most 2 tiles peeled (unrolled), longer rows partitioned on the width's padding (edge tiles
  // apart), so the taps into the width padding fold away. Where a depth tap into a pad stays in
  // the reduction, only chunked and peeled rows do. The strided phase frame (peeled up to 4
  // tiles) stages it; 16-bit dy is read in the same forms from its conversion
  // (DxConvertsSixteenBitDyUnpaddedAtUnitStride).
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx512("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512");
  const auto* s = sched::dx_tiled_schedule();
  const auto has = [&](const Problem& p, const std::string& v, const char* what) {
    return s->describe(p, {avx512, 1, v}).find(what) != std::string::npos;
  };
  const char* apart = "dy read in place (edge tiles apart)";
  const Problem large = dx_problem(kLarge), small = dx_problem(kSmall);
  // kLarge: 56 positions a row.
  EXPECT_TRUE(has(large, "qt=8,ct=2,kwt=3,kt=3,hb=8", "dy read in place"));
  EXPECT_FALSE(has(large, "qt=8,ct=2,kwt=3,kt=3,hb=8", apart));
  EXPECT_FALSE(has(large, "qt=8,ct=2,kwt=3,kt=3,hb=8", "tiles unrolled"));
  EXPECT_TRUE(has(large, "qt=8,ct=2,kwt=3,kt=27,hb=8", apart));
  EXPECT_FALSE(has(large, "qt=8,ct=2,kwt=3,kt=27,hb=8", "tiles unrolled"));
  EXPECT_TRUE(has(large, "qt=14,ct=2,kwt=1,kt=27,hb=8", apart));
  EXPECT_TRUE(has(large, "qt=28,ct=1,kwt=1,kt=27,hb=8", "row of 2 tiles unrolled, dy read in place, "));
  EXPECT_TRUE(has(dx_problem(kLarge, DType::kFloat16), "qt=28,ct=1,kwt=1,kt=27,hb=8",
                  "row of 2 tiles unrolled, dy converted by rows, read unpadded, "));
  EXPECT_TRUE(has(dx_problem(kLarge, DType::kFloat16), "qt=8,ct=2,kwt=3,kt=27,hb=8",
                  "dy converted by rows, read unpadded (edge tiles apart)"));
  // kSmall: 12 positions a row, 2 tiles of 6 or 3 of 4.
  EXPECT_TRUE(has(small, "qt=6,ct=1,kwt=3,kt=27", "row of 2 tiles unrolled, dy read in place, "));
  EXPECT_TRUE(has(small, "qt=4,ct=1,kwt=3,kt=27", apart));
  EXPECT_FALSE(has(small, "qt=4,ct=1,kwt=3,kt=27", "tiles unrolled"));
  // Depth 3, 2 taps of dilation 3, pads 0 and 1: slice 1 reads dy through neither tap, so the
  // depth's pad taps stay in the reduction (ops::skips_outside) and dy's select would keep its
  // depth condition in the inner loop: a row of 6 tiles stages dy (whole: dilated), 2 tiles
  // are peeled.
  const Problem kept = depth_pad_kept_dx(DType::kFloat32);
  ASSERT_LT(ops::inside_share(kept, 0), 1.0);
  ASSERT_FALSE(ops::skips_outside(kept, 0));
  EXPECT_FALSE(ops::dy_pads_left_out(kept));
  EXPECT_TRUE(has(kept, "qt=4,ct=1,kwt=3,kt=18", "dy staged whole"));
  EXPECT_TRUE(has(kept, "qt=12,ct=1,kwt=3,kt=18", "row of 2 tiles unrolled, dy read in place, "));
  // Strided: peeled, dy staged, in the scatter form (every extent even) and the phase frame of
  // a ragged extent alike.
  Conv ragged = kStrided;
  ragged.d = 5;
  for (const Problem& p : {dx_problem(kStrided), dx_problem(ragged)}) {
    EXPECT_TRUE(has(p, "qt=7,ct=1", "row of 1 tiles unrolled"));
    EXPECT_FALSE(has(p, "qt=7,ct=1", "in place"));
  }
  // The estimate: in place drops the staging pass's dy and the peeled row's width-padding taps;
  // the same tile on fp16 dy leaves out the same taps (read from dy's conversion) and pays the
  // conversion.
  const sched::Estimate f32 = s->estimate(small, {avx512, 1, "qt=6,ct=1,kwt=3,kt=27"});
  const sched::Estimate f16 = s->estimate(dx_problem(kSmall, DType::kFloat16),
                                          {avx512, 1, "qt=6,ct=1,kwt=3,kt=27"});
  EXPECT_LT(f32.passes, f16.passes);
  EXPECT_NEAR(f32.compute / f16.compute, 1.0, 1e-9);
  knobs::unset("TBEX_CALIBRATE");
}

TEST(CostModel, DxConvertsSixteenBitDyUnpaddedAtUnitStride) {
  // dx_tiled reads 16-bit dy at unit stride from its fp32 conversion in dy's own frame (no
  // zero padding), in the forms it reads fp32 dy in place
  // (DxReadsFp32DyInPlaceWithTheRowsEdgeTilesApart): converted row by row beside the tiles (no
  // pass of its own), whole where the depth or height is dilated (Halide's sliding window did
  // not slide over a dilated window of rows); strided dy is staged whole, zero-padded. Each
  // channel block's sweep over a depth slice converts the rows again: a tile of one block
  // converts twice as often as one of two blocks (kLarge: 4 per group). Converted whole, the
  // pass carries dy unpadded: less than zero-padded.
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx512("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512");
  const auto* s = sched::dx_tiled_schedule();
  const auto describes = [&](const Problem& p, const std::string& v) {
    return s->describe(p, {avx512, 1, v});
  };
  const Problem f16 = dx_problem(kLarge, DType::kFloat16);
  for (const char* v : {"qt=8,ct=2,kwt=3,kt=3,hb=8", "qt=8,ct=2,kwt=3,kt=27,hb=8"})
    EXPECT_NE(describes(f16, v).find("dy converted by rows, read unpadded"), std::string::npos) << v;
  for (const char* v : {"qt=8,ct=2,kwt=3,kt=3,hb=8", "qt=8,ct=2,kwt=3,kt=27,hb=8"}) {
    EXPECT_EQ(describes(dx_problem(kLarge), v).find("dy staged"), std::string::npos) << v;
    EXPECT_EQ(describes(dx_problem(kLarge), v).find("converted"), std::string::npos) << v;
  }
  EXPECT_EQ(describes(dx_problem(kStrided, DType::kFloat16), "qt=7,ct=1").find("converted"),
            std::string::npos);
  EXPECT_NE(describes(dx_problem(kStrided, DType::kFloat16), "qt=7,ct=1").find("dy staged whole"),
            std::string::npos);
  {
    ParaDict para = para_of(kLarge, true);
    para.pads = std::vector<int64_t>(6, 2);
    para.dilations = {1, 2, 2, 2, 1};
    const Conv& c = kLarge;  // dilation 2, pad 2: dy has x's extent
    const Problem dilated = make_backprop_input_problem(
        shape_fz3d({c.cout, c.cin, 3, 3, 3}, 1), DType::kFloat16,
        {c.n, c.d, (c.cout + 15) / 16, c.h, c.w, 16}, DType::kFloat16, {c.cout, c.cin, 3, 3, 3},
        {c.n, c.d, c.h, c.w, c.cin}, para);
    for (const char* v : {"qt=8,ct=2,kwt=3,kt=3,hb=8", "qt=8,ct=2,kwt=3,kt=27,hb=8"}) {
      EXPECT_EQ(describes(dilated, v).find("by rows"), std::string::npos) << v;
      EXPECT_NE(describes(dilated, v).find("dy converted whole, read unpadded"), std::string::npos) << v;
    }
  }
  // Depth 3, 2 taps of dilation 3, pads 0 and 1: a depth pad tap stays in the reduction, so a
  // row of 6 tiles stages dy zero-padded and a row of 2 converts it unpadded (both whole: the
  // depth is dilated); both passes stage the same weights.
  {
    const Problem kept = depth_pad_kept_dx(DType::kFloat16);
    EXPECT_NE(describes(kept, "qt=4,ct=1,kwt=3,kt=18").find("dy staged whole"), std::string::npos);
    EXPECT_NE(describes(kept, "qt=12,ct=1,kwt=3,kt=18").find("dy converted whole"), std::string::npos);
    EXPECT_LT(s->estimate(kept, {avx512, 1, "qt=12,ct=1,kwt=3,kt=18"}).passes,
              s->estimate(kept, {avx512, 1, "qt=4,ct=1,kwt=3,kt=18"}).passes);
  }
  const sched::Estimate one = s->estimate(f16, {avx512, 1, "qt=8,ct=1,kwt=3,kt=27,hb=8"});
  const sched::Estimate two = s->estimate(f16, {avx512, 1, "qt=8,ct=2,kwt=3,kt=27,hb=8"});
  EXPECT_GT(one.passes, two.passes);
  knobs::unset("TBEX_CALIBRATE");
}

TEST(CostModel, DwThreadsStageOnlyTheirGroupsX) {
  // The dW tiles are spread over threads with the real group outermost: 4 groups over 2 threads
  // give each thread 2 groups, and unsplit it stages only their x; a dense problem's threads
  // each stage all of x for their tiles; split parts stage their own shares.
  EXPECT_DOUBLE_EQ(sched::tile_stagers(144, 2, 1, 4), 1.0);
  EXPECT_DOUBLE_EQ(sched::tile_stagers(144, 2, 1, 1), 2.0);
  EXPECT_DOUBLE_EQ(sched::tile_stagers(144, 2, 1, 3), 4.0 / 3);
  EXPECT_DOUBLE_EQ(sched::tile_stagers(144, 2, 4, 1), 1.0);
  EXPECT_DOUBLE_EQ(sched::tile_stagers(1, 2, 1, 1), 1.0);
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx512("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512");
  const auto* s = sched::dw_tiled_schedule();
  const char* v = "nt=4,kwt=3,ch=7,parts=1,db=4";
  const Conv grouped{2, 64, 8, 28, 28, 64, {3, 3, 3}, {1, 1, 1}, 1, 4};
  Conv dense = grouped;
  dense.groups = 1;
  for (const Conv& c : {grouped, dense}) {
    const Problem p = dw_problem(c);
    const double one = s->estimate(p, {avx512, 1, v}).passes;
    const double two = s->estimate(p, {avx512, 2, v}).passes;
    if (c.groups == 4) EXPECT_NEAR(two, one / 2, one * 1e-9);
    else EXPECT_GT(two, 0.9 * one);  // twice the staging over two threads, the output halved
  }
  knobs::unset("TBEX_CALIBRATE");
}

TEST(CostModel, DwReadsFp32XInPlaceWhereStagingDominates) {
  // dw_tiled reads fp32 x of dense rows in place (the reduction leaves out every tap reading
  // the pads, so no padding select is left in the tiles' loops): the seed, e1, the seed with
  // pads of 1; not 16-bit x, and not the seed on Zen 4, whose staged chunks were measured with
  // the next chunk prefetched. Where a tap reads nothing but pads (the public case's depth: 4
  // taps of dilation 4 over pads of 3), the reduction keeps that dim's pad taps (left out, the
  // tap's loops would be empty, and Halide's bounds of them asked x for depth -3). A
  // variant naming depth blocks without x stages x. In place, x is read once however many
  // tile groups walk it: unsplit over two threads each thread's passes halve, where staged
  // chunks are staged by both threads.
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target avx512("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512");
  const Halide::Target zen4("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_zen4");
  const auto* s = sched::dw_tiled_schedule();
  const Conv seed{1, 16, 8, 16, 16, 16, {2, 3, 3}, {2, 2, 2}, 0};
  Conv padded = seed;
  padded.pad = 1;
  const Conv e1{2, 64, 8, 28, 28, 64, {3, 3, 3}, {1, 1, 1}, 1, 4};
  const Conv tall{1, 64, 8, 70, 70, 64, {3, 3, 3}, {1, 1, 1}, 1};
  const auto in_place = [&](const Conv& c, const Halide::Target& t, DType d = DType::kFloat32,
                            const char* v = "") {
    return s->describe(dw_problem(c, d), {t, 1, v}).find("x read in place") != std::string::npos;
  };
  EXPECT_TRUE(in_place(seed, avx512));
  EXPECT_TRUE(in_place(e1, avx512));
  EXPECT_TRUE(in_place(tall, avx512));
  EXPECT_TRUE(in_place(e1, zen4));
  EXPECT_FALSE(in_place(e1, avx512, DType::kFloat16));
  EXPECT_FALSE(in_place(e1, avx512, DType::kFloat32, "db=4"));
  EXPECT_FALSE(in_place(e1, avx512, DType::kFloat32, "x=2"));
  ASSERT_TRUE(ops::skips_outside(dw_problem(padded), 0));
  EXPECT_TRUE(in_place(padded, avx512));
  // The public case's depth: 7 slices, 4 taps of dilation 4 over pads of 3, stride 2, one
  // output slice: taps 0 and 3 read only pads.
  ParaDict para;
  para.strides = {2, 1, 1};
  para.pads = {3, 3, 1, 1, 1, 1};
  para.dilations = {1, 4, 1, 1, 1};  // N, D, C, H, W
  para.groups = 1;
  const Problem dilated = make_backprop_filter_problem(
      {1, 7, 1, 8, 8, 16}, DType::kFloat32, {1, 1, 1, 8, 8, 16}, DType::kFloat32, {16, 4, 16, 3, 3}, para);
  EXPECT_FALSE(ops::skips_outside(dilated, 0));  // its loops would be empty
  EXPECT_TRUE(ops::keeps_pad_taps(dilated, 0));
  EXPECT_TRUE(ops::skips_outside(dilated, 1));
  EXPECT_NEAR(ops::inside_tap_share(dilated), ops::inside_share(dilated, 1) * ops::inside_share(dilated, 2),
              1e-12);
  EXPECT_FALSE(in_place(seed, zen4));
  const Problem p = dw_problem(seed);
  const char* v = "nt=8,kwt=3,ch=7,parts=1";  // Ho = 7
  const double one = s->estimate(p, {avx512, 1, v}).passes, two = s->estimate(p, {avx512, 2, v}).passes;
  EXPECT_LT(two, 0.6 * one);
  const double staged_one = s->estimate(p, {zen4, 1, v}).passes;
  EXPECT_GT(s->estimate(p, {zen4, 2, v}).passes, 0.9 * staged_one);
  knobs::unset("TBEX_CALIBRATE");
}


}  // namespace
}  // namespace tbex
