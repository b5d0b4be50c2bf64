// The schedule toolkit's tile space (schedules/tile_space.h, gemm_tile.h): variant keys parse and
// print back, the TBEX_*_TILE knobs override a schedule's own tiles only without a variant and
// a malformed or rule-breaking knob is a UserError naming the knob, candidate lists start with
// the own choice ("") without repeats, and the GEMM tile space keeps its rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "schedules/gemm_tile.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/tbex.h"

namespace tbex::sched {
namespace {

/** The param of the UserError `f` throws, or "" when it throws none. */
template <class F>
std::string user_error_param(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.param();
  }
  return "";
}

/** Sets a knob for one test; unset again when it ends. */
struct KnobScope {
  std::string name;
  KnobScope(std::string n, const std::string& v) : name(std::move(n)) { knobs::set(name, v); }
  ~KnobScope() { knobs::unset(name); }
};

const TileSpace kSpace("demo", {"nt", "kwt", "ch"}, "TBEX_DW_TILE", 2);

TEST(TileSpace, VariantParsesAndPrintsInKeyOrder) {
  const VariantFields f = kSpace.parse("ch=8,nt=4");
  EXPECT_EQ(f.at("nt"), 4);
  EXPECT_EQ(f.at("ch"), 8);
  EXPECT_EQ(f.count("kwt"), 0u);
  EXPECT_EQ(kSpace.key(f), "nt=4,ch=8");
  EXPECT_TRUE(kSpace.parse("").empty());
  for (const char* bad : {"nt=0", "nt=4097", "nt=x", "qt=4", "nt", "nt=4,nt=2"})
    EXPECT_EQ(user_error_param([&] { kSpace.parse(bad); }), "variant") << bad;
}

TEST(TileSpace, KnobOverridesOnlyWithoutAVariant) {
  KnobScope k("TBEX_DW_TILE", "6,2");
  int nt = 1, kwt = 1, ch = 1;
  const auto bound = std::vector<std::pair<const char*, int*>>{{"nt", &nt}, {"kwt", &kwt}, {"ch", &ch}};
  VariantFields set = kSpace.resolve("", bound);
  EXPECT_EQ(nt, 6);
  EXPECT_EQ(kwt, 2);
  EXPECT_EQ(ch, 1);  // the knob covers the first two keys only
  EXPECT_EQ(set.size(), 2u);
  nt = kwt = 1;
  set = kSpace.resolve("ch=3", bound);
  EXPECT_EQ(nt, 1);
  EXPECT_EQ(ch, 3);
  EXPECT_EQ(set.size(), 1u);
}

TEST(TileSpace, MalformedKnobNamesTheKnob) {
  for (const char* bad : {"abc", "4,x", "4,2,1", "0", "4,,2", ""}) {
    KnobScope k("TBEX_DW_TILE", bad);
    EXPECT_EQ(user_error_param([&] { kSpace.override_fields(""); }), "TBEX_DW_TILE") << bad;
    // With a variant the knob is not read at all.
    EXPECT_EQ(user_error_param([&] { kSpace.override_fields("nt=2"); }), "") << bad;
  }
}

TEST(TileSpace, RuleBreaksNameWhatSetTheTiles) {
  EXPECT_EQ(user_error_param([&] { kSpace.require(false, "nt=3", "nt must divide 8"); }), "variant");
  EXPECT_EQ(user_error_param([&] { kSpace.require(true, "nt=3", "nt must divide 8"); }), "");
  KnobScope k("TBEX_DW_TILE", "3");
  EXPECT_EQ(user_error_param([&] { kSpace.require(false, "", "nt must divide 8"); }), "TBEX_DW_TILE");
}

TEST(TileSpace, CandidatesStartWithTheOwnChoiceWithoutRepeats) {
  const auto c = TileSpace::candidates({"nt=4", "nt=8", "nt=4", "nt=2", "nt=16"}, 3);
  EXPECT_EQ(c, (std::vector<std::string>{"", "nt=8", "nt=2"}));
  EXPECT_TRUE(TileSpace::candidates({}, 4).empty());
}

const Halide::Target kAvx512("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512");
const Halide::Target kAvx2("x86-64-linux-sse41-avx-avx2-f16c-fma");

GemmShape shape(int64_t row, int64_t blocks, bool cover, const Halide::Target& t = kAvx512) {
  GemmShape s{"gemm_demo", "TBEX_FWD_TILE", row, "the row", blocks, "the blocks", blocks, cover, 8};
  s.target = t;
  return s;
}

TEST(GemmTile, RegisterBudgetFollowsTheTarget) {
  // AVX-512: 16 accumulators whatever the operands. AVX2: a 16-lane vector is two ymm; 15 of
  // the 16 registers (one holds the broadcast) for operands and accumulators.
  EXPECT_EQ(tile_accumulators(kAvx512, 1), 16);
  EXPECT_EQ(tile_accumulators(kAvx512, 4), 16);
  EXPECT_EQ(tile_accumulators(kAvx2, 1), 6);
  EXPECT_EQ(tile_accumulators(kAvx2, 2), 5);
  EXPECT_EQ(tile_accumulators(kAvx2, 7), 1);  // never below one
  // AVX2's own choice: one block of 6 positions (12 ymm) rather than 4 blocks of one (8 ymm).
  const GemmTiles t = choose_gemm_tiles(shape(17, 4, false, kAvx2), "");
  EXPECT_EQ(t.ct, 1);
  EXPECT_EQ(t.qt, 6);
  EXPECT_EQ(choose_gemm_tiles(shape(17, 4, true, kAvx2), "").qt, 6);  // 3 tiles of 6 cover 17
  // Every AVX2 candidate keeps (qt * ct + ct) 16-lane vectors + a broadcast in 16 ymm.
  const GemmShape s = shape(56, 4, false, kAvx2);
  for (const std::string& key : gemm_candidates(s)) {
    const GemmTiles c = choose_gemm_tiles(s, key);
    EXPECT_LE(2 * (c.qt * c.ct + c.ct) + 1, 16) << key;
  }
}

TEST(GemmTile, OwnChoiceFillsTheAccumulatorsAndCoversTheRow) {
  // 4 blocks: ct 4, at most 16/4 = 4 positions.
  GemmTiles t = choose_gemm_tiles(shape(17, 4, false), "");
  EXPECT_EQ(t.ct, 4);
  EXPECT_EQ(t.qt, 4);
  // 1 block, row 17: widest is 16; covering takes 2 tiles of 9.
  EXPECT_EQ(choose_gemm_tiles(shape(17, 1, false), "").qt, 16);
  EXPECT_EQ(choose_gemm_tiles(shape(17, 1, true), "").qt, 9);
  // A row shorter than the widest tile.
  EXPECT_EQ(choose_gemm_tiles(shape(3, 1, false), "").qt, 3);
  t = choose_gemm_tiles(shape(17, 4, false), "qt=5,ct=2");
  EXPECT_EQ(t.qt, 5);
  EXPECT_EQ(t.ct, 2);
  EXPECT_EQ(gemm_key(t, shape(17, 4, false)), "qt=5,ct=2");
  EXPECT_EQ(user_error_param([] { choose_gemm_tiles(shape(17, 4, false), "ct=3"); }), "variant");
  EXPECT_EQ(user_error_param([] { choose_gemm_tiles(shape(17, 4, false), "qt=18"); }), "variant");
}

TEST(GemmTile, KnobSetsTheTilesAndKeepsTheRules) {
  {
    KnobScope k("TBEX_FWD_TILE", "6,2");
    const GemmTiles t = choose_gemm_tiles(shape(17, 4, true), "");
    EXPECT_EQ(t.qt, 6);
    EXPECT_EQ(t.ct, 2);
    EXPECT_EQ(choose_gemm_tiles(shape(17, 4, true), "qt=3").qt, 3);  // a variant wins
  }
  KnobScope k("TBEX_FWD_TILE", "4,3");  // ct 3 does not divide 4 blocks
  EXPECT_EQ(user_error_param([] { choose_gemm_tiles(shape(17, 4, true), ""); }), "TBEX_FWD_TILE");
}

TEST(GemmTile, CandidatesAreValidVariantsOwnChoiceFirst) {
  const GemmShape s = shape(17, 4, false);
  const auto c = gemm_candidates(s);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0], "");
  EXPECT_LE(c.size(), s.cap);
  for (size_t i = 1; i < c.size(); ++i) {
    const GemmTiles t = choose_gemm_tiles(s, c[i]);  // throws on a rule break
    EXPECT_EQ(gemm_key(t, s), c[i]);
    EXPECT_LE(t.qt * t.ct, 16) << c[i];
    EXPECT_EQ(std::count(c.begin(), c.end(), c[i]), 1) << c[i];
  }
}

TEST(GemmTile, RowTapsCountTheRegistersTheirLoopOrderKeepsLive) {
  // AVX-512 runs every tap of a position before the next position: all taps' weight rows stay
  // live, and the broadcasts a position's taps still reach. AVX2 runs each tap over the tile:
  // one tap's weight rows and the whole window of broadcasts.
  EXPECT_TRUE(taps_inside_positions(kAvx512));
  EXPECT_FALSE(taps_inside_positions(kAvx2));
  const auto operands = [](int qt, int ct, int dilation, int spanned, const Halide::Target& t) {
    GemmTiles g;
    g.qt = qt, g.ct = ct;
    return row_taps_operands(g, 3, dilation, spanned, t);
  };
  EXPECT_EQ(operands(16, 1, 1, 1, kAvx512), 3 + 3);  // not the window of 18
  EXPECT_EQ(operands(4, 1, 1, 1, kAvx512), 3 + 3);
  EXPECT_EQ(operands(8, 2, 1, 1, kAvx512), 6 + 3);
  EXPECT_EQ(operands(8, 2, 2, 1, kAvx512), 6 + 5);  // a dilated row reaches further
  EXPECT_EQ(operands(4, 2, 1, 2, kAvx512), 6 + 6);  // two real groups: each its broadcasts
  EXPECT_EQ(operands(4, 1, 1, 1, kAvx2), (2 + 6 + 1) / 2);  // 2 weight ymm + 6 broadcasts
  EXPECT_EQ(operands(4, 1, 1, 2, kAvx2), (2 + 12 + 1) / 2);
  // The variant rule and the candidates follow the count (32 zmm).
  GemmShape s = shape(64, 2, false);
  s.row_taps = 3;
  EXPECT_EQ(choose_gemm_tiles(s, "qt=16,ct=1,kwt=3").kwt, 3);  // 16 + 6
  EXPECT_EQ(choose_gemm_tiles(s, "qt=8,ct=2,kwt=3").kwt, 3);   // 16 + 9
  EXPECT_EQ(user_error_param([&] { choose_gemm_tiles(s, "qt=12,ct=2,kwt=3"); }), "variant");  // 33
  for (const std::string& key : gemm_candidates(s)) {
    const GemmTiles c = choose_gemm_tiles(s, key);
    if (c.kwt > 1) EXPECT_LE(c.qt * c.ct + 3 * c.ct + 3, 32) << key;
  }
}

TEST(GemmTile, CandidatesHoldTheWidestTileDividingTheRow) {
  // Pair tiles of 2 blocks hold at most 10 positions; a row of 64 takes 7 tiles of 10 covering
  // 70 (the widest, and the covering one), or 8 tiles of 8 covering it exactly.
  GemmShape s = shape(64, 2, false, kAvx512);
  s.pairs = s.pairs_default = true;
  s.cap = 20;  // pairs lead: both forms' tiles
  const auto c = gemm_candidates(s);
  EXPECT_NE(std::find(c.begin(), c.end(), "qt=8,ct=2,pair=2"), c.end());
  const GemmTiles own = choose_gemm_tiles(s, "");  // listed first, as ""
  EXPECT_EQ(own.qt, 10);
  EXPECT_EQ(own.ct, 2);
  // A prime row has no dividing tile but 1: none narrower than half the widest is added.
  s.row = 67;
  for (const std::string& key : gemm_candidates(s)) {
    if (key.empty()) continue;
    const GemmTiles t = choose_gemm_tiles(s, key);
    if (t.pair == 2 && t.ct == 2) EXPECT_GE(t.qt, 5) << key;
  }
}

TEST(Tiling, StagingRuleFollowsTheDilatedKernel) {
  Problem p;
  p.geo.kernel = {1, 3, 3};
  p.geo.stride = {1, 3, 3};
  EXPECT_TRUE(stage_x_rows(p));  // stride = kernel: every row read
  p.geo.stride = {1, 4, 1};
  EXPECT_FALSE(stage_x_rows(p));  // a row in four is never read
  p.geo.dilation = {1, 2, 1};
  EXPECT_TRUE(stage_x_rows(p));  // dilated kernel spans 5 rows
}

TEST(Toolkit, KnobReachesTheScheduleThroughThePublicApi) {
  ConvGeometry g;
  g.n = 1, g.cin = 16, g.cout = 32, g.in = {2, 8, 8}, g.out = {2, 8, 8}, g.kernel = {1, 1, 1};
  const Problem p = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
  // The cost model's detail of fwd_tiled's own choice counts the tile's vector registers:
  // 2 blocks x 8 positions + 2 weights + 1 broadcast, or 1 x 2 + 1 + 1 under the knob (AVX-512).
  auto own_detail = [&] {
    for (const RankedChoice& r : rank_schedules(p))
      if (r.schedule == "fwd_tiled" && r.variant.empty()) return r.detail;
    return std::string("none");
  };
  // On a host without AVX-512 each 16-lane vector is two ymm: the own choice is 1 block x 4
  // positions (two tiles cover the row of 8) + 1 weight + 1 broadcast, counted in ymm.
  const bool avx512 = Halide::get_host_target().has_feature(Halide::Target::AVX512);
  EXPECT_NE(own_detail().find(avx512 ? "19 vregs" : "12 vregs"), std::string::npos) << own_detail();
  {
    KnobScope k("TBEX_FWD_TILE", "2,1");
    EXPECT_NE(own_detail().find(avx512 ? " 4 vregs" : " 8 vregs"), std::string::npos) << own_detail();
  }
  KnobScope k("TBEX_FWD_TILE", "2;1");
  EXPECT_EQ(user_error_param([&] { schedule_candidates(p, "fwd_tiled"); }), "TBEX_FWD_TILE");
}

}  // namespace
}  // namespace tbex::sched
