// Every tile variant the tiled schedules list for the tuner (schedule_candidates) computes the
// same result as a float64 loop over the definition (tests/cpp/reference.h), for dW, dX and the
// forward conv on a few problems: plain, odd channels with strides, and grouped.
//
// Inputs are multiples of 1/8 (exact in fp16 and fp32, exact fp32 partial sums), so every
// variant matches to the last bit; the checks allow 1e-6 relative (the fp32 summation bound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "lower/select.h"
#include "reference.h"
#include "schedules/registry.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::Case;
using test::geometry;
using test::x_dims;
using test::y_dims;
using test::w_dims;
using test::numel;
using test::para_for;
using test::count;
using test::decode;
using test::encode;
using test::expect_close;
using test::random_eighths;

// Two threads whatever the machine: dW's reduction-split variants exist only with several.
const int kThreadsSet = (set_num_threads(2), 2);

const Case kCases[] = {
    {"plain", 2, 32, 48, 1, {4, 6, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"odd_strided", 1, 20, 37, 1, {5, 7, 11}, {2, 3, 2}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1, 0, 2, 1}},
    {"grouped", 2, 48, 48, 3, {3, 4, 13}, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 1, 1}},
    // Depthwise (dw_diag / dx_diag): plain, and multiplier 2 with strides and odd sizes.
    {"depthwise", 2, 32, 32, 32, {3, 8, 12}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"depthwise_mult2", 1, 24, 48, 24, {4, 9, 11}, {2, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1, 1, 2, 0}},
};

std::vector<uint8_t> to_6hd(const std::vector<double>& v, const Dims5& d, DType t) {
  const auto b = encode(v, t);
  std::vector<uint8_t> out(count(shape_6hd(d)) * dtype_size(t));
  ncdhw_to_6hd(b.data(), out.data(), d, dtype_size(t));
  return out;
}

std::vector<uint8_t> to_fz3d(const std::vector<double>& v, const Dims5& d, int64_t groups, DType t) {
  const auto b = encode(v, t);
  std::vector<uint8_t> out(count(shape_fz3d(d, groups)) * dtype_size(t));
  oidhw_to_fz3d(b.data(), out.data(), d, groups, dtype_size(t));
  return out;
}

/** The dX problem of case `c` with `dtype` operands. */
Problem dx_problem(const Case& c, DType dtype) {
  const ConvGeometry g = geometry(c);
  return make_backprop_input_problem(shape_fz3d(w_dims(g), c.groups), dtype, shape_6hd(y_dims(g)),
                                     dtype, {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                     {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
}

/** Runs every variant of `schedule` for `p` on `inputs`, and `extra` (valid variants the
 * target does not offer as candidates; with `extra_only`, those alone); `unpack` turns the fp32
 * output into the reference's layout. Returns how many variants ran. */
template <class Unpack>
int check_variants(const Problem& p, const std::string& schedule,
                   const std::vector<const void*>& inputs, const std::vector<double>& ref,
                   Unpack&& unpack, const std::vector<std::string>& extra = {},
                   bool extra_only = false) {
  auto variants = extra_only ? std::vector<std::string>{} : schedule_candidates(p, schedule);
  for (const auto& v : extra)
    if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
  if (!extra_only)
    EXPECT_GE(variants.size(), 3u) << schedule << " lists too few variants for " << p.canonical();
  for (const auto& v : variants) {
    SCOPED_TRACE(schedule + " [" + v + "] " + p.canonical());
    auto k = compile(p, CompileOptions{schedule, v});
    EXPECT_EQ(k->schedule_name(), schedule);
    EXPECT_EQ(k->variant(), v);
    std::vector<float> out(count(p.output_shape()), -7.0f);
    k->run_dense(inputs, out.data());
    expect_close(unpack(out), ref, 1e-6);
  }
  return (int)variants.size();
}

class VariantTest : public ::testing::TestWithParam<std::tuple<int, DType>> {};

void check_dw(int ci, DType dtype, const std::string& schedule,
              const std::vector<std::string>& extra = {});
void check_dx(int ci, DType dtype, const std::string& schedule);
void check_dx_case(const Case& c, DType dtype, const std::string& schedule, uint32_t seed,
                   bool padding_zero, const std::vector<std::string>& extra = {},
                   bool extra_only = false);

TEST_P(VariantTest, DwTiledMatchesReference) {
  const auto& [ci, dtype] = GetParam();
  check_dw(ci, dtype, "dw_tiled");
}

/** The dW problem of case `c` with `dtype` operands, without data. */
Problem dw_problem(const Case& c, DType dtype = DType::kFloat32) {
  const ConvGeometry g = geometry(c);
  return make_backprop_filter_problem(shape_6hd(x_dims(g)), dtype, shape_6hd(y_dims(g)), dtype,
                                      {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]},
                                      para_for(c, false));
}

/** The dW problem of kCases[ci]. */
Problem dw_problem_of(int ci, DType dtype = DType::kFloat32) { return dw_problem(kCases[ci], dtype); }

void check_dw_case(const Case& c, DType dtype, const std::string& schedule, uint32_t seed,
                   const std::vector<std::string>& extra = {}, bool extra_only = false) {
  const ConvGeometry g = geometry(c);
  auto x = random_eighths(numel(x_dims(g)), seed);
  auto dy = random_eighths(numel(y_dims(g)), 99 + seed);
  const auto x6 = to_6hd(x, x_dims(g), dtype), y6 = to_6hd(dy, y_dims(g), dtype);
  const Dims5 wd = w_dims(g);
  check_variants(dw_problem(c, dtype), schedule, {x6.data(), y6.data()}, test::ref_dw(g, x, dy),
                 [&](const std::vector<float>& out) {
                   std::vector<float> w(numel(wd));
                   oidhw_from_fz3d(out.data(), w.data(), wd, c.groups, 4);
                   return std::vector<double>(w.begin(), w.end());
                 },
                 extra, extra_only);
}

void check_dw(int ci, DType dtype, const std::string& schedule, const std::vector<std::string>& extra) {
  check_dw_case(kCases[ci], dtype, schedule, 1 + ci, extra);
}

// fp32 x read in place (x=1) or staged (x=2) where both apply: "plain" and "grouped" leave every
// tap reading their pads out, so x read in place has no padding select; both forms, unsplit and
// split by depth, with the other tiles. x=1 with depth blocks, x beyond 2, and x where it does
// not apply (16-bit x) are refused.
TEST(Variants, DwTiledXInPlaceMatchesReference) {
  for (int ci : {0, 2}) {
    const auto keys = schedule_candidates(dw_problem_of(ci), "dw_tiled");
    for (const char* form : {",x=1", ",x=2"})
      EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [&](const std::string& k) {
        return k.find(form) != std::string::npos;
      })) << kCases[ci].name << form;
    check_dw(ci, DType::kFloat32, "dw_tiled",
             {"nt=4,kwt=3,ch=1,parts=2,x=1", "nt=8,kwt=1,ch=2,parts=1,x=1", "nt=4,kwt=3,ch=2,parts=1,x=2"});
  }
  const Problem plain = dw_problem_of(0);
  const auto refused = [&](const Problem& p, const char* v, const char* rule) {
    try {
      compile(p, CompileOptions{"dw_tiled", v});
      ADD_FAILURE() << v << " accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  refused(plain, "nt=4,kwt=3,ch=1,parts=1,db=4,x=1", "db must be 1");
  refused(plain, "x=3", "x must be 1 (read in place) or 2 (staged)");
  refused(dw_problem_of(0, DType::kFloat16), "x=1", "x must be 1 (read in place) or 2 (staged)");
}

// The seed's dW (16 channels, strides of 2; batch and depth scaled down) staged chunk by chunk:
// where the host is a Zen 4 target its chunks prefetch the next chunk's x (spread over the tiles
// and their rows: PrefetchLines.DwChunksSpreadOverTilesAndRowsOnZen4), fp32 and fp16, the own
// choice and a split and an unsplit tile.
TEST(Variants, DwTiledPrefetchedChunks) {
  const Case seed{"seed_scaled", 2, 16, 16, 1, {4, 72, 72}, {2, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 1, 0, 1}};
  const bool prefetches = lower::host_target().has_feature(Halide::Target::AVX512_Zen4);
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    const std::string d = sched::dw_tiled_schedule()->describe(dw_problem(seed, dtype), {lower::host_target(), 1, ""});
    EXPECT_EQ(d.find("next chunk of x prefetched") != std::string::npos, prefetches) << d;
    check_dw_case(seed, dtype, "dw_tiled", 66, {"", "nt=8,kwt=3,ch=6,parts=2", "nt=4,kwt=3,ch=12,parts=1"}, true);
  }
}

// x staged once for several output depth slices (db): whole depth, part of it, and a split by
// depth whose last part is shorter than a block ("odd_strided": depth 5 in 3 parts of 2, 2, 1).
TEST(Variants, DwTiledDepthBlocksMatchReference) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    // "plain": batch 2, output depth 4, Kd 3.
    check_dw(0, t, "dw_tiled",
             {"nt=4,kwt=3,ch=1,parts=1,db=4", "nt=8,kwt=1,ch=2,parts=1,db=2",
              "nt=4,kwt=3,ch=1,parts=2,db=2"});
  }
  // "odd_strided": batch 1, output depth 5, Kd 2 over stride 1. Its fp32 x is read in place
  // where the host is not a Zen 4 (x_in_place_applies), so there are no staged slices to share:
  // f16, staged everywhere.
  check_dw(1, DType::kFloat16, "dw_tiled",
           {"nt=1,kwt=1,ch=1,parts=1,db=5", "nt=1,kwt=2,ch=1,parts=3,db=2"});
  // The candidates hold both choices where the form applies (x staged: f16), and a db the depth
  // does not divide is refused naming the rule.
  const Problem plain = dw_problem_of(0);
  const auto keys = schedule_candidates(dw_problem_of(0, DType::kFloat16), "dw_tiled");
  EXPECT_TRUE(std::any_of(keys.begin(), keys.end(),
                          [](const std::string& k) { return k.find(",db=1") != std::string::npos; }));
  EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [](const std::string& k) {
    return k.find(",db=2") != std::string::npos || k.find(",db=4") != std::string::npos;
  }));
  try {
    compile(plain, CompileOptions{"dw_tiled", "nt=4,kwt=3,ch=1,parts=1,db=3"});
    ADD_FAILURE() << "db=3 accepted for output depth 4";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("db must be 1, or divide the output depth a part walks (4)"),
              std::string::npos)
        << e.what();
  }
  // Grouped has Kd 1: nothing overlaps, so only db=1.
  EXPECT_THROW(compile(dw_problem_of(2), CompileOptions{"dw_tiled", "db=3"}), UserError);
}

TEST_P(VariantTest, DxTiledMatchesReference) {
  const auto& [ci, dtype] = GetParam();
  const Case& c = kCases[ci];
  // Reduction chunks by kernel rows and by depth slices (offered only where a block's weights
  // exceed the L1; valid on every unit-stride case): qt=2 leaves a ragged tile on odd rows.
  // Groups of rows (the blocks inside each group), chunked and not: 4 rows leave a shorter
  // last group on the plain case's 6.
  std::vector<std::string> chunks;
  if (c.s[0] * c.s[1] * c.s[2] == 1)
    chunks = {"qt=2,ct=1,kwt=1,kt=" + std::to_string(c.k[2]),
              "qt=3,ct=1,kwt=" + std::to_string(c.k[2]) + ",kt=" + std::to_string(c.k[1] * c.k[2]),
              "qt=2,ct=1,kwt=1,kt=" + std::to_string(c.k[2]) + ",hb=4",
              "qt=3,ct=1,kwt=1,kt=" + std::to_string(c.k[0] * c.k[1] * c.k[2]) + ",hb=2"};
  check_dx_case(c, dtype, "dx_tiled", 7 + ci, false, chunks);
}

/** Every variant of dX `schedule` on case `c` against the float64 reference; padding_zero: the
 * 6HD padding lanes must be 0 (packing the result again reproduces it). */
void check_dx_case(const Case& c, DType dtype, const std::string& schedule, uint32_t seed,
                   bool padding_zero, const std::vector<std::string>& extra, bool extra_only) {
  const ConvGeometry g = geometry(c);
  auto w = random_eighths(numel(w_dims(g)), seed);
  auto dy = random_eighths(numel(y_dims(g)), 300 + seed);
  const auto fz = to_fz3d(w, w_dims(g), c.groups, dtype), y6 = to_6hd(dy, y_dims(g), dtype);
  const Problem p = dx_problem(c, dtype);
  const Dims5 xd = x_dims(g);
  check_variants(p, schedule, {fz.data(), y6.data()}, test::ref_dx(g, w, dy),
                 [&](const std::vector<float>& out) {
                   std::vector<float> dx(numel(xd));
                   ncdhw_from_6hd(out.data(), dx.data(), xd, 4);
                   if (padding_zero) {
                     std::vector<float> again(out.size());
                     ncdhw_to_6hd(dx.data(), again.data(), xd, 4);
                     EXPECT_EQ(again, out) << "padding lanes not zero";
                   }
                   return std::vector<double>(dx.begin(), dx.end());
                 },
                 extra, extra_only);
}

// 16-bit dy at unit strides: dx_tiled's fp32 tiles read its fp32 conversion (converted by rows,
// or whole where the depth or height is dilated) in dy's own frame, through the padding select,
// as they read fp32 dy in place: a row's edge tiles leave out their taps into the width pads
// (rows of more than 2 tiles partitioned, shorter ones unrolled; chunked rows keep the select).
// Where a depth pad tap stays in the reduction (dilated depth: slice 1 of 3 reads dy through
// neither tap) rows of more than 2 tiles read a zero-padded copy instead. Rows of 2 to 5 tiles,
// a pad wider than a tile, one-sided pads, dilations, groups, chunks, fp16 and bf16 dy.
TEST(Variants, DxTiledReadsSixteenBitDyUnpadded) {
  struct Form {
    Case c;
    std::string variant;
    std::string read;
  };
  const std::string apart = "read unpadded (edge tiles apart), ";
  const bool avx512 = lower::host_target().has_feature(Halide::Target::AVX512);
  const Form forms[] = {
      {{"five_tiles", 1, 16, 32, 1, {3, 4, 13}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=3,kt=27", "dy converted by rows, " + apart},
      {{"two_tiles", 1, 16, 16, 1, {3, 3, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=1,kt=27", "row of 2 tiles unrolled, dy converted by rows, read unpadded, "},
      {{"dilated", 1, 16, 16, 1, {4, 5, 12}, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2, 2, 2, 2}},
       "qt=3,ct=1,kwt=3,kt=27", "dy converted whole, " + apart},
      {{"wider_than_tile", 1, 16, 16, 1, {2, 3, 11}, {1, 2, 7}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 0, 3, 3}},
       "qt=2,ct=1,kwt=1,kt=14", "dy converted by rows, " + apart},
      {{"one_side", 2, 16, 16, 1, {3, 4, 9}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0, 2, 2, 0}},
       "qt=3,ct=1,kwt=3,kt=18", "dy converted by rows, " + apart},
      {{"grouped", 1, 32, 32, 2, {3, 4, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=1,kt=27", "dy converted by rows, " + apart},
      {{"chunked", 1, 16, 32, 1, {3, 4, 13}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=1,kt=3", "dy converted by rows, read unpadded, "},
      {{"depth_pad_kept", 1, 16, 32, 1, {3, 4, 12}, {2, 3, 3}, {1, 1, 1}, {3, 1, 1}, {0, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=3,kt=18", "dy staged whole, "},
      {{"depth_pad_kept_peeled", 1, 16, 32, 1, {3, 4, 12}, {2, 3, 3}, {1, 1, 1}, {3, 1, 1}, {0, 1, 1, 1, 1, 1}},
       // The row's 3 taps in one tile hold 12 + 3 x 2 operand registers on AVX2: too many.
       avx512 ? "qt=6,ct=1,kwt=3,kt=18" : "qt=6,ct=1,kwt=1,kt=18",
       "row of 2 tiles unrolled, dy converted whole, read unpadded, "},
  };
  const auto* s = sched::dx_tiled_schedule();
  for (const Form& f : forms)
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      const std::string v = f.variant + (dtype == DType::kBFloat16 ? ",pair=1" : "");
      const std::string d = s->describe(dx_problem(f.c, dtype), {lower::host_target(), 2, v});
      EXPECT_NE(d.find(f.read), std::string::npos) << f.c.name << " " << d;
      check_dx_case(f.c, dtype, "dx_tiled", 40, false, {v}, true);
    }
}

// fp32 dy read in place with more than one 6HD block of output channels per group: the tiles
// walk the channels inside their blocks (affine broadcast addresses). Ragged rows (13 = 2 x 6 +
// 1), row taps, chunks, 3 blocks, groups of 2 blocks; one block per group (16) and staged dy
// (strides) keep the one loop over the channels.
TEST(Variants, DxTiledWalksFp32DyLanesWithinBlocks) {
  struct Form {
    Case c;
    std::string variant;
    bool within;
  };
  const Form forms[] = {
      {{"ragged", 1, 16, 32, 1, {3, 4, 13}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=6,ct=1,kwt=1,kt=27", true},
      {{"row_taps", 1, 32, 48, 1, {3, 3, 12}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=4,ct=1,kwt=3,kt=27", true},
      {{"chunked", 1, 32, 32, 1, {3, 4, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=2,ct=2,kwt=1,kt=3", true},
      {{"grouped", 2, 32, 64, 2, {2, 3, 9}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=1,kt=18", true},
      {{"one_block", 1, 16, 16, 1, {3, 3, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=3,ct=1,kwt=1,kt=27", false},
      {{"strided", 1, 16, 32, 1, {4, 5, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
       "qt=3,ct=1", false},
  };
  const auto* s = sched::dx_tiled_schedule();
  for (const Form& f : forms) {
    const std::string d = s->describe(dx_problem(f.c, DType::kFloat32), {lower::host_target(), 2, f.variant});
    EXPECT_EQ(d.find("output channels walked within their blocks") != std::string::npos, f.within)
        << f.c.name << " " << d;
    check_dx_case(f.c, DType::kFloat32, "dx_tiled", 50, false, {f.variant}, true);
  }
}

void check_dx(int ci, DType dtype, const std::string& schedule) {
  check_dx_case(kCases[ci], dtype, schedule, 7 + ci, false);
}

TEST_P(VariantTest, FwdTiledMatchesReference) {
  const auto& [ci, dtype] = GetParam();
  const Case& c = kCases[ci];
  const ConvGeometry g = geometry(c);
  auto x = random_eighths(numel(x_dims(g)), 21 + ci);
  auto w = random_eighths(numel(w_dims(g)), 500 + ci);
  // The filter operand is the FRACTAL_Z_3D of the per-group transposed weight T [Cin, Cout/g, K].
  const int64_t cin_pg = g.cin_pg(), cout_pg = g.cout_pg();
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  std::vector<double> t(w.size());
  for (int64_t gg = 0; gg < g.groups; ++gg)
    for (int64_t o = 0; o < cout_pg; ++o)
      for (int64_t i = 0; i < cin_pg; ++i)
        for (int64_t k = 0; k < kvol; ++k)
          t[((gg * cin_pg + i) * cout_pg + o) * kvol + k] = w[((gg * cout_pg + o) * cin_pg + i) * kvol + k];
  const Dims5 td{g.cin, cout_pg, g.kernel[0], g.kernel[1], g.kernel[2]};
  const auto x6 = to_6hd(x, x_dims(g), dtype), fz = to_fz3d(t, td, g.groups, dtype);
  Problem p = make_forward_problem(g, dtype, DType::kFloat32);
  const Dims5 yd = y_dims(g);
  check_variants(p, "fwd_tiled", {x6.data(), fz.data()}, test::ref_fwd(g, x, w),
                 [&](const std::vector<float>& out) {
                   std::vector<float> y(numel(yd));
                   ncdhw_from_6hd(out.data(), y.data(), yd, 4);
                   return std::vector<double>(y.begin(), y.end());
                 });
}

// dx_tiled's row taps: a unit-stride case lists its own tile, then (where the tile fits every kw
// tap per step) the same tile with the other choice, one tap at a time where the own takes all
// (both checked against the reference by DxTiledMatchesReference), and a row-taps tile; a
// strided one has no kwt key, and kwt must be 1 or the row's taps.
TEST(Variants, DxTiledRowTaps) {
  const Problem plain = dx_problem(kCases[0], DType::kFloat32);
  const Problem strided = dx_problem(kCases[1], DType::kFloat32);
  const auto keys = schedule_candidates(plain, "dx_tiled");
  ASSERT_GE(keys.size(), 3u);
  EXPECT_EQ(keys[0], "");  // the own choice
  EXPECT_NE(keys[1].find(",kwt=1,"), std::string::npos) << keys[1];
  // Which tiles can hold every tap's weight rows depends on the target's registers: compile
  // the row-taps candidate this machine offers, not one fixed tile.
  const auto row_taps = std::find_if(keys.begin() + 2, keys.end(), [](const std::string& k) {
    return k.find(",kwt=3") != std::string::npos;
  });
  ASSERT_NE(row_taps, keys.end());
  for (const auto& k : schedule_candidates(strided, "dx_tiled"))
    EXPECT_EQ(k.find("kwt"), std::string::npos) << k;
  for (const char* v : {"qt=4,ct=2,kwt=2", "qt=4,ct=2,kwt=0"})
    EXPECT_THROW(compile(plain, CompileOptions{"dx_tiled", v}), UserError) << v;
  EXPECT_THROW(compile(strided, CompileOptions{"dx_tiled", "qt=4,ct=1,kwt=3"}), UserError);
  EXPECT_EQ(compile(plain, CompileOptions{"dx_tiled", *row_taps})->variant(), *row_taps);
}

// dx_tiled's reduction chunks: a unit-stride case whose weights exceed the L1 (48 output
// channels x 27 taps x 64 bytes per block) chunks by default and lists the unchunked tile too;
// kt must be a kernel row's, a depth slice's or all taps; a strided case has no kt key.
TEST(Variants, DxTiledChunks) {
  const Problem plain = dx_problem(kCases[0], DType::kFloat32);
  const Problem strided = dx_problem(kCases[1], DType::kFloat32);
  const auto keys = schedule_candidates(plain, "dx_tiled");
  const auto has = [&](const char* part) {
    return std::count_if(keys.begin(), keys.end(), [&](const std::string& k) {
      return k.find(part) != std::string::npos;
    });
  };
  EXPECT_GE(has(",kt=27"), 1) << "the unchunked tile";
  EXPECT_GE(has(",kt=3") + has(",kt=9"), 1) << "chunked tiles";
  for (const auto& k : schedule_candidates(strided, "dx_tiled"))
    EXPECT_EQ(k.find("kt="), std::string::npos) << k;
  for (const char* v : {"qt=2,ct=1,kwt=1,kt=4", "qt=2,ct=1,kwt=1,kt=0", "qt=2,ct=1,kwt=1,kt=54"})
    EXPECT_THROW(compile(plain, CompileOptions{"dx_tiled", v}), UserError) << v;
  EXPECT_THROW(compile(strided, CompileOptions{"dx_tiled", "qt=2,ct=1,kt=3"}), UserError);
  try {
    compile(plain, CompileOptions{"dx_tiled", "qt=2,ct=1,kwt=1,kt=4"});
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("kt must be the taps of a kernel row (3)"), std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, VariantTest,
                         ::testing::Values(std::make_tuple(0, DType::kFloat32),
                                           std::make_tuple(0, DType::kFloat16),
                                           std::make_tuple(1, DType::kFloat32),
                                           std::make_tuple(2, DType::kFloat16)),
                         [](const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
                           return std::string(kCases[std::get<0>(info.param)].name) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

// dx_cout_lanes (few input channels: output channels in the lanes), every variant, fp32 and bf16,
// on a scaled stem (strided, asymmetric pads) and a grouped case with dilation.
TEST(Variants, DxCoutLanesMatchesReference) {
  const Case few[] = {
      {"stem", 1, 3, 32, 1, {3, 9, 13}, {2, 5, 7}, {1, 2, 2}, {1, 1, 1}, {1, 0, 2, 3, 3, 2}},
      {"grouped_dilated", 2, 4, 32, 2, {3, 6, 9}, {1, 3, 3}, {1, 1, 2}, {1, 2, 1}, {0, 0, 2, 1, 1, 1}},
  };
  for (const Case& c : few)
    for (DType dtype : {DType::kFloat32, DType::kBFloat16})
      // A tile one position wider than the registers hold is a candidate only with AVX-512;
      // it computes the same sums everywhere.
      check_dx_case(c, dtype, "dx_cout_lanes", 17, true, {"qt=3,ord=2", "qt=3,ord=1"});
}

// dx_w_lanes (few input channels: positions along w in the lanes), every variant, fp32 and bf16:
// a scaled stem (3 valid lanes, 7x7 taps, stride 2) and a grouped case with dilation (two groups
// of 3 input channels in one block), with rows of 41 and 37 positions, so that the phase rows
// (21 / 20 and 19 / 18 positions) are 3 x 8 or 2 x 16 lanes: tiles of 1 and 2 vectors leave a
// ragged last vector (computed past the row's end, not gathered), and 2 a shorter last tile of
// 1 vector, which the loops peel off (AVX2). A row of 75 (phase rows of 38 / 37: 5 vectors of 8,
// the last ragged) runs tiles of 2 in a loop before its peeled last tile of 1 (qv=2), and tiles
// of 3 or 4 before one of 2 or 1 (the own tile and the candidates).
// (The shorter rows of the kernel tests hold one vector: one tile, no variants.)
TEST(Variants, DxWLanesMatchesReference) {
  const Case few[] = {
      {"stem_row41", 1, 3, 64, 1, {3, 5, 41}, {3, 7, 7}, {1, 2, 2}, {1, 1, 1}, {1, 1, 3, 3, 3, 3}},
      {"stem_row75", 1, 3, 64, 1, {2, 3, 75}, {3, 7, 7}, {1, 2, 2}, {1, 1, 1}, {1, 1, 3, 3, 3, 3}},
      {"grouped_dilated_row37", 2, 6, 32, 2, {2, 4, 37}, {1, 3, 3}, {1, 1, 2}, {1, 2, 1}, {0, 0, 2, 1, 1, 1}},
  };
  for (const Case& c : few)
    for (DType dtype : {DType::kFloat32, DType::kBFloat16})
      check_dx_case(c, dtype, "dx_w_lanes", 19, true, {"qv=1", "qv=2"});
}

// dx_pointwise (1x1x1 dX as a plain GEMM), every variant, fp32 and bf16: ragged blocks (40
// input channels), two real groups, rows shorter than a tile.
TEST(Variants, DxPointwiseMatchesReference) {
  const Case pw[] = {
      {"pw_ragged", 2, 40, 24, 1, {3, 5, 6}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
      {"pw_grouped", 1, 32, 48, 2, {2, 4, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
      {"pw_wide", 1, 64, 32, 1, {2, 3, 29}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
  };
  for (const Case& c : pw)
    for (DType dtype : {DType::kFloat32, DType::kBFloat16})
      check_dx_case(c, dtype, "dx_pointwise", 23, true);
}

// dw_pointwise's register tiles whose channels do not divide the group's: the last tile of each
// group is shorter (guarded), alone or beside full ones, with one or several input blocks, a
// split reduction, groups and 16-bit inputs; and the tiles the schedule lists (AVX2: as many
// channels as 16 ymm hold, 6 of 64, with a shorter last tile).
TEST(Variants, DwPointwiseShortLastTiles) {
  const Case ragged{"pw_ragged", 2, 48, 40, 1, {3, 5, 6}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const Case grouped{"pw_grouped", 1, 32, 48, 2, {2, 4, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const Case wide{"pw_64", 1, 32, 64, 1, {2, 4, 7}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const auto* s = sched::dw_pointwise_schedule();
  // (A group's channels are its 16-lane blocks': 40 output channels are 48.)
  const std::string d = s->describe(dw_problem(ragged), {lower::host_target(), 2, "ct=1,nt=5,ch=1,parts=1"});
  EXPECT_NE(d.find("16c0 x 5n (the last of a group 3n), 30 tiles"), std::string::npos) << d;
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    check_dw_case(ragged, dtype, "dw_pointwise", 61,
                  {"ct=1,nt=5,ch=1,parts=1", "ct=3,nt=5,ch=5,parts=1", "ct=1,nt=7,ch=1,parts=2",
                   "ct=1,nt=40,ch=1,parts=1"},
                  true);
    check_dw_case(grouped, dtype, "dw_pointwise", 62, {"ct=1,nt=5,ch=2,parts=1", "ct=1,nt=7,ch=4,parts=1"}, true);
  }
  check_dw_case(wide, DType::kFloat32, "dw_pointwise", 63, {"ct=1,nt=6,ch=4,parts=1"});
  // At most the group's channels.
  EXPECT_THROW(compile(dw_problem(ragged), CompileOptions{"dw_pointwise", "ct=1,nt=49,ch=1,parts=1"}),
               UserError);
}

// dw_pointwise's 16-bit x read in place (x=1: each x vector converted as the tile loads it) or
// converted per chunk (x=2): both forms in the candidates, with split reductions, groups, a short
// last tile and several input blocks, fp16 and bf16; the key and its rule for fp32 x.
TEST(Variants, DwPointwiseXInPlaceMatchesReference) {
  const Case ragged{"pw_ragged", 2, 48, 40, 1, {3, 5, 6}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const Case grouped{"pw_grouped", 1, 32, 48, 2, {2, 4, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const auto keys = schedule_candidates(dw_problem(ragged, dtype), "dw_pointwise");
    for (const char* form : {",x=1", ",x=2"})
      EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [&](const std::string& k) {
        return k.find(form) != std::string::npos;
      })) << dtype_name(dtype) << form;
    check_dw_case(ragged, dtype, "dw_pointwise", 64,
                  {"ct=1,nt=5,ch=1,parts=1,x=1", "ct=3,nt=5,ch=5,parts=1,x=1", "ct=1,nt=7,ch=1,parts=2,x=1",
                   "ct=3,nt=16,ch=5,parts=2,x=2"});
    check_dw_case(grouped, dtype, "dw_pointwise", 65, {"ct=2,nt=8,ch=2,parts=1,x=1", "ct=1,nt=7,ch=4,parts=2,x=1"},
                  true);
    // The two forms sum the same products in the same order: the same bits.
    const Problem p = dw_problem(grouped, dtype);
    const ConvGeometry g = geometry(grouped);
    const auto x6 = to_6hd(random_eighths(numel(x_dims(g)), 7), x_dims(g), dtype);
    const auto y6 = to_6hd(random_eighths(numel(y_dims(g)), 8), y_dims(g), dtype);
    std::vector<std::vector<float>> outs;
    const std::pair<const char*, const char*> forms[] = {
        {"ct=2,nt=8,ch=2,parts=1,x=1", "x read in place"},
        {"ct=2,nt=8,ch=2,parts=1,x=2", "x and dy converted per chunk"}};
    for (const auto& [v, says] : forms) {
      const std::string d = sched::dw_pointwise_schedule()->describe(p, {lower::host_target(), 1, v});
      EXPECT_NE(d.find(says), std::string::npos) << d;
      outs.emplace_back(count(p.output_shape()));
      compile(p, CompileOptions{"dw_pointwise", v})->run_dense({x6.data(), y6.data()}, outs.back().data());
    }
    EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4)) << dtype_name(dtype);
  }
  for (const char* v : {"ct=1,nt=8,ch=1,parts=1,x=1", "ct=1,nt=8,ch=1,parts=1,x=2"}) {
    try {
      compile(dw_problem(ragged), CompileOptions{"dw_pointwise", v});
      ADD_FAILURE() << v << " accepted for fp32";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("x must be 1 (read in place) or 2 (converted per chunk), for 16-bit"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(compile(dw_problem(ragged, DType::kFloat16), CompileOptions{"dw_pointwise", "ct=1,nt=8,ch=1,parts=1,x=3"}),
               UserError);
}

TEST(Variants, DiagMatchesReference) {
  for (int ci : {3, 4})
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      check_dw(ci, t, "dw_diag");
      check_dx(ci, t, "dx_diag");
    }
}

TEST(Variants, BadVariantsAreUserErrors) {
  ParaDict para;
  para.strides = std::vector<int64_t>{1, 1, 1};
  para.pads = std::vector<int64_t>{0, 0, 0, 0, 0, 0};
  para.dilations = std::vector<int64_t>{1, 1, 1, 1, 1};
  Problem p = make_backprop_filter_problem({1, 3, 2, 6, 6, 16}, DType::kFloat32, {1, 1, 2, 4, 4, 16},
                                           DType::kFloat32, {32, 3, 32, 3, 3}, para);
  for (const char* v : {"nt=3", "nt=4,nt=4", "bogus=1", "nt=0", "nt", "kwt=2", "db=2"})
    EXPECT_THROW(compile(p, CompileOptions{"dw_tiled", v}), UserError) << v;
  EXPECT_THROW(compile(p, CompileOptions{"reference", "nt=4"}), UserError);
  EXPECT_THROW(compile(p, CompileOptions{"auto", "nt=4"}), UserError);
  EXPECT_NO_THROW(compile(p, CompileOptions{"dw_tiled", "nt=8,kwt=3,ch=2"}));
}

}  // namespace
}  // namespace tbex
