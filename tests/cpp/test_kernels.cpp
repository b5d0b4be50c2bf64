// Correctness of the compiled dW / dX kernels against a float64 loop over the definition, for
// every schedule in the registry, all input dtypes, groups (mag_factor > 1, depthwise), strides,
// dilations, asymmetric pads and pads larger than the kernel.
//
// Inputs are multiples of 1/8 in [-1, 1]: exact in fp16, bf16 and fp32, and every partial sum
// here is exact in fp32, so a correct kernel matches the reference to the last bit (the checks
// still allow 1e-6 relative, the fp32 summation-order bound of the issue).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "lower/select.h"
#include "reference.h"
#include "schedules/registry.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::Case;
using test::geometry;
using test::para_for;
using test::count;
using test::encode;
using test::expect_close;
using test::random_eighths;

// Two threads whatever the machine, so the multi-thread paths (tile groups, reduction split)
// are what these tests check.
const int kThreadsSet = (set_num_threads(2), 2);

const Case kCases[] = {
    {"plain", 2, 16, 16, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"odd_channels", 1, 20, 37, 1, {4, 5, 9}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 0, 2, 1}},
    {"strided", 2, 16, 32, 1, {7, 9, 11}, {3, 3, 3}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1, 1, 0, 2}},
    {"dilated", 1, 8, 24, 1, {7, 8, 9}, {3, 2, 3}, {1, 2, 1}, {2, 2, 3}, {2, 2, 1, 0, 3, 3}},
    {"grouped_mag4", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 0, 1}},
    {"grouped_multi_real_g", 1, 48, 48, 6, {3, 4, 5}, {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 0, 1, 1, 0}},
    {"depthwise", 2, 32, 32, 32, {4, 6, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"pads_beyond_kernel", 1, 16, 16, 1, {3, 4, 5}, {2, 2, 2}, {3, 2, 1}, {1, 1, 1}, {4, 3, 3, 5, 2, 3}},
    // One output tile: dW splits the reduction over batch (3 = 2 + 1, a tail) across threads.
    {"tiny_output_split", 3, 4, 4, 1, {3, 5, 6}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    {"tiny_output_split_depth", 1, 3, 5, 1, {7, 4, 5}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 0, 0, 0}},
    {"stride4_dx_phases", 1, 16, 16, 1, {9, 10, 11}, {3, 2, 5}, {4, 3, 4}, {1, 2, 1}, {1, 1, 0, 2, 2, 1}},
    // Few input channels (a stem): dW can put output channels in the vector lanes.
    {"few_cin3_stem", 2, 3, 64, 1, {4, 9, 10}, {2, 7, 7}, {1, 2, 2}, {1, 1, 1}, {1, 0, 3, 3, 3, 2}},
    {"few_cin5", 1, 5, 32, 1, {5, 6, 7}, {3, 2, 3}, {2, 1, 1}, {1, 2, 1}, {1, 1, 1, 0, 0, 2}},
    {"few_cin_grouped", 2, 6, 32, 2, {4, 5, 6}, {2, 3, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 0}},
    {"few_cin1_split", 2, 1, 16, 1, {3, 4, 5}, {1, 2, 5}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 1, 2, 2}},
    // Strides beyond the kernel (x read in place), one output tile pair (reduction split by depth).
    {"few_cin2_sparse", 1, 2, 16, 1, {3, 7, 9}, {1, 2, 2}, {1, 3, 3}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    // dX with output channels in the lanes (dx_cout_lanes): the stem scaled down (3x7x7, stride
    // (1,2,2)), 8 valid lanes with strides and asymmetric pads, dilation 2 along w with stride 2,
    // and 9 valid lanes, where dx_cout_lanes does not apply (dx_tiled's lanes are useful).
    {"stem_scaled_cin3", 2, 3, 64, 1, {4, 14, 13}, {3, 7, 7}, {1, 2, 2}, {1, 1, 1}, {1, 1, 3, 3, 3, 3}},
    {"few_cin8_strided", 1, 8, 32, 1, {4, 7, 9}, {2, 3, 5}, {1, 2, 2}, {1, 1, 1}, {1, 0, 2, 1, 0, 2}},
    {"few_cin3_dilated", 1, 3, 32, 1, {5, 8, 11}, {2, 3, 3}, {1, 1, 2}, {2, 2, 2}, {1, 1, 2, 2, 1, 0}},
    {"few_cin9_rejected", 1, 9, 32, 1, {3, 5, 6}, {2, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1, 1, 1, 1}},
    // Depthwise (cin_pg == 1): dw_diag / dx_diag compute only the diagonal of each real group.
    // 16 channels (real_g 1), 64 with stride 2 and asymmetric pads (real_g 4), 24 channels
    // (real_g 2, the second half padding) with dilation 2, channel multiplier 2 (cout_g 32), and
    // 8 groups (mag_factor 8: half the lanes padding) with multiplier 2 and strides.
    {"dwise_c16", 2, 16, 16, 16, {4, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"dwise_c64_strided", 1, 64, 64, 64, {5, 7, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 0, 0, 1, 2, 1}},
    {"dwise_c24_dilated", 1, 24, 24, 24, {6, 7, 8}, {3, 3, 2}, {1, 1, 1}, {2, 2, 2}, {2, 1, 2, 2, 0, 1}},
    {"dwise_mult2", 2, 16, 32, 16, {3, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"dwise_c8_mult2_strided", 1, 8, 16, 8, {5, 6, 7}, {2, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}},
    // Strides beyond the kernel: dw_diag reads x in place.
    {"dwise_sparse", 1, 16, 16, 16, {3, 7, 9}, {1, 2, 2}, {1, 3, 3}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    // 1x1x1 (dw_pointwise): 3 input blocks, the last ragged (40 channels), a tile spread over
    // threads; grouped (2 real groups); and one output tile (the reduction split by depth).
    {"pointwise", 2, 40, 24, 1, {3, 5, 6}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    {"pointwise_grouped", 1, 32, 48, 2, {2, 4, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    {"pointwise_split", 1, 16, 2, 1, {5, 3, 4}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    // 8 slabs (n, d) for 2 threads: 16-bit dX converts each slab's dy once, threads over slabs.
    {"pointwise_slabs", 2, 40, 24, 1, {4, 3, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    // Every extent a multiple of its stride: dX's scatter form (the ragged ones gather).
    {"strided_exact", 2, 32, 32, 1, {6, 8, 12}, {3, 3, 3}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1, 1, 0, 2}},
};

using Param = std::tuple<int, DType, std::string>;

class FilterKernelTest : public ::testing::TestWithParam<Param> {};
class InputKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(FilterKernelTest, MatchesReference) {
  const auto& [ci, dtype, schedule] = GetParam();
  const Case& c = kCases[ci];
  const ConvGeometry g = geometry(c);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  const Dims5 wd = test::w_dims(g);
  auto x = random_eighths(count({xd.begin(), xd.end()}), 1 + ci);
  auto dy = random_eighths(count({yd.begin(), yd.end()}), 100 + ci);
  const size_t es = dtype_size(dtype);
  auto xb = encode(x, dtype), yb = encode(dy, dtype);
  std::vector<uint8_t> x6(count(shape_6hd(xd)) * es), y6(count(shape_6hd(yd)) * es);
  ncdhw_to_6hd(xb.data(), x6.data(), xd, es);
  ncdhw_to_6hd(yb.data(), y6.data(), yd, es);

  Problem p = make_backprop_filter_problem(shape_6hd(xd), dtype, shape_6hd(yd), dtype,
                                           {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]}, para_for(c, false));
  for (const auto& [name, why] : explain_schedules(p))
    if (name == schedule && !why.empty()) GTEST_SKIP() << schedule << " does not apply: " << why;
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  std::vector<float> out(count(p.dw_shape()), -7.0f);
  k->run_dense({x6.data(), y6.data()}, out.data());

  std::vector<float> w(count({wd.begin(), wd.end()}));
  oidhw_from_fz3d(out.data(), w.data(), wd, c.groups, 4);
  expect_close(std::vector<double>(w.begin(), w.end()), test::ref_dw(g, x, dy), 1e-6);
  // Cross-group and padding entries are exactly 0: packing the weights again reproduces the output.
  std::vector<float> again(out.size());
  oidhw_to_fz3d(w.data(), again.data(), wd, c.groups, 4);
  EXPECT_EQ(0, std::memcmp(again.data(), out.data(), out.size() * 4));
}

TEST_P(InputKernelTest, MatchesReference) {
  const auto& [ci, dtype, schedule] = GetParam();
  const Case& c = kCases[ci];
  const ConvGeometry g = geometry(c);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  const Dims5 wd = test::w_dims(g);
  auto w = random_eighths(count({wd.begin(), wd.end()}), 7 + ci);
  auto dy = random_eighths(count({yd.begin(), yd.end()}), 300 + ci);
  const size_t es = dtype_size(dtype);
  auto wb = encode(w, dtype), yb = encode(dy, dtype);
  std::vector<uint8_t> fz(count(shape_fz3d(wd, c.groups)) * es), y6(count(shape_6hd(yd)) * es);
  oidhw_to_fz3d(wb.data(), fz.data(), wd, c.groups, es);
  ncdhw_to_6hd(yb.data(), y6.data(), yd, es);

  Problem p = make_backprop_input_problem(shape_fz3d(wd, c.groups), dtype, shape_6hd(yd), dtype,
                                          {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                          {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
  for (const auto& [name, why] : explain_schedules(p))
    if (name == schedule && !why.empty()) GTEST_SKIP() << schedule << " does not apply: " << why;
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  std::vector<float> out(count(p.dx_shape()), -7.0f);
  k->run_dense({fz.data(), y6.data()}, out.data());
  std::vector<float> dx(count({xd.begin(), xd.end()}));
  ncdhw_from_6hd(out.data(), dx.data(), xd, 4);
  expect_close(std::vector<double>(dx.begin(), dx.end()), test::ref_dx(g, w, dy), 1e-6);
  std::vector<float> again(out.size());
  ncdhw_to_6hd(dx.data(), again.data(), xd, 4);
  EXPECT_EQ(0, std::memcmp(again.data(), out.data(), out.size() * 4)) << "padding lanes not zero";
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [ci, dtype, schedule] = info.param;
  return std::string(kCases[ci].name) + "_" + dtype_name(dtype) + "_" + schedule;
}

// Every schedule of each registry, forced by name (dW: skipped where it does not apply).
INSTANTIATE_TEST_SUITE_P(
    AllCases, FilterKernelTest,
    ::testing::Combine(::testing::Range(0, (int)(sizeof(kCases) / sizeof(kCases[0]))),
                       ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                       ::testing::ValuesIn(own_schedule_names(OpKind::kBackpropFilter))),
    param_name);
INSTANTIATE_TEST_SUITE_P(
    AllCases, InputKernelTest,
    ::testing::Combine(::testing::Range(0, (int)(sizeof(kCases) / sizeof(kCases[0]))),
                       ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                       ::testing::ValuesIn(own_schedule_names(OpKind::kBackpropInput))),
    param_name);

// dX with tensor_bias and the default float16 result, computed by `want_schedule`: one rounding
// of the exact sum.
void check_bias_float16(const Case& c, const std::string& want_schedule) {
  const ConvGeometry g = geometry(c);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  const Dims5 wd = test::w_dims(g);
  auto w = random_eighths(count({wd.begin(), wd.end()}), 11);
  auto dy = random_eighths(count({yd.begin(), yd.end()}), 12);
  auto bias = random_eighths(g.cin, 13);
  std::vector<float> wf(w.begin(), w.end()), yf(dy.begin(), dy.end()), bf(bias.begin(), bias.end());
  std::vector<float> fz(count(shape_fz3d(wd, c.groups))), y6(count(shape_6hd(yd)));
  oidhw_to_fz3d(wf.data(), fz.data(), wd, c.groups, 4);
  ncdhw_to_6hd(yf.data(), y6.data(), yd, 4);
  ParaDict para = para_for(c, true);
  para.res_dtype.reset();  // TBE default: float16
  Problem p = make_backprop_input_problem(shape_fz3d(wd, c.groups), DType::kFloat32, shape_6hd(yd), DType::kFloat32,
                                          {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                          {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para, {c.cin}, DType::kFloat32);
  ASSERT_EQ(p.res_dtype, DType::kFloat16);
  // Named: which schedule auto picks for a small case depends on the host's calibration.
  auto k = compile(p, CompileOptions{want_schedule});
  EXPECT_EQ(k->schedule_name(), want_schedule);
  std::vector<uint16_t> out(count(p.dx_shape()));
  k->run_dense({fz.data(), y6.data(), bf.data()}, out.data());
  auto ref = test::ref_dx(g, w, dy);
  const int64_t sp = g.in[0] * g.in[1] * g.in[2];
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += bias[(i / sp) % g.cin];
  std::vector<uint16_t> dx(ref.size());
  ncdhw_from_6hd(out.data(), dx.data(), xd, 2);
  int mismatches = 0;
  for (size_t i = 0; i < ref.size(); ++i) mismatches += dx[i] != float_to_half((float)ref[i]);
  EXPECT_EQ(mismatches, 0) << c.name;
}

TEST(KernelExtras, BackpropInputBiasAndFloat16Result) { check_bias_float16(kCases[2], "dx_tiled"); }

/** dW of case `c` (random fp32 data) compiled for `threads` threads with `schedule`. */
std::vector<float> dw_with_threads(const Case& c, const std::string& schedule, int threads,
                                   const std::string& variant = "") {
  const ConvGeometry g = geometry(c);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(count({xd.begin(), xd.end()})), dy(count({yd.begin(), yd.end()}));
  for (auto& v : x) v = u(rng);
  for (auto& v : dy) v = u(rng);
  std::vector<float> x6(count(shape_6hd(xd))), y6(count(shape_6hd(yd)));
  ncdhw_to_6hd(x.data(), x6.data(), xd, 4);
  ncdhw_to_6hd(dy.data(), y6.data(), yd, 4);
  Problem p = make_backprop_filter_problem(shape_6hd(xd), DType::kFloat32, shape_6hd(yd), DType::kFloat32,
                                           {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]}, para_for(c, false));
  const int saved = num_threads();
  set_num_threads(threads);
  std::vector<float> out(count(p.dw_shape()));
  auto k = compile(p, CompileOptions{schedule, variant});
  if (schedule != "auto") EXPECT_EQ(k->variant(), variant);  // auto: the model's pick, any tiles
  k->run_dense({x6.data(), y6.data()}, out.data());
  set_num_threads(saved);
  return out;
}

void expect_thread_invariant(const Case& c, const std::string& schedule) {
  const std::vector<float> one = dw_with_threads(c, schedule, 1), two = dw_with_threads(c, schedule, 2);
  double max_rel = 0, max_ref = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    max_ref = std::fmax(max_ref, std::fabs(one[i]));
    max_rel = std::fmax(max_rel, std::fabs(one[i] - two[i]));
  }
  EXPECT_GT(max_ref, 0) << c.name;
  EXPECT_LE(max_rel, 1e-6 * max_ref) << c.name << " " << schedule;
}

/** dX of case `c` (random fp32 data, not exact in fp32) compiled for `threads` threads. */
std::vector<float> dx_with_threads(const Case& c, const std::string& schedule, int threads) {
  const ConvGeometry g = geometry(c);
  const Dims5 yd = test::y_dims(g);
  const Dims5 wd = test::w_dims(g);
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w(count({wd.begin(), wd.end()})), dy(count({yd.begin(), yd.end()}));
  for (auto& v : w) v = u(rng);
  for (auto& v : dy) v = u(rng);
  std::vector<float> fz(count(shape_fz3d(wd, c.groups))), y6(count(shape_6hd(yd)));
  oidhw_to_fz3d(w.data(), fz.data(), wd, c.groups, 4);
  ncdhw_to_6hd(dy.data(), y6.data(), yd, 4);
  Problem p = make_backprop_input_problem(shape_fz3d(wd, c.groups), DType::kFloat32, shape_6hd(yd),
                                          DType::kFloat32, {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                          {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
  const int saved = num_threads();
  set_num_threads(threads);
  std::vector<float> out(count(p.dx_shape()));
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  k->run_dense({fz.data(), y6.data()}, out.data());
  set_num_threads(saved);
  return out;
}

const Case& case_named(const std::string& name) {
  for (const Case& c : kCases)
    if (name == c.name) return c;
  throw std::invalid_argument("no test case " + name);
}

// Results do not depend on the thread count (tiles are split across threads; a split reduction
// only reorders the sum).
TEST(KernelExtras, ThreadCountDoesNotChangeResults) { expect_thread_invariant(kCases[0], "auto"); }

// Few input channels: tiles split across threads (stem) and the reduction split (one tile pair).
TEST(KernelExtras, CoutLanesThreadCountDoesNotChangeResults) {
  expect_thread_invariant(case_named("few_cin3_stem"), "dw_cout_lanes");
  expect_thread_invariant(case_named("few_cin1_split"), "dw_cout_lanes");
}

// A split reduction has a fixed number of parts whatever the threads (threads take whole
// parts, summed in part order at the end): 1 and 2 threads give the same bits, as do the
// schedules' own choices (which split "tiny_output_split" and "pointwise_split").
TEST(KernelExtras, SplitReductionThreadCountDoesNotChangeBits) {
  const std::vector<std::tuple<const char*, const char*, const char*>> runs{
      {"plain", "dw_tiled", "nt=4,kwt=3,ch=1,parts=2"},
      {"strided", "dw_tiled", "nt=4,kwt=3,ch=1,parts=2"},
      {"plain", "dw_tiled", "nt=4,kwt=3,ch=1,parts=3,db=2"},  // x staged for 2 depth slices
      {"tiny_output_split", "dw_tiled", ""},
      {"tiny_output_split_depth", "dw_tiled", "nt=1,kwt=1,ch=2,parts=4"},
      {"few_cin1_split", "dw_cout_lanes", ""},
      {"pointwise", "dw_pointwise", ""},
      {"pointwise", "dw_pointwise", "ct=1,nt=8,ch=1,parts=2"},
      {"pointwise_split", "dw_pointwise", ""}};
  for (const auto& [name, schedule, variant] : runs) {
    const std::vector<float> one = dw_with_threads(case_named(name), schedule, 1, variant),
                             two = dw_with_threads(case_named(name), schedule, 2, variant);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << name << " " << variant;
  }
}

// The split's part count is fixed by the problem: a count the split cannot make is refused.
TEST(KernelExtras, SplitPartsVariantIsChecked) {
  // "plain" has batch 2 (and depth 5): parts=3 splits depth 5 into 3 parts (2+2+1); parts=4
  // gives 3 parts of depth, so it is refused naming the count.
  const Case& c = case_named("plain");
  EXPECT_NO_THROW(dw_with_threads(c, "dw_tiled", 1, "nt=4,kwt=3,ch=1,parts=3"));
  try {
    dw_with_threads(c, "dw_tiled", 1, "nt=4,kwt=3,ch=1,parts=4");
    ADD_FAILURE() << "parts=4 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("gives 3 parts"), std::string::npos) << e.what();
  }
}

/** The dW problem of a Case (fp32), without data. */
Problem dw_problem(const Case& c) {
  const ConvGeometry g = geometry(c);
  return make_backprop_filter_problem(shape_6hd(test::x_dims(g)), DType::kFloat32,
                                      shape_6hd(test::y_dims(g)), DType::kFloat32,
                                      {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]}, para_for(c, false));
}

// dx_cout_lanes and dx_w_lanes: each output row is one thread's work, so 1 and 2 threads give
// the same bits.
TEST(KernelExtras, FewCinDxThreadCountDoesNotChangeResults) {
  // (dx_w_lanes leaves few_cin1_split's tiny weights to dx_cout_lanes: few_cin8_strided instead.)
  for (const char* schedule : {"dx_cout_lanes", "dx_w_lanes"})
    for (const char* name : {"stem_scaled_cin3", "few_cin_grouped",
                             std::string(schedule) == "dx_w_lanes" ? "few_cin8_strided" : "few_cin1_split"}) {
      const std::vector<float> one = dx_with_threads(case_named(name), schedule, 1),
                               two = dx_with_threads(case_named(name), schedule, 2);
      ASSERT_EQ(one.size(), two.size());
      EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << schedule << " " << name;
    }
}

// The first applicable entry is dx_cout_lanes for few valid input lanes and dx_tiled otherwise;
// dx_w_lanes applies to these few-lane cases (a stem's 7x7 taps, 8 and 6 valid lanes) and never
// where dx_cout_lanes does not.
TEST(KernelExtras, FewCinDxDispatch) {
  for (const auto& [name, want] : std::vector<std::pair<std::string, std::string>>{
           {"stem_scaled_cin3", "dx_cout_lanes"}, {"few_cin8_strided", "dx_cout_lanes"},
           {"few_cin_grouped", "dx_cout_lanes"}, {"few_cin9_rejected", "dx_tiled"},
           {"plain", "dx_tiled"}, {"odd_channels", "dx_tiled"}}) {
    const Case& c = case_named(name);
    const ConvGeometry g = geometry(c);
    const Dims5 yd = test::y_dims(g);
    const Dims5 wd = test::w_dims(g);
    Problem p = make_backprop_input_problem(shape_fz3d(wd, c.groups), DType::kFloat32, shape_6hd(yd),
                                            DType::kFloat32, {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                            {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
    std::string first;
    bool w_lanes = false;
    for (const auto& [sched, why] : explain_schedules(p)) {
      if (why.empty() && first.empty()) first = sched;
      if (sched == "dx_w_lanes") w_lanes = why.empty();
    }
    EXPECT_EQ(first, want) << name;
    EXPECT_EQ(w_lanes, want == "dx_cout_lanes") << name;
  }
}

// A kernel compiled for 2 threads and run after set_num_threads(1) runs the 1-thread plan (the
// same request compiled for 1 thread), with the same result as a kernel compiled at 1 thread.
TEST(KernelExtras, RunFollowsTheThreadCountSetAfterCompile) {
  const Case& c = case_named("plain");
  const ConvGeometry g = geometry(c);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  std::vector<float> x6(count(shape_6hd(xd)), 0.5f), y6(count(shape_6hd(yd)), 0.25f);
  Problem p = make_backprop_filter_problem(shape_6hd(xd), DType::kFloat32, shape_6hd(yd), DType::kFloat32,
                                           {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]}, para_for(c, false));
  const int saved = num_threads();
  set_num_threads(2);
  auto two = compile(p);
  EXPECT_EQ(two->threads(), 2);
  set_num_threads(1);
  std::vector<float> a(count(p.dw_shape())), b(a.size());
  two->run_dense({x6.data(), y6.data()}, a.data());
  auto one = compile(p);
  EXPECT_EQ(one->threads(), 1);
  one->run_dense({x6.data(), y6.data()}, b.data());
  set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// Depthwise: each real group (and kd, with fewer groups than threads) belongs to one thread, and
// no reduction is split, so 1 and 2 threads give bit-identical results.
TEST(KernelExtras, DiagThreadCountDoesNotChangeResults) {
  for (const char* name : {"depthwise", "dwise_c16", "dwise_c64_strided", "dwise_mult2"}) {
    const Case& c = case_named(name);
    EXPECT_EQ(dw_with_threads(c, "dw_diag", 1), dw_with_threads(c, "dw_diag", 2)) << name;
    EXPECT_EQ(dx_with_threads(c, "dx_diag", 1), dx_with_threads(c, "dx_diag", 2)) << name;
  }
}

/** Why `schedule` does not apply to dW / dX of case `c` ("" if it does). */
std::string why_not(const Case& c, const std::string& schedule, bool dx) {
  const ConvGeometry g = geometry(c);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  const Dims5 wd = test::w_dims(g);
  Problem p = dx ? make_backprop_input_problem(shape_fz3d(wd, c.groups), DType::kFloat32,
                                               shape_6hd(yd), DType::kFloat32,
                                               {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                               {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true))
                 : make_backprop_filter_problem(shape_6hd(xd), DType::kFloat32, shape_6hd(yd),
                                                DType::kFloat32, {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]},
                                                para_for(c, false));
  for (const auto& [name, why] : explain_schedules(p))
    if (name == schedule) return why;
  ADD_FAILURE() << "no schedule " << schedule;
  return "?";
}

// The diagonal dX with bias, a float16 result and padding lanes (24 channels).
TEST(KernelExtras, DiagBiasAndFloat16Result) {
  check_bias_float16(case_named("dwise_c24_dilated"), "dx_diag");
  check_bias_float16(case_named("dwise_c8_mult2_strided"), "dx_diag");
}

// The diagonal schedules apply exactly to cin_pg == 1 (any channel multiplier) and say why not
// otherwise; "auto" picks them for depthwise problems.
TEST(KernelExtras, DiagDispatch) {
  for (const char* name : {"depthwise", "dwise_c16", "dwise_c64_strided", "dwise_c24_dilated",
                           "dwise_mult2", "dwise_c8_mult2_strided"}) {
    EXPECT_EQ(why_not(case_named(name), "dw_diag", false), "") << name;
    EXPECT_EQ(why_not(case_named(name), "dx_diag", true), "") << name;
  }
  // Dense-grouped (5 and 8 input channels per group) and plain problems are rejected.
  for (const char* name : {"grouped_mag4", "grouped_multi_real_g"}) {
    EXPECT_NE(why_not(case_named(name), "dw_diag", false).find("block-diagonal"), std::string::npos) << name;
    EXPECT_NE(why_not(case_named(name), "dx_diag", true).find("block-diagonal"), std::string::npos) << name;
  }
  EXPECT_NE(why_not(case_named("plain"), "dw_diag", false).find("dense"), std::string::npos);
  EXPECT_NE(why_not(case_named("plain"), "dx_diag", true).find("dense"), std::string::npos);
  // One input channel, 16 outputs (groups 1): 1 of 16 lanes would be a group; dw_cout_lanes
  // fills its lanes with output channels instead.
  EXPECT_NE(why_not(case_named("few_cin1_split"), "dw_diag", false).find("dw_cout_lanes"), std::string::npos);
  // The e2_depthwise workload: auto chooses them.
  const Case e2{"e2", 2, 64, 64, 64, {8, 28, 28}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}};
  const ConvGeometry g = geometry(e2);
  const Dims5 xd = test::x_dims(g), yd = test::y_dims(g);
  const Dims5 wd{g.cout, 1, 3, 3, 3};
  EXPECT_EQ(compile(make_backprop_filter_problem(shape_6hd(xd), DType::kFloat32, shape_6hd(yd),
                                                 DType::kFloat32, {64, 3, 1, 3, 3}, para_for(e2, false)))
                ->schedule_name(),
            "dw_diag");
  EXPECT_EQ(compile(make_backprop_input_problem(shape_fz3d(wd, 64), DType::kFloat32, shape_6hd(yd),
                                                DType::kFloat32, {64, 1, 3, 3, 3}, {2, 8, 28, 28, 64},
                                                para_for(e2, true)))
                ->schedule_name(),
            "dx_diag");
}

// The cost model's pick at 1 and 2 threads: dw_pointwise for the 1x1x1 layer (d_i3d_1x1x1), and
// dw_tiled for the seed (a_tbe_doc: 16 channels, stride 2, staging-bound), whose candidates keep
// the own choice's reduction split (4 parts where the target prefetches x chunks, Zen 4; else
// unsplit; read from its description) in its neighbours, with one alternative of the other split. dw_pointwise says why it
// does not apply elsewhere.
TEST(KernelExtras, PointwiseAndSplitDispatch) {
  const Case d{"d_i3d", 2, 256, 64, 1, {8, 28, 28}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const Case a{"a_tbe_doc", 16, 16, 16, 1, {8, 72, 72}, {2, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 1, 0, 1}};
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    EXPECT_EQ(rank_schedules(dw_problem(d)).at(0).schedule, "dw_pointwise") << threads;
    const std::vector<RankedChoice> seed = rank_schedules(dw_problem(a));
    EXPECT_EQ(seed.at(0).schedule, "dw_tiled") << threads;
    const std::vector<std::string> cands = schedule_candidates(dw_problem(a), "dw_tiled");
    auto with = [&](const char* parts) {
      return std::count_if(cands.begin(), cands.end(),
                           [&](const std::string& v) { return v.find(parts) != std::string::npos; });
    };
    // cands[0] is the own choice (""); its key opens the schedule's description.
    const std::string own = sched::dw_tiled_schedule()->describe(
        dw_problem(a), sched::Context{lower::host_target(), threads, ""});
    const std::string key = own.substr(0, own.find(']')) + ",";  // "[nt=..,parts=..,x=..,"
    const bool split = key.find(",parts=4,") != std::string::npos;
    ASSERT_TRUE(split || key.find(",parts=1,") != std::string::npos) << own;
    EXPECT_GE(with(split ? "parts=4" : "parts=1"), 2) << own;  // neighbours keep the split
    EXPECT_EQ(with(split ? "parts=1" : "parts=4"), 1) << own;  // one alternative
  }
  set_num_threads(saved);
  EXPECT_EQ(why_not(case_named("plain"), "dw_pointwise", false), "kernel is not 1x1x1");
  const Case strided{"s", 1, 16, 16, 1, {4, 4, 4}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const Case padded{"p", 1, 16, 16, 1, {4, 4, 4}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 1, 0}};
  EXPECT_NE(why_not(strided, "dw_pointwise", false).find("strided"), std::string::npos);
  EXPECT_NE(why_not(padded, "dw_pointwise", false).find("padded"), std::string::npos);
  EXPECT_EQ(why_not(case_named("pointwise"), "dw_pointwise", false), "");
}

/** The dX problem of a Case (fp32), without data. */
Problem dx_problem(const Case& c) {
  const ConvGeometry g = geometry(c);
  return make_backprop_input_problem(shape_fz3d(test::w_dims(g), c.groups), DType::kFloat32,
                                     shape_6hd(test::y_dims(g)), DType::kFloat32,
                                     {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                     {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
}

// dx_pointwise (1x1x1 dX as a plain GEMM): the model's pick for the 1x1x1 layer (d_i3d_1x1x1)
// at 1 and 2 threads (dx_tiled would stage dy first), the same bits at 1 and 2 threads (a thread
// owns whole (blocks, slab) units), bias with a float16 result, and why it does not apply
// elsewhere.
TEST(KernelExtras, DxPointwise) {
  const Case d{"d_i3d", 2, 256, 64, 1, {8, 28, 28}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    EXPECT_EQ(rank_schedules(dx_problem(d)).at(0).schedule, "dx_pointwise") << threads;
  }
  set_num_threads(saved);
  for (const char* name : {"pointwise", "pointwise_grouped"}) {
    const std::vector<float> one = dx_with_threads(case_named(name), "dx_pointwise", 1),
                             two = dx_with_threads(case_named(name), "dx_pointwise", 2);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << name;
  }
  check_bias_float16(case_named("pointwise"), "dx_pointwise");
  // 16-bit dy: whole slabs per thread where there are 4 per thread (pointwise_slabs: 8) or a
  // tile spans every block, so each slab's dy is converted once; else (pointwise: 6 slabs, one
  // block per tile) units of input blocks.
  for (const char* name : {"pointwise_slabs", "pointwise"}) {
    Problem p = dx_problem(case_named(name));
    p.in_dtype = DType::kFloat16;
    const std::string text = sched::dx_pointwise_schedule()->describe(
        p, sched::Context{lower::host_target(), 2, "ct=1"});
    EXPECT_EQ(text.find("converted once per slab") != std::string::npos,
              std::string(name) == "pointwise_slabs")
        << text;
  }
  EXPECT_EQ(why_not(case_named("plain"), "dx_pointwise", true), "kernel is not 1x1x1");
  const Case strided{"s", 1, 16, 16, 1, {4, 4, 4}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  const Case padded{"p", 1, 16, 16, 1, {4, 4, 4}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 1, 0}};
  EXPECT_NE(why_not(strided, "dx_pointwise", true).find("strided"), std::string::npos);
  EXPECT_NE(why_not(padded, "dx_pointwise", true).find("padded"), std::string::npos);
  EXPECT_EQ(why_not(case_named("pointwise"), "dx_pointwise", true), "");
}

}  // namespace
}  // namespace tbex
