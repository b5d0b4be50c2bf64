// Every semantic check (codes: docs/validation.md) raises tbex::UserError with its TBE code,
// naming the parameter; Ascend-only hardware limits are accepted.
#include <gtest/gtest.h>

#include <cmath>

#include "tbex/tbex.h"

namespace tbex {
namespace {

// Valid baseline: the TBE doc example, fp16.
struct DwArgs {
  std::vector<int64_t> x{16, 8, 1, 72, 72, 16}, dy{16, 4, 1, 36, 36, 16}, fs{16, 2, 16, 3, 3};
  DType xt = DType::kFloat16, yt = DType::kFloat16;
  ParaDict para;
  DwArgs() {
    para.strides = std::vector<int64_t>{2, 2, 2};
    para.pads = std::vector<int64_t>{0, 0, 0, 1, 0, 1};
    para.dilations = std::vector<int64_t>{1, 1, 1, 1, 1};
  }
  Problem make() const { return make_backprop_filter_problem(x, xt, dy, yt, fs, para); }
};

// Valid dX baseline: Conv3DBackpropInputD case1 of the public cases (NCDHW x [1,32,16,120,176],
// dy [1,64,8,60,88], filter [64,32,2,2,2], stride 2).
struct DxArgs {
  std::vector<int64_t> f{2 * 2 * 2 * 2, 4, 16, 16}, dy{1, 8, 4, 60, 88, 16}, fs{64, 32, 2, 2, 2},
      in{1, 16, 120, 176, 32};
  DType ft = DType::kFloat16, yt = DType::kFloat16;
  ParaDict para;
  DxArgs() {
    para.strides = std::vector<int64_t>{1, 2, 2, 2, 1};
    para.pads = std::vector<int64_t>{0, 0, 0, 0, 0, 0};
    para.dilations = std::vector<int64_t>{1, 1, 1, 1, 1};
  }
  Problem make() const { return make_backprop_input_problem(f, ft, dy, yt, fs, in, para); }
};

template <class F>
void expect_user_error(F&& f, const std::string& code, const std::string& param) {
  try {
    f();
    ADD_FAILURE() << "no UserError (expected code '" << code << "', param '" << param << "')";
  } catch (const UserError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
  }
}

TEST(Errors, BaselinesAreValid) {
  Problem dw = DwArgs().make();
  EXPECT_EQ(dw.dw_shape(), (std::vector<int64_t>{1, 18, 16, 16}));
  Problem dx = DxArgs().make();
  EXPECT_EQ(dx.dx_shape(), (std::vector<int64_t>{1, 16, 2, 120 * 176, 16}));
  EXPECT_EQ(dx.res_dtype, DType::kFloat16);
}

TEST(Errors, C0MustBe16) {
  DwArgs a;
  a.x[5] = 8;
  expect_user_error([&] { a.make(); }, "E62511", "x");
  DxArgs b;
  b.dy[5] = 32;
  expect_user_error([&] { b.make(); }, "E62511", "out_backprop");
}

TEST(Errors, BatchMismatch) {
  DwArgs a;
  a.x[0] = 2;
  expect_user_error([&] { a.make(); }, "E62503", "out_backprop");
  DxArgs b;
  b.in[0] = 8;
  expect_user_error([&] { b.make(); }, "E62503", "out_backprop");
}

TEST(Errors, DyChannelsMustHoldCout) {
  DwArgs a;
  a.fs[0] = 64;  // Cout 64 needs dy C1 = 4
  expect_user_error([&] { a.make(); }, "E62504", "out_backprop");
}

TEST(Errors, CinMustEqualFilterCTimesGroups) {
  DwArgs a;
  a.fs[2] = 32;  // x holds 16 channels
  expect_user_error([&] { a.make(); }, "E60010", "x");
  DxArgs b;
  b.fs[1] = 24;  // 32 input channels are not a multiple of 24
  expect_user_error([&] { b.make(); }, "E60010", "filter_size");
}

TEST(Errors, DilationOnNOrC) {
  DwArgs a;
  a.para.dilations = std::vector<int64_t>{2, 1, 1, 1, 2};
  expect_user_error([&] { a.make(); }, "E62510", "dilations");
  DxArgs b;
  b.para.dilations = std::vector<int64_t>{1, 1, 1, 1, 2};
  expect_user_error([&] { b.make(); }, "E62510", "dilations");
}

TEST(Errors, KernelLargerThanPaddedInputPerDim) {
  const char* codes[3] = {"E60014", "E60015", "E62507"};
  for (int i = 0; i < 3; ++i) {
    DwArgs a;
    const int fs_index[3] = {1, 3, 4};
    a.fs[fs_index[i]] = 200;
    expect_user_error([&] { a.make(); }, codes[i], "filter_size");
  }
}

TEST(Errors, OutputSizeRulePerDim) {
  const char* codes[3] = {"E60024", "E60025", "E62508"};
  const int dy_index[3] = {1, 3, 4};
  for (int i = 0; i < 3; ++i) {
    DwArgs a;
    a.dy[dy_index[i]] += 1;
    expect_user_error([&] { a.make(); }, codes[i], "out_backprop");
  }
}

TEST(Errors, Lengths) {
  DwArgs a;
  a.para.strides = std::vector<int64_t>{1, 1, 1, 1};
  expect_user_error([&] { a.make(); }, "E62501", "strides");
  DwArgs b;
  b.para.pads = std::vector<int64_t>{0, 0, 0};
  expect_user_error([&] { b.make(); }, "E62501", "pads");
  DwArgs c;
  c.para.dilations = std::vector<int64_t>{1, 0, 1, 0};
  expect_user_error([&] { c.make(); }, "E62501", "dilations");
  DwArgs d;
  d.x = {16, 8, 72, 72, 16};
  expect_user_error([&] { d.make(); }, "E60006", "x");
  DxArgs e;
  e.para.strides = std::vector<int64_t>{2, 2, 2};
  expect_user_error([&] { e.make(); }, "E62501", "strides");
  DxArgs f;
  f.in = {1, 16, 120, 176};
  expect_user_error([&] { f.make(); }, "E62501", "input_size");
}

TEST(Errors, NonPositiveAndNegativeValues) {
  DwArgs a;
  a.para.pads = std::vector<int64_t>{0, 0, -1, 1, 0, 1};
  expect_user_error([&] { a.make(); }, "E60000", "pads");
  DwArgs b;
  b.para.strides = std::vector<int64_t>{0, 2, 2};
  expect_user_error([&] { b.make(); }, "E62509", "strides");
  DwArgs c;
  c.fs[3] = 0;
  expect_user_error([&] { c.make(); }, "E62509", "filter_size");
  DwArgs d;
  d.x[3] = -72;
  expect_user_error([&] { d.make(); }, "E62509", "x");
}

TEST(Errors, Dtypes) {
  DwArgs a;
  a.yt = DType::kFloat32;
  expect_user_error([&] { a.make(); }, "E60000", "out_backprop");
  DwArgs b;
  b.para.res_dtype = "float16";
  expect_user_error([&] { b.make(); }, "E60000", "res_dtype");
  DwArgs c;
  c.para.res_dtype = "int8";
  expect_user_error([&] { c.make(); }, "E60000", "res_dtype");
}

TEST(Errors, Groups) {
  DwArgs a;
  a.para.groups = 3;  // Cin = 48 with filter C 16, Cout 16 not divisible by 3
  expect_user_error([&] { a.make(); }, "E60038", "groups");
  DwArgs b;
  b.para.groups = 0;
  expect_user_error([&] { b.make(); }, "E60038", "groups");
}

TEST(Errors, GroupDictMustAgreeWithShapes) {
  for (const char* key : {"real_g", "mag_factor", "cin1_g", "cout_g", "cin_ori"}) {
    DwArgs a;
    a.para.group_dict = std::map<std::string, int64_t>{
        {"real_g", 1}, {"mag_factor", 1}, {"cin1_g", 1}, {"cout_g", 16}, {"cin_ori", 16}, {"cout_ori", 16}};
    (*a.para.group_dict)[key] += 1;
    // A wrong cin_ori is no multiple of the filter's 16 channels: E60010, naming cin_ori.
    expect_user_error([&] { a.make(); }, key == std::string("cin_ori") ? "E60010" : "E60038",
                      std::string("group_dict['") + key + "']");
  }
  DwArgs b;
  b.para.group_dict = std::map<std::string, int64_t>{{"cout_ori", 32}};
  expect_user_error([&] { b.make(); }, "E60038", "group_dict['cout_ori']");
  DwArgs c;
  c.para.group_dict = std::map<std::string, int64_t>{{"bogus", 1}};
  expect_user_error([&] { c.make(); }, "E60000", "group_dict");
}

TEST(Errors, DxFilterShapeMustMatch) {
  DxArgs a;
  a.f[1] = 5;
  expect_user_error([&] { a.make(); }, "E60010", "filter");
  DxArgs b;
  b.f[3] = 8;
  expect_user_error([&] { b.make(); }, "E62511", "filter");
}

TEST(Errors, DxBias) {
  DxArgs a;
  expect_user_error([&] { make_backprop_input_problem(a.f, a.ft, a.dy, a.yt, a.fs, a.in, a.para, {31}); }, "E60000",
                    "tensor_bias");
  Problem ok = make_backprop_input_problem(a.f, a.ft, a.dy, a.yt, a.fs, a.in, a.para, {32});
  EXPECT_TRUE(ok.has_bias);
}

TEST(Errors, HugeSizesAreRejectedNotCrashed) {
  DwArgs a;
  a.x = {int64_t(1) << 40, 8, 1, 72, 72, 16};
  a.dy = {int64_t(1) << 40, 4, 1, 36, 36, 16};
  expect_user_error([&] { a.make(); }, "E60011", "x");
  DwArgs b;  // a consistent geometry whose H does not fit a 32-bit extent
  b.x = {1, 8, 1, int64_t(1) << 33, 72, 16};
  b.dy = {1, 4, 1, (int64_t(1) << 32), 36, 16};
  expect_user_error([&] { b.make(); }, "E60011", "x");
}

TEST(Errors, AscendOnlyLimitsAreAccepted) {
  // Stride 64 > 63, pads larger than the kernel, H > 4096: all computable on a CPU.
  DwArgs a;
  a.x = {1, 1, 1, 5000, 3, 16};
  a.dy = {1, 1, 1, 79, 3, 16};
  a.fs = {16, 1, 16, 3, 1};
  a.para.strides = std::vector<int64_t>{1, 64, 1};
  a.para.pads = std::vector<int64_t>{0, 0, 5, 5, 0, 0};
  Problem p = a.make();
  EXPECT_EQ(p.geo.stride[1], 64);
}

TEST(Errors, KernelRunChecksOperands) {
  DwArgs a;
  a.x = {1, 2, 1, 4, 4, 16};
  a.dy = {1, 1, 1, 2, 2, 16};
  a.fs = {16, 2, 16, 3, 3};
  a.para.strides = std::vector<int64_t>{1, 1, 1};
  a.para.pads = std::vector<int64_t>{0, 0, 0, 0, 0, 0};
  auto k = compile(a.make());
  std::vector<uint16_t> x(2 * 16 * 16), dy(4 * 16);
  std::vector<float> out(18 * 16 * 16);
  expect_user_error([&] { k->run_dense({x.data(), nullptr}, out.data()); }, "E60000", "out_backprop");
  expect_user_error([&] { k->run_dense({x.data()}, out.data()); }, "E62501", "inputs");
  TensorArg xa{x.data(), {1, 2, 1, 4, 4, 16}, {}, DType::kFloat16};
  TensorArg ya{dy.data(), {1, 1, 1, 2, 2, 16}, {}, DType::kBFloat16};
  TensorArg oa{out.data(), {1, 18, 16, 16}, {}, DType::kFloat32};
  expect_user_error([&] { k->run({xa, ya}, oa); }, "E60000", "out_backprop");
  ya.dtype = DType::kFloat16;
  oa.shape = {1, 18, 16, 8};
  expect_user_error([&] { k->run({xa, ya}, oa); }, "E60000", "out");
}

// Forward conv: a hand-built ConvGeometry, checked like the TBE ops' arguments.
ConvGeometry fwd_geometry() {
  ConvGeometry g;
  g.n = 1; g.cin = 16; g.cout = 32; g.groups = 1;
  g.in = {8, 9, 10}; g.kernel = {3, 3, 3}; g.stride = {1, 2, 1};
  g.pads = {1, 1, 1, 1, 1, 1};
  g.out = {8, 5, 10};
  return g;
}

TEST(Errors, ForwardBaselineIsValid) {
  Problem p = make_forward_problem(fwd_geometry(), DType::kFloat16, DType::kFloat32);
  EXPECT_EQ(p.output_shape(), (std::vector<int64_t>{1, 8, 2, 5, 10, 16}));
}

TEST(Errors, ForwardOutputSizeRule) {
  const char* codes[3] = {"E60024", "E60025", "E62508"};
  for (int i = 0; i < 3; ++i) {
    ConvGeometry g = fwd_geometry();
    g.out[i] += 1;
    expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, codes[i], "out");
  }
  ConvGeometry g = fwd_geometry();
  g.out[1] = 9;  // the stride-1 size: stride 2 gives 5
  try {
    make_forward_problem(g, DType::kFloat32, DType::kFloat32);
    ADD_FAILURE() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("is 9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("give 5"), std::string::npos) << e.what();
  }
}

TEST(Errors, ForwardKernelLargerThanPaddedInput) {
  ConvGeometry g = fwd_geometry();
  g.kernel[2] = 13;  // 10 + 1 + 1 = 12 < 13
  expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, "E62507", "kernel");
}

TEST(Errors, ForwardGroupsAndSizes) {
  ConvGeometry g = fwd_geometry();
  g.groups = 3;  // 16 % 3
  expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, "E60038", "groups");
  g.groups = 0;
  expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, "E60038", "groups");
  g = fwd_geometry();
  g.pads[3] = -1;
  expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, "E60000", "pads");
  g = fwd_geometry();
  g.cin = 0;
  expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, "E62509", "shape");
  g = fwd_geometry();
  g.stride[0] = 0;
  expect_user_error([&] { make_forward_problem(g, DType::kFloat32, DType::kFloat32); }, "E62509", "strides");
}

TEST(Errors, ForwardKernelRunChecksOperands) {
  auto k = compile(make_forward_problem(fwd_geometry(), DType::kFloat32, DType::kFloat32));
  const Problem& p = k->problem();
  std::vector<float> x(8 * 9 * 10 * 16), f(27 * 2 * 16 * 16), y(8 * 2 * 5 * 10 * 16);
  TensorArg xa{x.data(), p.x_shape(), {}, DType::kFloat32}, fa{f.data(), p.filter_shape(), {}, DType::kFloat32};
  TensorArg ya{y.data(), p.output_shape(), {}, DType::kFloat32};
  k->run({xa, fa}, ya);  // valid
  TensorArg bad_f = fa;
  bad_f.shape[0] += 1;
  expect_user_error([&] { k->run({xa, bad_f}, ya); }, "E60000", "filter");
  TensorArg bad_x = xa;
  bad_x.dtype = DType::kFloat16;
  expect_user_error([&] { k->run({bad_x, fa}, ya); }, "E60000", "x");
  TensorArg bad_y = ya;
  bad_y.shape[2] = 1;
  expect_user_error([&] { k->run({xa, fa}, bad_y); }, "E60000", "out");
}

// make_problem, the builder every route ends in: its checks hold for every op and name the
// op's own parameters.
constexpr DType f32 = DType::kFloat32, f16 = DType::kFloat16, bf16 = DType::kBFloat16;

TEST(Errors, MakeProblemGeometryForEveryOp) {
  for (OpKind op : {OpKind::kBackpropFilter, OpKind::kBackpropInput, OpKind::kForward}) {
    const bool fwd = op == OpKind::kForward;
    EXPECT_EQ(make_problem(op, fwd_geometry(), f32, f32).op, op);
    ConvGeometry g = fwd_geometry();
    g.groups = 3;  // 16 % 3
    expect_user_error([&] { make_problem(op, g, f32, f32); }, "E60038", "groups");
    g = fwd_geometry();
    g.n = 0;
    expect_user_error([&] { make_problem(op, g, f32, f32); }, "E62509", "shape");
    g = fwd_geometry();
    g.dilation[1] = 0;
    expect_user_error([&] { make_problem(op, g, f32, f32); }, "E62509", "dilations");
    g = fwd_geometry();
    g.pads[4] = -1;
    expect_user_error([&] { make_problem(op, g, f32, f32); }, "E60000", "pads");
    const char* too_big[3] = {"E60014", "E60015", "E62507"};
    const char* out_rule[3] = {"E60024", "E60025", "E62508"};
    for (int i = 0; i < 3; ++i) {
      g = fwd_geometry();
      g.kernel[i] = g.in[i] + 3;  // pads 1 + 1: one more than fits
      expect_user_error([&] { make_problem(op, g, f32, f32); }, too_big[i], fwd ? "kernel" : "filter_size");
      g = fwd_geometry();
      g.out[i] += 1;
      expect_user_error([&] { make_problem(op, g, f32, f32); }, out_rule[i], fwd ? "out" : "out_backprop");
    }
  }
}

TEST(Errors, MakeProblemDtypesAndBias) {
  const ConvGeometry g = fwd_geometry();
  expect_user_error([&] { make_problem(OpKind::kBackpropFilter, g, f16, f16); }, "E60000", "res_dtype");
  const Problem dx = make_problem(OpKind::kBackpropInput, g, f16, f16, "", f32);
  EXPECT_TRUE(dx.has_bias);
  EXPECT_EQ(dx.input_shapes().size(), 3u);
  EXPECT_NE(dx.canonical().find("_bias_float32"), std::string::npos) << dx.canonical();
  EXPECT_TRUE(make_problem(OpKind::kBackpropInput, g, bf16, f32, "", bf16).has_bias);
  expect_user_error([&] { make_problem(OpKind::kBackpropInput, g, f16, f16, "", bf16); }, "E60000", "tensor_bias");
  expect_user_error([&] { make_problem(OpKind::kBackpropFilter, g, f32, f32, "", f32); }, "E60000", "tensor_bias");
  expect_user_error([&] { make_problem(OpKind::kForward, g, f32, f32, "", f32); }, "E60000", "tensor_bias");
}

// The forward conv's filter is the per-group transposed weight: its group_dict swaps Cin / Cout.
TEST(Errors, MakeProblemGroupDictFollowsTheFilterPacking) {
  ConvGeometry g = fwd_geometry();
  g.groups = 4;
  EXPECT_TRUE(make_problem(OpKind::kBackpropFilter, g, f32, f32).group == derive_group_dict(16, 32, 4));
  EXPECT_TRUE(make_problem(OpKind::kBackpropInput, g, f32, f32).group == derive_group_dict(16, 32, 4));
  EXPECT_TRUE(make_problem(OpKind::kForward, g, f32, f32).group == derive_group_dict(32, 16, 4));
  EXPECT_EQ(make_forward_problem(g, f16, f32, "k").canonical(),
            make_problem(OpKind::kForward, g, f16, f32, "k").canonical());
}

/** A geometry with one spatial dim (W) and the given window; out follows the output rule. */
ConvGeometry w_geometry(int64_t n, int64_t cin, int64_t cout, int64_t groups, int64_t w, int64_t k,
                        int64_t stride, int64_t dil, int64_t pad) {
  ConvGeometry g;
  g.n = n; g.cin = cin; g.cout = cout; g.groups = groups;
  g.in = {1, 1, w}; g.kernel = {1, 1, k}; g.stride = {1, 1, stride}; g.dilation = {1, 1, dil};
  g.pads = {0, 0, 0, 0, pad, pad};
  g.out = {1, 1, (w + 2 * pad - (k - 1) * dil - 1) / stride + 1};
  return g;
}

// Geometries at the edges of what validation accepts: every schedule's estimate is computed
// without overflow (the sanitizer build turns one into a failure) and is a finite time.
TEST(Errors, BorderlineGeometriesRankWithoutOverflow) {
  const int64_t kMax = 2147483647;
  const ConvGeometry cases[] = {
      w_geometry(1, 16, 16, 1, (int64_t(1) << 27) - 1, 1, kMax, 1, 0),  // stride 2^31-1
      w_geometry(1, 16, 16, 1, (int64_t(1) << 26) + 1, 2, 1, int64_t(1) << 26, 0),  // dilation 2^26
      w_geometry(1, 16, 16, 1, 1, 1, 1, 1, int64_t(1) << 25),            // pads 2^25
      w_geometry(int64_t(1) << 16, 1 << 15, 1 << 15, 1, 1, 1, 1, 1, 0),  // 2^15 channels, batch 2^16
      w_geometry(2, 1 << 15, 1 << 15, 1 << 15, 3, 3, 1, 1, 1),          // 2^15 groups (depthwise)
  };
  for (const ConvGeometry& g : cases)
    for (OpKind op : {OpKind::kBackpropFilter, OpKind::kBackpropInput, OpKind::kForward}) {
      const Problem p = make_problem(op, g, DType::kFloat16, DType::kFloat32);
      SCOPED_TRACE(p.canonical());
      const auto ranked = rank_schedules(p);
      ASSERT_FALSE(ranked.empty());
      for (const RankedChoice& r : ranked) EXPECT_TRUE(std::isfinite(r.ms) && r.ms >= 0) << r.schedule;
    }
}

}  // namespace
}  // namespace tbex
