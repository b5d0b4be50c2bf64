// Halide's autoschedulers as registry entries (schedules/halide_auto.cpp): each one the installed
// Halide ships computes dW, dX and the forward conv exactly (inputs are multiples of 1/8, so every
// fp32 partial sum is exact; 1e-6 relative is the summation-order bound), and "auto" never picks
// one of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "reference.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::Case;
using test::geometry;
using test::para_for;
using test::x_dims;
using test::y_dims;
using test::w_dims;
using test::numel;
using test::count;
using test::encode;
using test::expect_close;
using test::random_eighths;

const int kThreadsSet = (set_num_threads(2), 2);

const std::vector<std::string> kAutoschedulers{"halide_mullapudi2016", "halide_adams2019", "halide_li2018"};

const Case kCases[] = {
    {"plain", 1, 16, 32, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"grouped_dilated", 2, 32, 32, 2, {5, 7, 6}, {2, 3, 3}, {1, 1, 1}, {1, 1, 2}, {0, 1, 1, 0, 2, 1}},
};

/** "" when the installed Halide ships `name`'s plugin (the entry applies), else why not. */
std::string unavailable(const Problem& p, const std::string& name) {
  for (const auto& [n, why] : explain_schedules(p))
    if (n == name) return why;
  return "not in the registry";
}

std::vector<uint8_t> packed_6hd(const std::vector<double>& v, const Dims5& d, DType t) {
  auto b = encode(v, t);
  std::vector<uint8_t> out(count(shape_6hd(d)) * dtype_size(t));
  ncdhw_to_6hd(b.data(), out.data(), d, dtype_size(t));
  return out;
}

/** FRACTAL_Z_3D of `w` [d0, d1, K] with `groups`, as fp32. */
std::vector<float> packed_fz3d(const std::vector<double>& w, const Dims5& d, int64_t groups) {
  std::vector<float> wf(w.begin(), w.end()), out(count(shape_fz3d(d, groups)));
  oidhw_to_fz3d(wf.data(), out.data(), d, groups, 4);
  return out;
}

using Param = std::tuple<int, std::string>;
class HalideAutoTest : public ::testing::TestWithParam<Param> {};

TEST_P(HalideAutoTest, BackpropFilterMatchesReference) {
  const auto& [ci, schedule] = GetParam();
  const Case& c = kCases[ci];
  const ConvGeometry g = geometry(c);
  auto x = random_eighths(numel(x_dims(g)), 1 + ci), dy = random_eighths(numel(y_dims(g)), 50 + ci);
  Problem p = make_backprop_filter_problem(shape_6hd(x_dims(g)), DType::kFloat32, shape_6hd(y_dims(g)),
                                           DType::kFloat32, {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]},
                                           para_for(c, false));
  if (std::string why = unavailable(p, schedule); !why.empty()) GTEST_SKIP() << why;
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  auto x6 = packed_6hd(x, x_dims(g), DType::kFloat32), y6 = packed_6hd(dy, y_dims(g), DType::kFloat32);
  std::vector<float> out(count(p.dw_shape()), -7.0f), w(numel(w_dims(g)));
  k->run_dense({x6.data(), y6.data()}, out.data());
  oidhw_from_fz3d(out.data(), w.data(), w_dims(g), c.groups, 4);
  expect_close(std::vector<double>(w.begin(), w.end()), test::ref_dw(g, x, dy), 1e-6);
}

TEST_P(HalideAutoTest, BackpropInputMatchesReference) {
  const auto& [ci, schedule] = GetParam();
  const Case& c = kCases[ci];
  const ConvGeometry g = geometry(c);
  auto w = random_eighths(numel(w_dims(g)), 7 + ci), dy = random_eighths(numel(y_dims(g)), 70 + ci);
  Problem p = make_backprop_input_problem(shape_fz3d(w_dims(g), c.groups), DType::kFloat32,
                                          shape_6hd(y_dims(g)), DType::kFloat32,
                                          {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                          {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
  if (std::string why = unavailable(p, schedule); !why.empty()) GTEST_SKIP() << why;
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  auto fz = packed_fz3d(w, w_dims(g), c.groups);
  auto y6 = packed_6hd(dy, y_dims(g), DType::kFloat32);
  std::vector<float> out(count(p.dx_shape()), -7.0f), dx(numel(x_dims(g)));
  k->run_dense({fz.data(), y6.data()}, out.data());
  ncdhw_from_6hd(out.data(), dx.data(), x_dims(g), 4);
  expect_close(std::vector<double>(dx.begin(), dx.end()), test::ref_dx(g, w, dy), 1e-6);
}

TEST_P(HalideAutoTest, ForwardMatchesReference) {
  const auto& [ci, schedule] = GetParam();
  const Case& c = kCases[ci];
  const ConvGeometry g = geometry(c);
  auto x = random_eighths(numel(x_dims(g)), 21 + ci), w = random_eighths(numel(w_dims(g)), 90 + ci);
  Problem p = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
  if (std::string why = unavailable(p, schedule); !why.empty()) GTEST_SKIP() << why;
  auto k = compile(p, CompileOptions{schedule});
  EXPECT_EQ(k->schedule_name(), schedule);
  // The filter packs the per-group transposed weight T[g*cin_pg + i, o] = W[g*cout_pg + o, i].
  const int64_t cin_pg = g.cin_pg(), cout_pg = g.cout_pg(), kv = g.kernel[0] * g.kernel[1] * g.kernel[2];
  std::vector<double> t(w.size());
  for (int64_t gg = 0; gg < g.groups; ++gg)
    for (int64_t o = 0; o < cout_pg; ++o)
      for (int64_t i = 0; i < cin_pg; ++i)
        for (int64_t j = 0; j < kv; ++j)
          t[((gg * cin_pg + i) * cout_pg + o) * kv + j] = w[((gg * cout_pg + o) * cin_pg + i) * kv + j];
  auto fz = packed_fz3d(t, {g.cin, cout_pg, g.kernel[0], g.kernel[1], g.kernel[2]}, g.groups);
  auto x6 = packed_6hd(x, x_dims(g), DType::kFloat32);
  std::vector<float> out(count(p.output_shape()), -7.0f), y(numel(y_dims(g)));
  k->run_dense({x6.data(), fz.data()}, out.data());
  ncdhw_from_6hd(out.data(), y.data(), y_dims(g), 4);
  expect_close(std::vector<double>(y.begin(), y.end()), test::ref_fwd(g, x, w), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Autoschedulers, HalideAutoTest,
    ::testing::Combine(::testing::Range(0, (int)(sizeof(kCases) / sizeof(kCases[0]))),
                       ::testing::ValuesIn(kAutoschedulers)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(kCases[std::get<0>(info.param)].name) + "_" + std::get<1>(info.param);
    });

// The entries sit after tbex's own schedules and before reference, in every op's registry, and
// own_schedule_names() leaves them out.
TEST(HalideAutoDispatch, RegistryPlacement) {
  for (OpKind op : {OpKind::kBackpropFilter, OpKind::kBackpropInput, OpKind::kForward}) {
    const auto all = schedule_names(op), own = own_schedule_names(op);
    ASSERT_EQ(all.size(), own.size() + 3) << op_name(op);
    EXPECT_EQ(all.back(), "reference");
    EXPECT_EQ(own.back(), "reference");
    for (int i = 0; i < 3; ++i) EXPECT_EQ(all[all.size() - 4 + i], kAutoschedulers[i]) << op_name(op);
    for (const std::string& a : kAutoschedulers) EXPECT_EQ(std::count(own.begin(), own.end(), a), 0);
  }
}

// "auto" picks one of tbex's own schedules even though the autoschedulers apply, and the
// dispatch log calls them comparison only.
TEST(HalideAutoDispatch, AutoNeverPicksThem) {
  const Case& c = kCases[1];
  const ConvGeometry g = geometry(c);
  Problem dw = make_backprop_filter_problem(shape_6hd(x_dims(g)), DType::kFloat32, shape_6hd(y_dims(g)),
                                            DType::kFloat32, {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]},
                                            para_for(c, false));
  Problem dx = make_backprop_input_problem(shape_fz3d(w_dims(g), c.groups), DType::kFloat32,
                                           shape_6hd(y_dims(g)), DType::kFloat32,
                                           {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                           {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
  Problem fwd = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
  setenv("TBEX_LOG", "dispatch", 1);
  for (const Problem* p : {&dw, &dx, &fwd}) {
    ::testing::internal::CaptureStderr();
    auto k = compile(*p);
    const std::string log = ::testing::internal::GetCapturedStderr();
    const auto own = own_schedule_names(p->op);
    EXPECT_NE(std::find(own.begin(), own.end(), k->schedule_name()), own.end()) << k->schedule_name();
    for (const std::string& a : kAutoschedulers) {
      const std::string why = unavailable(*p, a);
      const std::string line = a + ": " +
                               (why.empty() ? "applies, comparison only (by name)" : "skipped: " + why);
      EXPECT_NE(log.find(line), std::string::npos) << log;
    }
  }
  unsetenv("TBEX_LOG");
}

// A name that is not in the registry still lists them among the known schedules.
TEST(HalideAutoDispatch, UnknownNameListsThem) {
  const Case& c = kCases[0];
  const ConvGeometry g = geometry(c);
  Problem p = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
  try {
    compile(p, CompileOptions{"halide_nonexistent"});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("halide_adams2019"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tbex
