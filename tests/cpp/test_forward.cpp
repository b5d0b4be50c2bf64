// Correctness of the compiled forward conv3d (OpKind::kForward) against a float64 loop over the
// definition, for every schedule in the registry, all input dtypes, groups (mag_factor > 1, real
// groups > 1 with a partial last one, depthwise, channel multiplier), strides 2-3 and 100,
// dilation 2, asymmetric pads, pads larger than the kernel and 1x1x1 kernels.
//
// The filter operand is built exactly as the contract says: W [Cout, Cin/groups, K] transposed per
// group to T [Cin, Cout/groups, K], then oidhw_to_fz3d(T, ..., groups). Inputs are multiples of
// 1/8 (exact in every dtype, exact fp32 partial sums), so a correct kernel matches the reference
// to the last bit; the checks still allow 1e-6 relative (the fp32 summation-order bound).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "reference.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::Case;
using test::geometry;
using test::x_dims;
using test::y_dims;
using test::numel;
using test::count;
using test::decode;
using test::encode;
using test::expect_close;
using test::random_eighths;

// Two threads whatever the machine, so the parallel paths are what these tests check.
const int kThreadsSet = (set_num_threads(2), 2);

const Case kCases[] = {
    {"plain", 2, 16, 16, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"odd_channels", 1, 20, 37, 1, {4, 5, 9}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1, 0, 2, 1}},
    {"strided_2_3", 2, 16, 32, 1, {7, 9, 11}, {3, 3, 3}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1, 1, 0, 2}},
    {"dilated_2", 1, 8, 24, 1, {7, 8, 9}, {3, 2, 3}, {1, 2, 1}, {2, 2, 2}, {2, 2, 1, 0, 3, 3}},
    {"stride3_dilated", 1, 16, 16, 1, {9, 10, 11}, {3, 2, 5}, {3, 3, 2}, {1, 2, 1}, {1, 1, 0, 2, 2, 1}},
    // Packing dict derive(Cout=56, Cin=20, 4): mag 4, one real group.
    {"grouped_mag4", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 0, 1}},
    // mag 2, three real groups.
    {"grouped_multi_real_g", 1, 48, 48, 6, {3, 4, 5}, {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 0, 1, 1, 0}},
    // mag 4 over 6 groups: two real groups, the second half empty (Co1 3 < real_g*cin1_g 4).
    {"grouped_partial_real_g", 1, 24, 48, 6, {3, 4, 5}, {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 0, 1, 1, 0}},
    {"depthwise", 2, 32, 32, 32, {4, 6, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"depthwise_multiplier3", 1, 8, 24, 8, {3, 5, 7}, {3, 1, 3}, {1, 1, 2}, {1, 1, 1}, {1, 1, 0, 0, 1, 1}},
    {"pads_beyond_kernel", 1, 16, 16, 1, {3, 4, 5}, {2, 2, 2}, {3, 2, 1}, {1, 1, 1}, {4, 3, 3, 5, 2, 3}},
    {"pointwise_1x1x1", 3, 4, 40, 1, {3, 5, 19}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}},
    // 4 output blocks (a 4c1 x 4wo tile) over a row of 13: a shifted tail tile.
    {"wide_row_tail", 1, 32, 64, 1, {2, 3, 13}, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 1, 1}},
    // Stride 100 and pads 150: the padded box (~1.7 GB staged) is too sparse; x is read in place.
    {"sparse_huge_pads", 1, 16, 16, 1, {2, 3, 2}, {2, 2, 2}, {100, 100, 100}, {1, 1, 1},
     {150, 150, 150, 150, 150, 150}},
    // Depth 2, two taps of dilation 3 over pads of 1: slice 0's taps read slices -1 and 2, so y
    // is zero (dX of this shape had its dy box emptied by the pad-tap predicate).
    {"depth_taps_all_pads", 2, 16, 32, 1, {2, 4, 5}, {2, 3, 3}, {1, 2, 1}, {3, 1, 1}, {1, 1, 1, 1, 1, 1}},
};

/** W [Cout, Cin/groups, K] -> T [Cin, Cout/groups, K] with T[g*cin_pg + i, o, k] = W[g*cout_pg + o, i, k]. */
std::vector<double> transpose_per_group(const ConvGeometry& g, const std::vector<double>& w) {
  const int64_t cin_pg = g.cin_pg(), cout_pg = g.cout_pg();
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  std::vector<double> t(w.size());
  for (int64_t gg = 0; gg < g.groups; ++gg)
    for (int64_t o = 0; o < cout_pg; ++o)
      for (int64_t i = 0; i < cin_pg; ++i)
        for (int64_t k = 0; k < kvol; ++k)
          t[((gg * cin_pg + i) * cout_pg + o) * kvol + k] = w[((gg * cout_pg + o) * cin_pg + i) * kvol + k];
  return t;
}

Dims5 t_dims(const ConvGeometry& g) { return {g.cin, g.cout_pg(), g.kernel[0], g.kernel[1], g.kernel[2]}; }

/** The kernel's operands: x as 6HD and the filter as FRACTAL_Z_3D of T, both stored as `t`.
 * Entries the layouts leave zero (x padding lanes, cross-group and padding filter entries, where
 * TBE may leave garbage) hold 1000 instead: the kernel must ignore them. */
struct Operands {
  std::vector<uint8_t> x6, fz;
};

/** Packs `v` with `pack_fn`, then sets every element the packing does not write to 1000. */
template <class F>
std::vector<uint8_t> pack_poisoned(const std::vector<double>& v, size_t packed_count, DType t, F&& pack_fn) {
  const size_t es = dtype_size(t);
  std::vector<uint8_t> out(packed_count * es), ones_packed(packed_count * 4);
  auto src = encode(v, t);
  pack_fn(src.data(), out.data(), es);
  std::vector<float> ones(v.size(), 1.0f);
  pack_fn(ones.data(), ones_packed.data(), 4);
  const auto poison = encode({1000.0}, t);
  for (size_t i = 0; i < packed_count; ++i) {
    float f;
    std::memcpy(&f, &ones_packed[i * 4], 4);
    if (f == 0.0f) std::memcpy(&out[i * es], poison.data(), es);
  }
  return out;
}

Operands pack(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w, DType t) {
  Operands o;
  o.x6 = pack_poisoned(x, count(shape_6hd(x_dims(g))), t, [&](const void* s, void* d, size_t es) {
    ncdhw_to_6hd(s, d, x_dims(g), es);
  });
  o.fz = pack_poisoned(transpose_per_group(g, w), count(shape_fz3d(t_dims(g), g.groups)), t,
                       [&](const void* s, void* d, size_t es) { oidhw_to_fz3d(s, d, t_dims(g), g.groups, es); });
  return o;
}

std::vector<double> random_weights(const ConvGeometry& g, uint32_t seed) {
  return random_eighths(g.cout * g.cin_pg() * g.kernel[0] * g.kernel[1] * g.kernel[2], seed);
}

/** Runs `k`; returns y in NCDHW and checks that the 6HD padding lanes are exactly zero. */
std::vector<double> run(const Kernel& k, const Operands& o) {
  const Problem& p = k.problem();
  const DType rt = p.res_dtype;
  const size_t es = dtype_size(rt);
  std::vector<uint8_t> out(count(p.output_shape()) * es, 0xA5);  // garbage, not zeros
  k.run_dense({o.x6.data(), o.fz.data()}, out.data());
  std::vector<uint8_t> y(numel(y_dims(p.geo)) * es);
  ncdhw_from_6hd(out.data(), y.data(), y_dims(p.geo), es);
  std::vector<uint8_t> again(out.size());
  ncdhw_to_6hd(y.data(), again.data(), y_dims(p.geo), es);
  EXPECT_EQ(0, std::memcmp(again.data(), out.data(), out.size())) << "padding lanes not zero";
  return decode(y, rt);
}

using Param = std::tuple<int, DType, std::string>;
class ForwardKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(ForwardKernelTest, MatchesReference) {
  const auto& [ci, dtype, schedule] = GetParam();
  const ConvGeometry g = geometry(kCases[ci]);
  auto x = random_eighths(numel(x_dims(g)), 21 + ci);
  auto w = random_weights(g, 500 + ci);
  Problem p = make_forward_problem(g, dtype, DType::kFloat32);
  ASSERT_EQ(p.filter_shape(), shape_fz3d(t_dims(g), g.groups));
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  expect_close(run(*k, pack(g, x, w, dtype)), test::ref_fwd(g, x, w), 1e-6);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [ci, dtype, schedule] = info.param;
  return std::string(kCases[ci].name) + "_" + dtype_name(dtype) + "_" + schedule;
}

// Every schedule of tbex's own, forced by name (all apply to these problems; Halide's
// autoschedulers are tested in test_halide_auto.cpp).
INSTANTIATE_TEST_SUITE_P(
    AllCases, ForwardKernelTest,
    ::testing::Combine(::testing::Range(0, (int)(sizeof(kCases) / sizeof(kCases[0]))),
                       ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                       ::testing::ValuesIn(own_schedule_names(OpKind::kForward))),
    param_name);

// fp16 / bf16 results: one round-to-nearest-even of the exact sum, bit for bit.
using ResParam = std::tuple<DType, std::string>;
class ForwardResultDtypeTest : public ::testing::TestWithParam<ResParam> {};

TEST_P(ForwardResultDtypeTest, RoundsTheExactSum) {
  const auto& [res, schedule] = GetParam();
  const ConvGeometry g = geometry(kCases[1]);  // odd channels: padding lanes in x and y
  auto x = random_eighths(numel(x_dims(g)), 31);
  auto w = random_weights(g, 32);
  auto k = compile(make_forward_problem(g, DType::kFloat16, res), CompileOptions{schedule});
  const auto got = run(*k, pack(g, x, w, DType::kFloat16));
  const auto ref = test::ref_fwd(g, x, w);
  int mismatches = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float r = (float)ref[i];
    const double want = res == DType::kFloat16 ? half_to_float(float_to_half(r)) : bf16_to_float(float_to_bf16(r));
    mismatches += got[i] != want;
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Results, ForwardResultDtypeTest,
                         ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::ValuesIn(own_schedule_names(OpKind::kForward))),
                         [](const ::testing::TestParamInfo<ResParam>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
                         });

// The forward conv is the adjoint of dX for the same weights: <dX(W, dy), x> == <dy, fwd(W, x)>.
// This ties the two filter layouts together (dX: FRACTAL_Z_3D of W; forward: of T).
TEST(ForwardKernel, IsTheAdjointOfBackpropInput) {
  for (int ci : {2, 7}) {  // strided; grouped with a partial real group
    const Case& c = kCases[ci];
    const ConvGeometry g = geometry(c);
    SCOPED_TRACE(c.name);
    auto x = random_eighths(numel(x_dims(g)), 41);
    auto dy = random_eighths(numel(y_dims(g)), 42);
    auto w = random_weights(g, 43);
    const Dims5 wd = test::w_dims(g);
    std::vector<float> wf(w.begin(), w.end()), yf(dy.begin(), dy.end());
    std::vector<float> fz_dx(count(shape_fz3d(wd, g.groups))), y6(count(shape_6hd(y_dims(g))));
    oidhw_to_fz3d(wf.data(), fz_dx.data(), wd, g.groups, 4);
    ncdhw_to_6hd(yf.data(), y6.data(), y_dims(g), 4);
    const ParaDict para = test::para_for(c, true);
    Problem pdx = make_backprop_input_problem(shape_fz3d(wd, g.groups), DType::kFloat32, shape_6hd(y_dims(g)),
                                              DType::kFloat32, {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                              {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para);
    std::vector<float> dx6(count(pdx.dx_shape())), dx(x.size());
    compile(pdx)->run_dense({fz_dx.data(), y6.data()}, dx6.data());
    ncdhw_from_6hd(dx6.data(), dx.data(), x_dims(g), 4);

    auto y = run(*compile(make_forward_problem(g, DType::kFloat32, DType::kFloat32)), pack(g, x, w, DType::kFloat32));
    double lhs = 0, rhs = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) lhs += dx[i] * x[i], scale += std::fabs(dx[i] * x[i]);
    for (size_t i = 0; i < y.size(); ++i) rhs += dy[i] * y[i];
    EXPECT_GT(scale, 0);
    EXPECT_LE(std::fabs(lhs - rhs), 1e-12 * scale) << "lhs " << lhs << " rhs " << rhs;
  }
}

// Every output tile is computed by one thread in one order: bit-identical for any thread count.
TEST(ForwardKernel, ThreadCountDoesNotChangeResults) {
  const ConvGeometry g = geometry(kCases[2]);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(numel(x_dims(g))), w(g.cout * g.cin_pg() * 27);
  for (auto& v : x) v = (float)u(rng);
  for (auto& v : w) v = (float)u(rng);
  const Operands o = pack(g, x, w, DType::kFloat32);
  const Problem p = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
  const int saved = num_threads();
  std::vector<float> one(count(p.output_shape())), two(one.size());
  set_num_threads(1);
  compile(p)->run_dense({o.x6.data(), o.fz.data()}, one.data());
  set_num_threads(2);
  compile(p)->run_dense({o.x6.data(), o.fz.data()}, two.data());
  set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4));
  // And the values are right (random fp32 data: summation order differs from the reference).
  std::vector<float> y(numel(y_dims(g)));
  ncdhw_from_6hd(two.data(), y.data(), y_dims(g), 4);
  expect_close(std::vector<double>(y.begin(), y.end()), test::ref_fwd(g, x, w), 1e-5);
}

// Random valid geometries (the draw of tests/python/test_random.py: pads up to the dilated
// kernel + 2, strides up to 4, dilations up to 3, its channel and group mixes), fp32, through
// fwd_tiled's own tiles and up to three of its tile variants, against the float64 loop. The
// backward ops get the same from tests/fuzz/fuzz_geometries.py; the forward conv has no Python
// entry, so its fuzz lives here. TBEX_TEST_FWD_CASES / TBEX_TEST_FWD_SEED draw more (`make
// fuzz-geometries` runs 200).
struct Dim {
  int64_t n, k, s, d, p0, p1;
};

Dim draw_dim(std::mt19937& rng) {
  auto in = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Dim v{};
  v.k = in(1, 3), v.d = in(1, 3), v.s = in(1, 4);
  const int64_t eff = (v.k - 1) * v.d + 1;
  v.p0 = in(0, eff + 2), v.p1 = in(0, eff + 2);
  const int64_t lo = std::max<int64_t>(1, eff - v.p0 - v.p1);
  v.n = in(lo, lo + 6);
  return v;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

TEST(ForwardKernel, RandomGeometriesMatchReference) {
  // (Cin, Cout, groups): mag > 1, several real groups with a partial last one, depthwise with
  // and without a multiplier, tiny and odd channel counts.
  const int64_t channels[][3] = {{20, 56, 4}, {48, 48, 6}, {12, 12, 3}, {24, 24, 24}, {40, 40, 40},
                                 {8, 16, 8},  {30, 45, 15}, {36, 24, 2}, {64, 32, 2}, {6, 10, 2},
                                 {3, 5, 1},   {17, 33, 1},  {32, 16, 1}, {1, 1, 1},  {33, 3, 1}};
  const int cases = env_int("TBEX_TEST_FWD_CASES", 12);
  const int seed = env_int("TBEX_TEST_FWD_SEED", 1);
  std::mt19937 rng(seed);
  int checked = 0;
  for (int i = 0; i < cases; ++i) {
    const auto& ch = channels[i % (sizeof(channels) / sizeof(channels[0]))];
    ConvGeometry g;
    do {
      const Dim dims[3] = {draw_dim(rng), draw_dim(rng), draw_dim(rng)};
      g.n = std::uniform_int_distribution<int64_t>(1, 2)(rng);
      g.cin = ch[0], g.cout = ch[1], g.groups = ch[2];
      for (int j = 0; j < 3; ++j) {
        const Dim& v = dims[j];
        g.in[j] = v.n, g.kernel[j] = v.k, g.stride[j] = v.s, g.dilation[j] = v.d;
        g.pads[2 * j] = v.p0, g.pads[2 * j + 1] = v.p1;
        g.out[j] = (v.n + v.p0 + v.p1 - ((v.k - 1) * v.d + 1)) / v.s + 1;
      }
    } while (g.flops() > 3e6);
    std::ostringstream what;
    what << "case " << i << " (seed " << seed << "): N " << g.n << " Cin " << g.cin << " Cout "
         << g.cout << " groups " << g.groups;
    for (int j = 0; j < 3; ++j)
      what << (j ? "," : " in ") << g.in[j];
    for (int j = 0; j < 3; ++j) what << (j ? "," : " kernel ") << g.kernel[j];
    for (int j = 0; j < 3; ++j) what << (j ? "," : " strides ") << g.stride[j];
    for (int j = 0; j < 3; ++j) what << (j ? "," : " dilations ") << g.dilation[j];
    for (int j = 0; j < 6; ++j) what << (j ? "," : " pads ") << g.pads[j];
    SCOPED_TRACE(what.str());
    auto x = random_eighths(numel(x_dims(g)), 700 + i);
    auto w = random_weights(g, 900 + i);
    const Problem p = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
    const Operands o = pack(g, x, w, DType::kFloat32);
    const auto ref = test::ref_fwd(g, x, w);
    std::vector<std::string> variants = schedule_candidates(p, "fwd_tiled");
    if (variants.size() > 4) variants.resize(4);
    for (const std::string& v : variants) {
      SCOPED_TRACE("fwd_tiled [" + v + "]");
      std::shared_ptr<const Kernel> k;
      ASSERT_NO_THROW(k = compile(p, CompileOptions{"fwd_tiled", v}));
      expect_close(run(*k, o), ref, 1e-6);
      ++checked;
    }
  }
  EXPECT_GE(checked, cases);
}

// The public contract: operand names, shapes, the packing's group_dict, names of op and schedules.
TEST(ForwardKernel, ProblemContract) {
  const ConvGeometry g = geometry(kCases[7]);  // Cin 24, Cout 48, groups 6
  Problem p = make_forward_problem(g, DType::kBFloat16, DType::kFloat16, "my_conv");
  EXPECT_STREQ(op_name(p.op), "conv3d");
  EXPECT_EQ(p.kernel_name, "my_conv");
  EXPECT_EQ(p.group, derive_group_dict(g.cout, g.cin, g.groups));
  EXPECT_EQ(p.group.real_g, 2);
  EXPECT_EQ(p.group.mag_factor, 4);
  EXPECT_EQ(p.input_names(), (std::vector<std::string>{"x", "filter"}));
  EXPECT_EQ(p.input_shapes(), (std::vector<std::vector<int64_t>>{shape_6hd(x_dims(g)),
                                                                 shape_fz3d(t_dims(g), g.groups)}));
  EXPECT_EQ(p.input_dtypes(), (std::vector<DType>{DType::kBFloat16, DType::kBFloat16}));
  EXPECT_EQ(p.output_shape(), shape_6hd(y_dims(g)));
  EXPECT_EQ(p.canonical().rfind("fwd_", 0), 0u) << p.canonical();
  const auto names = schedule_names(OpKind::kForward);
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.front(), "fwd_tiled");
  EXPECT_EQ(names.back(), "reference");
  for (const auto& [name, why] : explain_schedules(p)) EXPECT_EQ(why, "") << name;
}

}  // namespace
}  // namespace tbex
