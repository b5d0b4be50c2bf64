// partition_only (schedules/loops.h): the loops it does not keep are built whole, the Funcs and
// loops it keeps Halide partitions as before. Read off the lowered statement: a partitioned loop
// appears as several loops (its edges and its steady part), a whole one once.
// register_tile's row taps: the update's loop order each RowTaps gives, and the same sums.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <string>
#include <vector>

#include "Halide.h"
#include "schedules/loops.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** A 1-D blur of a zero-padded input: its loop tests x against the input's bounds (`likely`),
 * which Halide partitions into the edge iterations and a steady loop without the tests. */
struct Blur {
  ImageParam in{Float(32), 1, "in"};
  Var x{"x"};
  Func padded{"padded"}, out{"out"};
  Blur() {
    Func edge = BoundaryConditions::constant_exterior(in, 0.0f, {{0, 100}});
    padded(x) = edge(x - 3) + edge(x + 3);
    out(x) = padded(x) + edge(x - 2);
    padded.compute_root();
    out.bound(x, 0, 100);
  }
  /** How many loops over `func`'s x the lowered statement holds. */
  int loops_of(const Func& func) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("tbex_loops_" + std::to_string(::getpid()) + ".stmt");
    Pipeline(out).compile_to_lowered_stmt(path.string(), {in}, StmtOutputFormat::Text,
                                          get_host_target());
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    std::filesystem::remove(path);
    const std::string text = s.str(), loop = "for (" + func.name() + ".s0.x";
    int n = 0;
    for (size_t at = text.find(loop); at != std::string::npos; at = text.find(loop, at + 1)) ++n;
    return n;
  }
};

TEST(PartitionOnly, HalidePartitionsBoundaryLoopsByDefault) {
  Blur b;
  EXPECT_GT(b.loops_of(b.out), 1);
  Blur c;
  EXPECT_GT(c.loops_of(c.padded), 1);
}

TEST(PartitionOnly, LoopsNotKeptAreBuiltWhole) {
  Blur b;
  partition_only(b.out, {}, {});
  EXPECT_EQ(b.loops_of(b.out), 1);
  Blur c;
  partition_only(c.out, {}, {});
  EXPECT_EQ(c.loops_of(c.padded), 1);
}

TEST(PartitionOnly, KeptFuncsAndLoopsArePartitioned) {
  Blur b;
  partition_only(b.out, {b.padded}, {});
  EXPECT_GT(b.loops_of(b.padded), 1);
  EXPECT_EQ(b.loops_of(b.out), 1);
  Blur c;
  partition_only(c.out, {}, {{Stage(c.out), c.x}});
  EXPECT_GT(c.loops_of(c.out), 1);
  EXPECT_EQ(c.loops_of(c.padded), 1);
}

/** register_tile's form: acc(c0, q, blk, row) sums in(q + kw, n, row) x w(c0, blk, kw, n) over
 * r = (n, kw), computed per row of out; 16 lanes x 4 positions x 2 blocks. Small integers:
 * every order gives the same sums exactly. */
struct Tile {
  Var c0{"c0"}, q{"q"}, blk{"blk"}, row{"row"};
  RDom r{0, 4, 0, 3, "r"};
  Func in{"in"}, w{"w"}, acc{"acc"}, out{"out"};
  static float in_at(int x, int n, int row) { return float((x * 3 + n * 5 + row) % 7 - 3); }
  static float w_at(int c, int b, int kw, int n) { return float((c + b * 2 + kw * 3 + n) % 5 - 2); }
  explicit Tile(RowTaps taps) {
    in(q, c0, row) = cast<float>((q * 3 + c0 * 5 + row) % 7 - 3);
    w(c0, blk, q, row) = cast<float>((c0 + blk * 2 + q * 3 + row) % 5 - 2);
    acc(c0, q, blk, row) = 0.0f;
    acc(c0, q, blk, row) += in(q + r.y, r.x, row) * w(c0, blk, r.y, r.x);
    out(c0, q, blk, row) = acc(c0, q, blk, row);
    out.bound(c0, 0, 16).bound(q, 0, 4).bound(blk, 0, 2).bound(row, 0, 3);
    in.compute_root();
    w.compute_root();
    register_tile(acc, out, row, c0, q, blk, {r.x, r.y}, false, taps);
  }
  /** The update's loops, innermost first, by name (r.x: n, r.y: kw). */
  std::vector<std::string> order() {
    std::vector<std::string> names;
    for (const auto& d : acc.update().get_schedule().dims())
      if (d.var != "__outermost") names.push_back(d.var);
    return names;
  }
};

TEST(RegisterTile, RowTapsSetTheUpdatesLoopOrder) {
  const auto order = [](RowTaps taps) { return Tile(taps).order(); };
  using V = std::vector<std::string>;
  // One tap per step: the tile, then n, kw.
  EXPECT_EQ(order(RowTaps::kNone), (V{"c0", "q", "blk", "r$x", "r$y", "row"}));
  // Each tap over the tile: kw just outside it.
  EXPECT_EQ(order(RowTaps::kTapsOuter), (V{"c0", "q", "blk", "r$y", "r$x", "row"}));
  // Every tap of a position before the next: kw inside the blocks and positions.
  EXPECT_EQ(order(RowTaps::kTapsInner), (V{"c0", "r$y", "blk", "q", "r$x", "row"}));
}

TEST(RegisterTile, EveryRowTapOrderGivesTheSameSums) {
  for (RowTaps taps : {RowTaps::kNone, RowTaps::kTapsOuter, RowTaps::kTapsInner}) {
    Tile t(taps);
    Buffer<float> got = t.out.realize({16, 4, 2, 3}, get_host_target());
    for (int row = 0; row < 3; ++row)
      for (int b = 0; b < 2; ++b)
        for (int q = 0; q < 4; ++q)
          for (int c = 0; c < 16; ++c) {
            float want = 0;
            for (int kw = 0; kw < 3; ++kw)
              for (int n = 0; n < 4; ++n) want += Tile::in_at(q + kw, n, row) * Tile::w_at(c, b, kw, n);
            ASSERT_EQ(got(c, q, b, row), want) << int(taps) << " " << c << "," << q << "," << b << "," << row;
          }
  }
}

}  // namespace
}  // namespace tbex::sched
