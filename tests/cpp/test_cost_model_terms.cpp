// The cost model's terms on hand-made loop nests: FMA latency chains, register spills, lane use,
// parallel balance, the small-load rate of bf16 dots' broadcasts, waits per run read from DRAM,
// streamed bytes at their level's bandwidth, register broadcasts on the multiply pipes, and only
// the steps outside the padding counted.
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

sched::LoopNest nest_with(int accumulators, int operands) {
  sched::LoopNest n;
  n.tile = {double(accumulators), double(operands), accumulators, operands, 0};
  n.steps_per_visit = 1000;
  n.visits = 100;
  return n;
}

double cycles_per_fma(const sched::LoopNest& n, const sched::Machine& m) {
  return sched::evaluate(n, m).cycles / (n.visits * n.steps_per_visit * n.tile.fmas);
}

TEST(CostModel, MicroKernelTerms) {
  const sched::Machine m;  // AVX-512 defaults: 2 FMA pipes, latency 4, 30 usable registers
  // Two FMA pipes: at best half a cycle per vector FMA.
  EXPECT_NEAR(cycles_per_fma(nest_with(12, 7), m), 0.5, 0.02);
  // Two accumulators cannot hide the FMA latency: 2 cycles per FMA.
  EXPECT_NEAR(cycles_per_fma(nest_with(2, 3), m), 2.0, 0.1);
  // 32 accumulators and 8 operands spill: slower per FMA than 16.
  EXPECT_GT(cycles_per_fma(nest_with(32, 8), m), 1.2 * cycles_per_fma(nest_with(16, 5), m));
  // Loads beyond the load ports bound the step.
  sched::LoopNest loads = nest_with(12, 7);
  loads.tile.loads = 24;
  EXPECT_NEAR(cycles_per_fma(loads, m), 1.0, 0.05);
  // A row's shorter last tile (tail) adds its visits at its own step cost (2 accumulators: a
  // step's 2 FMAs wait out the latency), and its FMAs count among the executed lanes.
  sched::LoopNest tailed = nest_with(12, 7);
  const double full = sched::evaluate(tailed, m).compute;
  tailed.tail = nest_with(2, 3).tile;
  tailed.tail_visits = tailed.visits;
  const double tail_only = sched::evaluate(nest_with(2, 3), m).compute;
  EXPECT_NEAR(sched::evaluate(tailed, m).compute, full + tail_only, 1e-6 * full);
  EXPECT_NEAR(sched::lane_use_of(14.0 * 2 * tailed.steps_per_visit * tailed.visits * 16, tailed),
              1.0, 1e-12);
  EXPECT_NEAR(sched::lane_use_of(12.0 * 2 * tailed.steps_per_visit * tailed.visits * 16, tailed),
              12.0 / 14, 1e-12);
  // Parallel balance: 3 units on 2 threads run as 2 rounds, 4 units as 2 as well.
  EXPECT_NEAR(sched::balance_of(3, 2), 0.75, 1e-12);
  EXPECT_NEAR(sched::balance_of(4, 2), 1.0, 1e-12);
  sched::LoopNest three = nest_with(12, 7), four = nest_with(12, 7);
  three.threads = four.threads = 2;
  three.units = 3, four.units = 4;
  EXPECT_NEAR(sched::evaluate(three, m).cycles / sched::evaluate(four, m).cycles, 4.0 / 3, 0.01);
  // Operands streamed from beyond L2 cost bandwidth once the hot loop outruns it.
  sched::LoopNest far = nest_with(12, 7);
  far.visit_bytes = 64 * 1000 * 16;  // 16 lines per step
  far.visit_footprint = m.l2 * 4, far.chunk_footprint = m.l3 * 4;
  EXPECT_STREQ(sched::evaluate(far, m).level, "DRAM");
  EXPECT_GT(sched::evaluate(far, m).cycles, 10 * sched::evaluate(nest_with(12, 7), m).cycles);
  // A burst of stores nothing overlaps costs each line a read for ownership and a write-back at
  // the bandwidth of the level it lands in, beside the passes (one thread: the single-core rate).
  sched::LoopNest burst = nest_with(12, 7);
  burst.burst_write_bytes = 4.0 * m.l3;
  EXPECT_NEAR(sched::evaluate(burst, m).passes, 2.0 * 4 * m.l3 / m.dram_bw, 1.0);
  burst.burst_write_bytes = m.l3 / 4.0;
  EXPECT_NEAR(sched::evaluate(burst, m).passes, 2.0 * m.l3 / 4 / m.l3_bw, 1.0);
  // Halide's fallback target without AVX-512: a 16-lane tile vector is two machine vectors.
  const sched::Machine avx2 = sched::Machine::of(Halide::Target("x86-64-linux-avx2-fma"));
  EXPECT_EQ(avx2.lanes, 8);
  EXPECT_EQ(avx2.vregs, 16);
  EXPECT_GT(sched::evaluate(nest_with(8, 5), avx2).cycles, 1.9 * sched::evaluate(nest_with(8, 5), m).cycles);
}

// bf16 dot tiles count their folded broadcasts' 4-byte loads at the calibrated small-load rate
// beside one vector load a cycle (Zen 4); FMA tiles keep the shared rate (measured slower when
// picked by it). 1 vector + 8 folded broadcasts per 8 dots: load-bound at 9 loads a cycle
// each, at the dot rate with the small loads at 2 a cycle.
TEST(CostModel, DotBroadcastsLoadAtTheSmallLoadRate) {
  sched::Machine zen4;
  zen4.fma_pipes = zen4.dot_pipes = zen4.folded_fma_pipes = zen4.load_pipes = 1.0;
  sched::LoopNest n = nest_with(8, 9);
  n.tile.loads = 9, n.tile.broadcasts = 8, n.tile.dots = true;
  EXPECT_NEAR(cycles_per_fma(n, zen4), 9.0 / 8, 0.03);
  zen4.small_load_pipes = 2.0;
  EXPECT_NEAR(cycles_per_fma(n, zen4), 1.0, 0.03);
  n.tile.dots = false;
  EXPECT_NEAR(cycles_per_fma(n, zen4), 9.0 / 8, 0.03);
}

// A dot tile's accumulator chains run at the calibrated dot latency (Zen 5: VDPBF16PS 6 cycles
// against the FMA's 4): 8 accumulators on 2 pipes are latency-bound there, 16 are not; FMA
// tiles keep the FMA latency.
TEST(CostModel, DotChainsRunAtTheDotLatency) {
  sched::Machine zen5;
  zen5.fma_pipes = zen5.dot_pipes = zen5.folded_fma_pipes = zen5.load_pipes = 2.0;
  zen5.fma_latency = 4, zen5.dot_latency = 6;
  sched::LoopNest eight = nest_with(8, 1), sixteen = nest_with(16, 1);
  eight.tile.dots = sixteen.tile.dots = true;
  EXPECT_NEAR(cycles_per_fma(eight, zen5), 6.0 / 8, 0.03);
  EXPECT_NEAR(cycles_per_fma(sixteen, zen5), 1.0 / 2, 0.03);
  eight.tile.dots = false;
  EXPECT_NEAR(cycles_per_fma(eight, zen5), 1.0 / 2, 0.03);
}

// Panels read from DRAM pay a wait per short run (Machine::dram_run_start, calibrated) beside the
// passes, per thread; dw_pointwise counts one run per block and chunk where x and dy outgrow a
// quarter of the L3 (d dW: 16 MB in fp32, 8 MB in fp16, converted per chunk), so longer chunks
// (a whole slab: a candidate) wait less, and none where they fit.
TEST(CostModel, InPlaceRunsFromDramWaitPerRun) {
  sched::Machine m;
  m.dram_run_start = 500;
  sched::LoopNest n = nest_with(12, 7);
  n.threads = 2;
  const double before = sched::evaluate(n, m).passes;
  n.dram_runs = 1000;
  EXPECT_NEAR(sched::evaluate(n, m).passes - before, 1000 * 500 / 2.0, 1e-6);

  const Halide::Target host = Halide::get_host_target();
  if (sched::Machine::of(host).dram_run_start <= 0) GTEST_SKIP() << "no DRAM run start calibrated";
  const sched::DwSchedule* s = sched::dw_pointwise_schedule();
  const Conv d{2, 256, 8, 28, 28, 64, {1, 1, 1}, {1, 1, 1}, 0}, small{1, 256, 1, 28, 28, 64, {1, 1, 1}, {1, 1, 1}, 0};
  const char* short_chunks = "ct=2,nt=8,ch=4,parts=1";
  const char* long_chunks = "ct=2,nt=8,ch=14,parts=1";
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    const Problem big = dw_problem(d, dtype), fits = dw_problem(small, dtype);
    EXPECT_GT(s->estimate(big, {host, 1, short_chunks}).passes,
              s->estimate(big, {host, 1, long_chunks}).passes + 1000);
    EXPECT_EQ(s->estimate(fits, {host, 1, short_chunks}).passes,
              s->estimate(fits, {host, 1, long_chunks}).passes);
    // The whole slab (28 rows) per chunk, whatever register tile the target holds.
    const auto keys = s->candidates(big, {host, 1, ""});
    EXPECT_TRUE(std::any_of(keys.begin(), keys.end(),
                            [](const std::string& k) { return k.find(",ch=28,") != std::string::npos; }))
        << "the whole slab per chunk";
  }
}

// Bytes read once from beyond the L2 beside the hot loop (16-bit panels converted chunk by
// chunk) are priced at the bandwidth of where they lie, per thread, not as a pass that reads and
// writes all of them through memory; dw_pointwise's fp16 conversion is priced so, with its
// loads, conversions and stores as pass ops.
TEST(CostModel, StreamedBytesCostTheirLevelsBandwidth) {
  sched::Machine m;
  m.dram_bw = 4, m.l3_bw = 16, m.dram_bw_mt = 2, m.l3_bw_mt = 8;
  sched::LoopNest n = nest_with(12, 7);
  const double before = sched::evaluate(n, m).passes;
  n.stream_bytes = 1 << 20;
  EXPECT_NEAR(sched::evaluate(n, m).passes - before, (1 << 20) / 16.0, 1e-6);
  n.streams_from_dram = true;
  EXPECT_NEAR(sched::evaluate(n, m).passes - before, (1 << 20) / 4.0, 1e-6);
  n.threads = 2;
  EXPECT_NEAR(sched::evaluate(n, m).passes - sched::evaluate([&] {
                sched::LoopNest o = n;
                o.stream_bytes = 0;
                return o;
              }(), m).passes,
              (1 << 20) / 2.0 / 2, 1e-6);
}

// Broadcasts in registers (Zen 4: a 512-bit broadcast runs on the vector pipes) cost the multiply
// pipes; a broadcast feeding one FMA or bf16 dot is folded into it (dots: lower/dot_operands.h)
// and costs nothing there. A tile of 14 positions x 1 block (14 broadcasts, folded) against 7 x 2
// (7 broadcasts, each shared by 2 dots), 14 dots a step either way.
TEST(CostModel, RegisterBroadcastsCostTheMultiplyPipes) {
  sched::Machine zen4;
  zen4.fma_pipes = zen4.dot_pipes = zen4.folded_fma_pipes = 1.0;
  zen4.load_pipes = 2.0;
  auto dots = [](int positions, int blocks) {
    sched::LoopNest n = nest_with(positions * blocks, positions + blocks);
    n.tile.loads = positions + blocks;
    n.tile.broadcasts = positions;
    n.tile.dots = true;
    return n;
  };
  const double narrow = cycles_per_fma(dots(14, 1), zen4), wide = cycles_per_fma(dots(7, 2), zen4);
  EXPECT_NEAR(narrow, wide, 0.02);  // free broadcasts: both at the dot rate
  zen4.register_broadcast_cycles = 0.45;
  EXPECT_NEAR(cycles_per_fma(dots(14, 1), zen4), narrow, 1e-9);  // folded: unchanged
  EXPECT_NEAR(cycles_per_fma(dots(7, 2), zen4), wide * (14 + 7 * 0.45) / 14, 0.02);
  // FMAs alike.
  sched::LoopNest fmas = dots(7, 2);
  fmas.tile.dots = false;
  EXPECT_NEAR(cycles_per_fma(fmas, zen4), (14 + 7 * 0.45) / 14, 0.02);
}


// The kernels leave out the taps whose depth or height row lies in the padding; the model counts
// only the steps they run. With K = 3, pad 1, stride 1 each border position loses one of its 3
// taps: a dim of N positions keeps 1 - 2/(3N) of its pairs, in dX (input positions, dy outside)
// as in dW (output positions, x's pads), however few (a volume 64 high: 2 of 192); along the
// row (width) dW skips wherever a tap reads a pad, dX and the forward conv nowhere.
TEST(CostModel, TapsInThePaddingAreNotCounted) {
  const Conv e1{2, 64, 8, 28, 28, 64, {3, 3, 3}, {1, 1, 1}, 1, 4};
  const double depth = 1 - 2.0 / (3 * 8), height = 1 - 2.0 / (3 * 28), width = height;
  EXPECT_NEAR(ops::inside_tap_share(dx_problem(e1)), depth * height, 1e-12);
  EXPECT_NEAR(ops::inside_tap_share(dw_problem(e1)), depth * height * width, 1e-12);
  EXPECT_TRUE(ops::skips_outside(dw_problem(e1), 0));
  EXPECT_TRUE(ops::skips_outside(dw_problem(e1), 1));
  EXPECT_TRUE(ops::skips_outside(dw_problem(e1), 2));
  EXPECT_FALSE(ops::skips_outside(dx_problem(e1), 2));
  const Conv tall{1, 16, 8, 64, 8, 16, {3, 3, 3}, {1, 1, 1}, 1};
  const double tall_height = 1 - 2.0 / (3 * 64);
  EXPECT_TRUE(ops::skips_outside(dw_problem(tall), 1));
  EXPECT_NEAR(ops::inside_tap_share(dw_problem(tall)), depth * tall_height * (1 - 2.0 / (3 * 8)),
              1e-12);
  // The forward conv walks its output positions as dW does, and skips in both dims.
  const Problem fwd = make_forward_problem(dw_problem(e1).geo, DType::kFloat32, DType::kFloat32);
  EXPECT_NEAR(ops::inside_tap_share(fwd), depth * height, 1e-12);
  // Stride 2 (D = 16 -> 8): in dW only the first output position's first tap reads a pad (in
  // each of the three dims). In dX an input position walks only the taps of its phase (even i:
  // tap 1; odd i: taps 0 and 2, 24 in all), and only i = 15's tap 0 reads dy past its end (at 8).
  const Conv g{2, 64, 16, 16, 16, 128, {3, 3, 3}, {2, 2, 2}, 1};
  EXPECT_NEAR(ops::inside_tap_share(dw_problem(g)), std::pow(23.0 / 24, 3), 1e-12);
  EXPECT_NEAR(ops::inside_tap_share(dx_problem(g)), (23.0 / 24) * (23.0 / 24), 1e-12);
  // No pads and one tap: every pair is inside.
  const Conv d{2, 256, 8, 28, 28, 64, {1, 1, 1}, {1, 1, 1}, 0};
  EXPECT_EQ(ops::inside_tap_share(dw_problem(d)), 1.0);
  EXPECT_EQ(ops::inside_tap_share(dx_problem(d)), 1.0);
  // The estimate charges the executed share of the steps.
  const sched::Machine m;
  sched::LoopNest half = nest_with(12, 7);
  half.executed = 0.5;
  EXPECT_NEAR(sched::evaluate(half, m).cycles / sched::evaluate(nest_with(12, 7), m).cycles, 0.5, 0.02);
}

TEST(CostModel, PairTilesStreamBf16Bytes) {
  // The pair forms keep both operands bf16: a step of 16 bf16 pairs reads the 64 bytes an fp32
  // step does, for two reduction points. dX: one block's weights over 16 output channels and 27
  // taps are 13.8 KB as pairs, 27.6 KB as fp32; with as many 16-channel groups as the host's
  // L1 visit budget holds as pairs (Machine::of reads the host's caches even uncalibrated: 32
  // output channels on a 48 KB L1, 16 on Zen 4's 32 KB), the pairs stay in L1 and fp32
  // (unchunked: twice the bytes) streams per visit. dW: a row pair (two rows of x and of dy in
  // bf16) streams what one fp32 row does, so over the same rows the pair tile's visits (half
  // as many) stream half the bytes from the same level.
  knobs::set("TBEX_CALIBRATE", "0");
  const Halide::Target zen4("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_zen4");
  const int64_t group_bytes = 16 * 27 * 16 * 2;
  const int64_t cout = 16 * std::max<int64_t>(1, sched::Machine::of(zen4).l1_visit_bytes() / group_bytes);
  const Conv c1{1, 32, 16, 16, 16, cout, {3, 3, 3}, {1, 1, 1}, 1};
  const Problem dx = dx_problem(c1, DType::kBFloat16);
  const auto* tiled = sched::dx_tiled_schedule();
  const sched::Estimate pairs = tiled->estimate(dx, {zen4, 1, "qt=8,ct=1,pair=2"});
  const sched::Estimate fp32 = tiled->estimate(dx, {zen4, 1, "qt=8,ct=1,pair=1,kwt=1,kt=27"});
  EXPECT_EQ(std::string(pairs.level), "L1");
  EXPECT_EQ(pairs.memory, 0.0);
  EXPECT_NE(std::string(fp32.level), "L1");
  EXPECT_GT(fp32.memory, 0.0);

  const Conv wide{1, 16, 4, 16, 112, 16, {1, 3, 3}, {1, 1, 1}, 1};
  const auto* dw = sched::dw_tiled_schedule();
  const Problem bf = dw_problem(wide, DType::kBFloat16);
  const sched::Estimate row_pairs = dw->estimate(bf, {zen4, 1, "nt=4,kwt=3,ch=4,parts=1,pair=2"});
  const sched::Estimate rows = dw->estimate(bf, {zen4, 1, "nt=4,kwt=3,ch=4,parts=1,pair=1"});
  ASSERT_EQ(std::string(row_pairs.level), std::string(rows.level));
  ASSERT_GT(rows.memory, 0.0) << rows.level;
  EXPECT_NEAR(row_pairs.memory / rows.memory, 0.5, 0.05);
  knobs::unset("TBEX_CALIBRATE");
}

}  // namespace
}  // namespace tbex
