// partition_only (schedules/loops.h): the loops it does not keep are built whole, the Funcs and
// loops it keeps Halide partitions as before. Read off the lowered statement: a partitioned loop
// appears as several loops (its edges and its steady part), a whole one once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace
}  // namespace tbex::sched
