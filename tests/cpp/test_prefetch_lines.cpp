// lower::mend_prefetches: Halide's x86 prefetch loops step one 64-byte line whatever the element
// size, and a prefetch placed right before a loop of the var named moves into that loop, its
// lines shared out among the iterations, each line once. Checked on the lowered IR of a small
// pipeline (also run against its definition) and of dw_tiled's bf16 tiles staged per input block
// for a Zen 4 target (whose kernels on such a host Bf16Pairs.DwPairsStageXPerBlockWhenSplitInParts
// runs against the reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "lower/pipeline.h"
#include "lower/prefetch_lines.h"
#include "lower/select.h"
#include "lowered_check.h"
#include "schedules/cost_model.h"
#include "schedules/loops.h"
#include "schedules/registry.h"
#include "test_util.h"

namespace tbex {
namespace {

using namespace Halide;
using namespace Halide::Internal;

struct Prefetch {
  std::vector<Stmt> loops;  ///< enclosing loops, outermost first (the last: its own loop)
  std::vector<Stmt> lets;   ///< enclosing lets, outermost first
  const For* own() const { return loops.back().as<For>(); }
  Expr offset;                    ///< element offset
  int bytes = 0;                  ///< element size
};

class FindPrefetches : public IRVisitor {
 public:
  std::vector<Prefetch> found;

 private:
  using IRVisitor::visit;
  std::vector<Stmt> loops_, lets_;  // held: the module's IR goes when the lowering returns
  void visit(const For* op) override {
    loops_.push_back(Stmt(op));
    IRVisitor::visit(op);
    loops_.pop_back();
  }
  void visit(const LetStmt* op) override {
    op->value.accept(this);
    lets_.push_back(Stmt(op));
    op->body.accept(this);
    lets_.pop_back();
  }
  void visit(const Call* op) override {
    if (op->is_intrinsic(Call::prefetch)) found.push_back({loops_, lets_, op->args[1], op->type.bytes()});
    IRVisitor::visit(op);
  }
};

std::vector<Prefetch> prefetches_of(Pipeline p, const std::vector<Argument>& args, const Target& t) {
  const Module m = p.compile_to_module(args, "k", t);
  FindPrefetches f;
  for (const LoweredFunc& fn : m.functions()) fn.body.accept(&f);
  return f.found;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/** The bytes between the lines one prefetch loop's consecutive iterations prefetch. */
int64_t step_bytes(const Prefetch& f) {
  const std::string& v = f.own()->name;
  const Expr d = simplify(substitute(v, make_one(Int(32)), f.offset) - substitute(v, make_zero(Int(32)), f.offset));
  const std::optional<int64_t> step = as_const_int(d);
  return step ? *step * f.bytes : -1;
}

/** The enclosing loop whose var is `var`, or nullptr. */
const For* loop_of(const Prefetch& f, const std::string& var) {
  for (const Stmt& l : f.loops)
    if (ends_with(l.as<For>()->name, "." + var)) return l.as<For>();
  return nullptr;
}

const Target kX86("x86-64-linux-sse41-avx-avx2-f16c-fma");

// Staged 16-bit rows (1024 elements = 32 lines per block), the next block's prefetched at the
// block loop, read by 8 tiles of 128 elements each.
struct Staged {
  ImageParam in{UInt(16), 2, "in"};
  Func out{"out"};
  static constexpr int kRow = 1024, kTiles = 8;
  Staged() {
    Var x("x"), tb("tb"), blk("blk");
    Func st("st");
    st(x, blk) = in(x, blk) + cast<uint16_t>(1);
    out(x, tb, blk) = cast<float>(st(x + (kRow / kTiles) * tb, blk));
    out.bound(x, 0, kRow / kTiles).bound(tb, 0, kTiles);
    st.compute_at(out, blk);
    out.prefetch(in, blk, blk, 1, PrefetchBoundStrategy::NonFaulting);
  }
};

/** The one prefetch of `s` lowered through the pass (spreading over `over`), or none. */
Prefetch mended(const Staged& s, const std::vector<std::vector<std::string>>& over) {
  Pipeline p(s.out);
  lower::mend_prefetches(p, kX86, over);
  const std::vector<Prefetch> f = prefetches_of(p, {s.in}, kX86);
  EXPECT_EQ(f.size(), 1u);
  return f.empty() ? Prefetch{} : f[0];
}

TEST(PrefetchLines, HalideStepsSixtyFourElementsWithoutThePass) {
  Staged s;
  const std::vector<Prefetch> f = prefetches_of(Pipeline(s.out), {s.in}, kX86);
  ASSERT_EQ(f.size(), 1u);
  // What the pass mends: 64 elements of 2 bytes, every other line.
  EXPECT_EQ(step_bytes(f[0]), 64 * 2);
}

TEST(PrefetchLines, StepsOneLineAtTheBlockLoop) {
  const Prefetch f = mended(Staged(), {});
  ASSERT_FALSE(f.loops.empty());
  EXPECT_EQ(step_bytes(f), 64);
  EXPECT_EQ(loop_of(f, "tb"), nullptr);
  // One line per iteration over one block's row.
  EXPECT_EQ(as_const_int(f.own()->extent).value_or(-1), Staged::kRow * 2 / 64);
}

TEST(PrefetchLines, SpreadsEachLineOnceOverTheTiles) {
  Staged s;
  const Prefetch f = mended(s, {{"tb"}});
  ASSERT_FALSE(f.loops.empty());
  EXPECT_EQ(step_bytes(f), 64);
  const For* tiles = loop_of(f, "tb");
  ASSERT_NE(tiles, nullptr);
  const For* own = f.own();
  std::multiset<int64_t> lines;
  for (int tb = 0; tb < Staged::kTiles; ++tb) {
    const Expr at = make_const(Int(32), tb);
    const auto lo = as_const_int(simplify(substitute(tiles->name, at, own->min)));
    const auto n = as_const_int(simplify(substitute(tiles->name, at, own->extent)));
    ASSERT_TRUE(lo && n) << own->min << " " << own->extent;
    for (int64_t v = *lo; v < *lo + *n; ++v) lines.insert(v);
  }
  const int want = Staged::kRow * 2 / 64;
  ASSERT_EQ((int)lines.size(), want);
  for (int v = 0; v < want; ++v) EXPECT_EQ(lines.count(v), 1u) << v;

  // The prefetches change nothing the pipeline computes.
  Buffer<uint16_t> in(Staged::kRow, 3);
  for (int y = 0; y < in.height(); ++y)
    for (int x = 0; x < in.width(); ++x) in(x, y) = (uint16_t)(x * 7 + y * 131);
  s.in.set(in);
  Pipeline p(s.out);
  lower::mend_prefetches(p, lower::host_target(), {{"tb"}});
  Buffer<float> out = p.realize({Staged::kRow / Staged::kTiles, Staged::kTiles, in.height()},
                                lower::host_target());
  for (int blk = 0; blk < out.dim(2).extent(); ++blk)
    for (int tb = 0; tb < Staged::kTiles; ++tb)
      for (int x = 0; x < out.dim(0).extent(); ++x)
        ASSERT_EQ(out(x, tb, blk), (float)(uint16_t)(in(x + out.dim(0).extent() * tb, blk) + 1));
}

// Staged 16-bit blocks of kRows rows (a 2-D region: Halide's prefetch nest is a loop over rows
// around one over lines), the next block's prefetched at the block loop, read by kTiles tiles
// that each walk the block's rows.
struct StagedRows {
  ImageParam in{UInt(16), 3, "in"};
  Func out{"out"};
  static constexpr int kRow = 256, kRows = 6, kTiles = 4, kBlocks = 3;
  StagedRows() {
    Var x("x"), r("r"), tb("tb"), blk("blk");
    Func st("st");
    st(x, r, blk) = in(x, r, blk) + cast<uint16_t>(1);
    out(x, r, tb, blk) = cast<float>(st(x + (kRow / kTiles) * tb, r, blk));
    out.bound(x, 0, kRow / kTiles).bound(r, 0, kRows).bound(tb, 0, kTiles);
    st.compute_at(out, blk);
    out.prefetch(in, blk, blk, 1, PrefetchBoundStrategy::NonFaulting);
    // An input of known shape, so the lowered offsets are numbers, whose rows are twice what a
    // block reads: the region is rows apart, not one run.
    in.dim(0).set_bounds(0, 2 * kRow).set_stride(1);
    in.dim(1).set_bounds(0, kRows).set_stride(2 * kRow);
    in.dim(2).set_bounds(0, kBlocks).set_stride(2 * kRow * kRows);
    out.output_buffer().dim(3).set_bounds(0, kBlocks);
  }
};

/** The value of `e` at one iteration: the enclosing lets substituted (innermost first), then the
 * loop vars `at` gives. */
std::optional<int64_t> value_at(Expr e, const Prefetch& f, const std::map<std::string, Expr>& at) {
  for (auto l = f.lets.rbegin(); l != f.lets.rend(); ++l)
    e = substitute(l->as<LetStmt>()->name, l->as<LetStmt>()->value, e);
  for (const auto& [name, v] : at) e = substitute(name, v, e);
  return as_const_int(simplify(e));
}

/** Every element offset prefetch `f` issues with its enclosing loops other than its own set as
 * `outer` (the loops outside those at their minimum, 0 here), its own loop walked whole. */
void offsets_of(const Prefetch& f, size_t depth, std::map<std::string, Expr> at, std::multiset<int64_t>& out) {
  const For* loop = f.loops[depth].as<For>();
  const auto lo = value_at(loop->min, f, at), n = value_at(loop->extent, f, at);
  ASSERT_TRUE(lo && n) << loop->name << ": " << loop->min << ", " << loop->extent;
  for (int64_t v = *lo; v < *lo + *n; ++v) {
    at[loop->name] = make_const(Int(32), v);
    if (depth + 1 == f.loops.size()) {
      const auto o = value_at(f.offset, f, at);
      ASSERT_TRUE(o.has_value()) << f.offset << [&] {
        std::string names;
        for (const Stmt& l : f.lets) names += " " + l.as<LetStmt>()->name;
        for (const auto& [n, v] : at) names += " " + n;
        return names;
      }();
      out.insert(*o);
    } else {
      offsets_of(f, depth + 1, at, out);
    }
  }
}

/** The offsets prefetch `f` issues in the block loop's first iteration (with each loop inside
 * it walked whole), or none when `f` is not inside a block loop. */
std::multiset<int64_t> first_block_offsets(const Prefetch& f) {
  std::multiset<int64_t> out;
  for (size_t i = 0; i < f.loops.size(); ++i) {
    const For* loop = f.loops[i].as<For>();
    if (loop->name.find(".blk") == std::string::npos) continue;
    const std::optional<int64_t> lo = value_at(loop->min, f, {});
    EXPECT_TRUE(lo.has_value()) << loop->min;
    if (lo && i + 1 < f.loops.size()) offsets_of(f, i + 1, {{loop->name, make_const(Int(32), *lo)}}, out);
    break;
  }
  return out;
}

TEST(PrefetchLines, SpreadsANestOverTilesAndRowsEachLineOnce) {
  StagedRows s;
  Pipeline p(s.out);
  lower::mend_prefetches(p, kX86, {});
  const std::vector<Prefetch> whole = prefetches_of(p, {s.in}, kX86);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(step_bytes(whole[0]), 64);
  ASSERT_TRUE(ends_with(whole[0].loops.back().as<For>()->name, "prefetch_split_in.0") &&
              whole[0].loops.size() >= 3 &&
              whole[0].loops[whole[0].loops.size() - 2].as<For>()->name.rfind("prefetch_reduce_", 0) == 0)
      << "a nest: a loop over rows around one over lines";
  const std::multiset<int64_t> want = first_block_offsets(whole[0]);
  // One block's rows: kRows rows of kRow 16-bit elements, a line every 32 elements.
  ASSERT_EQ((int)want.size(), StagedRows::kRows * StagedRows::kRow * 2 / 64);
  ASSERT_EQ((int)std::set<int64_t>(want.begin(), want.end()).size(), (int)want.size());

  // Spread over tiles and rows: inside both loops, and together each line once. An alternative
  // whose loops are not there ("nope") is passed over.
  Pipeline q(s.out);
  lower::mend_prefetches(q, kX86, {{"nope"}, {"tb", "r"}});
  const std::vector<Prefetch> spread = prefetches_of(q, {s.in}, kX86);
  ASSERT_EQ(spread.size(), 1u);
  EXPECT_EQ(step_bytes(spread[0]), 64);
  EXPECT_NE(loop_of(spread[0], "tb"), nullptr);
  EXPECT_NE(loop_of(spread[0], "r"), nullptr);
  EXPECT_EQ(first_block_offsets(spread[0]), want);

  // Over tiles alone where no rows loop is below them: the tiles' iterations take the shares.
  Pipeline t(s.out);
  lower::mend_prefetches(t, kX86, {{"tb", "nope"}});
  const std::vector<Prefetch> tiles = prefetches_of(t, {s.in}, kX86);
  ASSERT_EQ(tiles.size(), 1u);
  EXPECT_NE(loop_of(tiles[0], "tb"), nullptr);
  EXPECT_EQ(loop_of(tiles[0], "r"), nullptr);
  EXPECT_EQ(first_block_offsets(tiles[0]), want);

  // The prefetches change nothing the pipeline computes.
  Buffer<uint16_t> in(2 * StagedRows::kRow, StagedRows::kRows, StagedRows::kBlocks);
  for (int b = 0; b < StagedRows::kBlocks; ++b)
    for (int y = 0; y < StagedRows::kRows; ++y)
      for (int x = 0; x < 2 * StagedRows::kRow; ++x) in(x, y, b) = (uint16_t)(x * 7 + y * 131 + b * 1009);
  s.in.set(in);
  Pipeline run(s.out);
  lower::mend_prefetches(run, lower::host_target(), {{"tb", "r"}});
  const int w = StagedRows::kRow / StagedRows::kTiles;
  Buffer<float> out = run.realize({w, StagedRows::kRows, StagedRows::kTiles, StagedRows::kBlocks}, lower::host_target());
  for (int b = 0; b < StagedRows::kBlocks; ++b)
    for (int tb = 0; tb < StagedRows::kTiles; ++tb)
      for (int y = 0; y < StagedRows::kRows; ++y)
        for (int x = 0; x < w; ++x)
          ASSERT_EQ(out(x, y, tb, b), (float)(uint16_t)(in(x + w * tb, y, b) + 1));
}

// dw_tiled's bf16 tiles staged per input block prefetch the next block's x over the block's
// tiles on a Zen 4 target where x's rows come from the L3 (beyond the L2); x within the L2, and
// Sapphire Rapids targets (whose L1 the prefetch evicted), not at all. On a host with the
// feature, the prefetching kernel also runs against the float64 reference.
const Target kZen4("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_zen4");

/** A pointwise bf16 dW case whose x (6HD, 2 bytes an element) takes at least `bytes`. */
test::Case pointwise_of(int64_t bytes) {
  const int64_t slice = 2 * 32 * 32 * 64 * 2;  // N * H * W * Cin * 2 bytes per depth slice
  const int64_t depth = std::max<int64_t>(1, (bytes + slice - 1) / slice);
  return {"pointwise", 2, 64, 64, 1, {depth, 32, 32}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
}

TEST(PrefetchLines, DwBlockTilesSpreadTheNextBlockFromTheL3OnZen4) {
  const sched::Machine m = sched::Machine::of(kZen4);
  if (2 * m.l2 > m.l3) GTEST_SKIP() << "this host's L3 share (" << m.l3 << " bytes) is under twice its L2";
  const std::string v = "nt=8,kwt=1,ch=1,parts=2,pair=2";
  const test::Case c = pointwise_of(2 * m.l2);
  const Problem p = test::dw_problem(c, DType::kBFloat16);
  const lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", v}, 2, kZen4), 2, kZen4);
  ASSERT_NE(l.schedule_detail.find("next block of x prefetched"), std::string::npos) << l.schedule_detail;
  const std::vector<Prefetch> f = prefetches_of(l.pipeline, l.args, l.target);
  ASSERT_FALSE(f.empty());
  for (const Prefetch& one : f) {
    EXPECT_EQ(step_bytes(one), 64);
    EXPECT_NE(loop_of(one, "tb"), nullptr);
  }
  const Target host = lower::host_target();
  if (host.has_feature(Target::AVX512_Zen4)) {
    const lower::Lowered h = lower::lower(p, lower::select(p, {"dw_tiled", v}, 2, host), 2, host);
    ASSERT_NE(h.schedule_detail.find("next block of x prefetched"), std::string::npos) << h.schedule_detail;
    test::check_bf16_dw(c, p, h.pipeline, h.args, host, 31);
  }

  const test::Case small = pointwise_of(m.l2 / 2);
  const Problem q = test::dw_problem(small, DType::kBFloat16);
  const lower::Lowered in_l2 = lower::lower(q, lower::select(q, {"dw_tiled", v}, 2, kZen4), 2, kZen4);
  EXPECT_EQ(in_l2.schedule_detail.find("prefetched"), std::string::npos) << in_l2.schedule_detail;

  const Target spr("x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_cannonlake-avx512_sapphirerapids");
  const lower::Lowered s = lower::lower(p, lower::select(p, {"dw_tiled", v}, 2, spr), 2, spr);
  EXPECT_EQ(s.schedule_detail.find("prefetched"), std::string::npos) << s.schedule_detail;
  EXPECT_TRUE(prefetches_of(s.pipeline, s.args, s.target).empty());
}

// dw_tiled's staging-bound chunks (the seed's 16 channels and strides of 2; its batch and depth
// scaled down) prefetch the next chunk's x on a Zen 4 target, spread over the chunk's tiles and
// each tile's rows: every prefetch sits inside both loops. (Variants.DwTiledPrefetchedChunks
// runs such kernels against the reference on a host with the feature.)
TEST(PrefetchLines, DwChunksSpreadOverTilesAndRowsOnZen4) {
  const test::Case seed{"seed_scaled", 2, 16, 16, 1, {4, 72, 72}, {2, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 1, 0, 1}};
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    const Problem p = test::dw_problem(seed, dtype);
    const lower::Lowered l = lower::lower(p, lower::select(p, {"dw_tiled", ""}, 1, kZen4), 1, kZen4);
    ASSERT_NE(l.schedule_detail.find("next chunk of x prefetched"), std::string::npos) << l.schedule_detail;
    const std::vector<Prefetch> f = prefetches_of(l.pipeline, l.args, l.target);
    ASSERT_FALSE(f.empty());
    for (const Prefetch& one : f) {
      EXPECT_EQ(step_bytes(one), 64);
      EXPECT_NE(loop_of(one, sched::kChunkTiles), nullptr);
      EXPECT_NE(loop_of(one, sched::kChunkRows), nullptr);
    }
  }
}

}  // namespace
}  // namespace tbex
