// aclnnConvolutionBackward through its C API against a float64 reference: 1D/2D/3D, groups,
// stride/dilation/padding (2D 4-value too), transposed with outputPadding, strided and offset
// views, fp32/fp16/bf16, output masks, cubeMathType, empty batch, the caller's workspace.
#include <gtest/gtest.h>

#include "aclnn_test_util.h"

namespace aclnn_test {
namespace {

struct Case {
  std::string name;
  Geometry g;
  aclDataType dtype = ACL_FLOAT;
  std::array<bool, 3> mask{true, true, true};
  int8_t cube = 0;
  Layout x_layout, w_layout, y_layout, dx_layout, dw_layout, db_layout;
};

aclFormat format_for(size_t rank) {
  return rank == 3 ? ACL_FORMAT_NCL : rank == 4 ? ACL_FORMAT_NCHW : ACL_FORMAT_NCDHW;
}

/** fp32 accumulation error allowance relative to sum|terms|. */
constexpr double kAccEps = 2e-5;

/** Plans and runs one call computing all three gradients (groups 1, not transposed,
 * cubeMathType 0) in the caller's workspace. */
void run_all_outputs(const Geometry& g, HostTensor& dy, HostTensor& x, HostTensor& w,
                     HostTensor& dx, HostTensor& dw, HostTensor& db) {
  IntArray bias({g.cout()}), stride(g.stride), padding(g.padding), dilation(g.dilation),
      out_pad(g.output_padding);
  BoolArray mask({true, true, true});
  uint64_t ws_size = 0;
  aclOpExecutor* exec = nullptr;
  ASSERT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(
                dy.get(), x.get(), w.get(), bias.handle, stride.handle, padding.handle,
                dilation.handle, false, out_pad.handle, 1, mask.handle, 0, dx.get(), dw.get(),
                db.get(), &ws_size, &exec),
            ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  std::vector<unsigned char> ws(ws_size);
  ASSERT_EQ(aclnnConvolutionBackward(ws.data(), ws_size, exec, nullptr), ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
}

void run_case(const Case& c) {
  const Geometry& g = c.g;
  std::mt19937 rng(1234);
  const aclFormat fmt = format_for(g.rank());
  HostTensor x(g.x, c.dtype, fmt, c.x_layout), w(g.w, c.dtype, fmt, c.w_layout),
      dy(g.y(), c.dtype, fmt, c.y_layout);
  HostTensor dx(g.x, c.dtype, fmt, c.dx_layout), dw(g.w, c.dtype, fmt, c.dw_layout),
      db({g.cout()}, c.dtype, ACL_FORMAT_ND, c.db_layout);
  std::vector<double> xv = x.fill_random(rng), wv = w.fill_random(rng), yv = dy.fill_random(rng);

  IntArray bias({g.cout()}), stride(g.stride), padding(g.padding), dilation(g.dilation),
      out_pad(g.output_padding);
  BoolArray mask({c.mask[0], c.mask[1], c.mask[2]});
  uint64_t ws_size = 0;
  aclOpExecutor* exec = nullptr;
  ASSERT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(
                dy.get(), x.get(), w.get(), bias.handle, stride.handle, padding.handle,
                dilation.handle, g.transposed, out_pad.handle, static_cast<int>(g.groups),
                mask.handle, c.cube, dx.get(), dw.get(), db.get(), &ws_size, &exec),
            ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  ASSERT_NE(exec, nullptr);
  std::vector<unsigned char> ws(ws_size, 0xAB);
  ASSERT_EQ(aclnnConvolutionBackward(ws.empty() ? nullptr : ws.data(), ws_size, exec, nullptr),
            ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  if (!ws.empty())  // the caller's workspace is where the operands were packed
    EXPECT_TRUE(std::any_of(ws.begin(), ws.end(), [](unsigned char b) { return b != 0xAB; }));

  // cubeMathType 2 / 3: the products are of rounded inputs (documented CPU meaning).
  auto rounded = [&](std::vector<double> v) {
    if (c.cube == 2 && c.dtype != ACL_FLOAT16)
      for (double& e : v) e = round_to(ACL_FLOAT16, e);
    if (c.cube == 3 && c.dtype == ACL_FLOAT)
      for (double& e : v) e = round_hf32(e);
    return v;
  };
  Reference r = reference(g, rounded(xv), rounded(wv), rounded(yv));
  // gradBias is a plain sum (no products), of gradOutput's own values whatever cubeMathType.
  const Reference exact_bias = c.cube >= 2 ? reference(g, xv, wv, yv) : r;
  HostTensor* outs[3] = {&dx, &dw, &db};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i == 0 ? "gradInput" : i == 1 ? "gradWeight" : "gradBias");
    EXPECT_EQ(outs[i]->touched_outside_view(), 0) << "written outside the output view";
    if (!c.mask[i]) EXPECT_EQ(outs[i]->touched(), 0) << "written although not requested";
  }
  if (c.mask[0]) expect_close("gradInput", dx, r.dx, r.dx_abs, kAccEps);
  if (c.mask[1]) expect_close("gradWeight", dw, r.dw, r.dw_abs, kAccEps);
  if (c.mask[2]) expect_close("gradBias", db, exact_bias.db, exact_bias.db_abs, kAccEps);
  // The executor ran once and is gone.
  EXPECT_EQ(aclnnConvolutionBackward(ws.data(), ws_size, exec, nullptr), ACLNN_ERR_PARAM_INVALID);
}

Geometry conv(std::vector<int64_t> x, std::vector<int64_t> w, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups = 1) {
  Geometry g;
  g.x = std::move(x);
  g.w = std::move(w);
  g.stride = std::move(stride);
  g.padding = std::move(padding);
  g.dilation = std::move(dilation);
  g.output_padding.assign(g.stride.size(), 0);
  g.groups = groups;
  return g;
}

Geometry transposed(Geometry g, std::vector<int64_t> output_padding) {
  g.transposed = true;
  g.output_padding = std::move(output_padding);
  return g;
}

Case make(std::string name, Geometry g, aclDataType dtype = ACL_FLOAT) {
  Case c;
  c.name = std::move(name);
  c.g = std::move(g);
  c.dtype = dtype;
  return c;
}

Case with_mask(Case c, std::string name, std::array<bool, 3> mask) {
  c.name = std::move(name);
  c.mask = mask;
  return c;
}

Case with_cube(Case c, std::string name, int8_t cube) {
  c.name = std::move(name);
  c.cube = cube;
  return c;
}

const Geometry kConv3d = conv({2, 4, 5, 6, 7}, {8, 4, 3, 3, 3}, {1, 2, 2}, {1, 1, 0}, {1, 1, 2});

/** Every tensor a non-contiguous view: channels-last / permuted dims, gaps, offsets. */
Case strided(std::string name, Geometry g, aclDataType dtype) {
  Case c = make(std::move(name), std::move(g), dtype);
  const bool three_d = c.g.rank() == 5;
  std::vector<int> last = three_d ? std::vector<int>{0, 2, 3, 4, 1} : std::vector<int>{0, 2, 3, 1};
  std::vector<int> wperm = three_d ? std::vector<int>{2, 3, 4, 1, 0} : std::vector<int>{2, 3, 1, 0};
  c.x_layout = {last, 1, 3};
  c.w_layout = {wperm, 0, 5};
  c.y_layout = {{}, 2, 7};
  c.dx_layout = {last, 1, 2};
  c.dw_layout = {{}, 1, 4};
  c.db_layout = {{}, 3, 1};
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back(make("conv1d_f32", conv({2, 4, 9}, {6, 4, 3}, {1}, {1}, {1})));
  v.push_back(make("conv1d_stride2_dil2_f16", conv({2, 3, 17}, {4, 3, 3}, {2}, {2}, {2}), ACL_FLOAT16));
  v.push_back(make("conv2d_f32", conv({2, 3, 8, 7}, {5, 3, 3, 2}, {1, 1}, {1, 0}, {1, 1})));
  v.push_back(make("conv2d_pad4_f32", conv({1, 4, 9, 8}, {4, 4, 3, 3}, {2, 1}, {1, 2, 0, 1}, {1, 1})));
  v.push_back(make("conv2d_pad4_bf16", conv({2, 2, 7, 6}, {3, 2, 2, 3}, {1, 2}, {0, 1, 2, 0}, {2, 1}), ACL_BF16));
  v.push_back(make("conv2d_groups3_bf16", conv({2, 6, 7, 7}, {9, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3), ACL_BF16));
  v.push_back(make("conv3d_f32", kConv3d));
  v.push_back(make("conv3d_f16", kConv3d, ACL_FLOAT16));
  v.push_back(make("conv3d_bf16", kConv3d, ACL_BF16));
  v.push_back(make("conv3d_depthwise_f32", conv({1, 4, 4, 6, 6}, {4, 1, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 4)));
  v.push_back(make("conv3d_groups2_f16", conv({2, 6, 3, 5, 5}, {4, 3, 2, 3, 3}, {1, 2, 1}, {0, 1, 1}, {1, 1, 1}, 2), ACL_FLOAT16));
  v.push_back(make("conv3d_wide_f32", conv({2, 32, 4, 9, 9}, {24, 32, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1})));
  v.push_back(make("transposed1d_outpad_f32", transposed(conv({2, 4, 6}, {4, 3, 3}, {2}, {1}, {1}), {1})));
  v.push_back(make("transposed2d_groups2_outpad_f32",
                   transposed(conv({1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {1, 0}, {1, 1}, 2), {1, 1})));
  v.push_back(make("transposed3d_outpad_f16",
                   transposed(conv({1, 3, 3, 4, 4}, {3, 2, 2, 3, 3}, {2, 1, 2}, {0, 1, 1}, {1, 1, 1}), {1, 0, 1}),
                   ACL_FLOAT16));
  v.push_back(make("transposed3d_dil2_bf16",
                   transposed(conv({2, 4, 3, 3, 4}, {4, 2, 2, 2, 3}, {1, 2, 2}, {1, 0, 2}, {2, 1, 2}), {0, 1, 0}),
                   ACL_BF16));
  v.push_back(make("transposed2d_pad4_f32",
                   transposed(conv({1, 4, 5, 6}, {4, 2, 3, 3}, {2, 2}, {1, 0, 0, 2}, {1, 1}), {1, 0})));
  v.push_back(make("transposed1d_groups4_dil3_f16",
                   transposed(conv({2, 8, 7}, {8, 3, 3}, {3}, {2}, {3}, 4), {2}), ACL_FLOAT16));
  v.push_back(strided("strided3d_f32", kConv3d, ACL_FLOAT));
  v.push_back(strided("strided3d_f16", kConv3d, ACL_FLOAT16));
  v.push_back(strided("strided2d_groups_bf16", conv({2, 6, 7, 7}, {9, 2, 3, 3}, {2, 1}, {1, 1}, {1, 1}, 3), ACL_BF16));
  v.push_back(strided("strided3d_transposed_f32",
                      transposed(conv({1, 4, 3, 4, 4}, {4, 2, 2, 3, 3}, {2, 2, 1}, {0, 1, 1}, {1, 1, 1}, 2), {1, 1, 0}),
                      ACL_FLOAT));
  const Case base = make("", kConv3d);
  v.push_back(with_mask(base, "mask_input_only", {true, false, false}));
  v.push_back(with_mask(base, "mask_weight_only", {false, true, false}));
  v.push_back(with_mask(base, "mask_bias_only", {false, false, true}));
  v.push_back(with_mask(base, "mask_weight_bias", {false, true, true}));
  v.push_back(with_mask(base, "mask_none", {false, false, false}));
  v.push_back(with_cube(base, "cube1_f32", 1));
  v.push_back(with_cube(base, "cube2_f32", 2));
  v.push_back(with_cube(base, "cube3_f32", 3));
  v.push_back(with_cube(make("", kConv3d, ACL_BF16), "cube2_bf16", 2));
  v.push_back(with_cube(make("", kConv3d, ACL_FLOAT16), "cube3_f16", 3));
  return v;
}

class AclnnConvBackward : public ::testing::TestWithParam<Case> {};

TEST_P(AclnnConvBackward, MatchesFloat64Reference) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Cases, AclnnConvBackward, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// cubeMathType 2 and 3 really round the fp32 inputs: the results move away from the exact
// products by more than fp32 accumulation explains (run_case checks they match the rounded ones).
TEST(AclnnCubeMath, RoundingChangesFp32Results) {
  for (int8_t cube : {2, 3}) {
    SCOPED_TRACE("cubeMathType " + std::to_string(cube));
    const Geometry g = kConv3d;
    std::mt19937 rng(99);
    HostTensor x(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW), w(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW),
        dy(g.y(), ACL_FLOAT, ACL_FORMAT_NCDHW), dx(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW);
    std::vector<double> xv = x.fill_random(rng), wv = w.fill_random(rng), yv = dy.fill_random(rng);
    IntArray stride(g.stride), padding(g.padding), dilation(g.dilation), out_pad(g.output_padding);
    BoolArray mask({true, false, false});
    uint64_t ws_size = 0;
    aclOpExecutor* exec = nullptr;
    ASSERT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(
                  dy.get(), x.get(), w.get(), nullptr, stride.handle, padding.handle,
                  dilation.handle, false, out_pad.handle, 1, mask.handle, cube, dx.get(), nullptr,
                  nullptr, &ws_size, &exec),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    std::vector<unsigned char> ws(ws_size);
    ASSERT_EQ(aclnnConvolutionBackward(ws.data(), ws_size, exec, nullptr), ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    Reference exact = reference(g, xv, wv, yv);
    double worst = 0;  // largest deviation in units of the fp32 accumulation allowance
    for (size_t i = 0; i < exact.dx.size(); ++i)
      worst = std::max(worst, std::fabs(dx.get(i) - exact.dx[i]) / (kAccEps * exact.dx_abs[i] + 1e-30));
    EXPECT_GT(worst, 1.0);
  }
}

// Mixed dtypes (the seed's promotion rule): bf16 input and weight with an fp32 gradOutput give
// fp32 gradInput and gradWeight; gradBias has gradOutput's dtype.
TEST(AclnnDtypes, MixedInputsPromoteToFloat) {
  const Geometry g = kConv3d;
  std::mt19937 rng(11);
  HostTensor x(g.x, ACL_BF16, ACL_FORMAT_NCDHW), w(g.w, ACL_FLOAT16, ACL_FORMAT_NCDHW),
      dy(g.y(), ACL_FLOAT, ACL_FORMAT_NCDHW), dx(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW),
      dw(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW), db({g.cout()}, ACL_FLOAT, ACL_FORMAT_ND);
  std::vector<double> xv = x.fill_random(rng), wv = w.fill_random(rng), yv = dy.fill_random(rng);
  ASSERT_NO_FATAL_FAILURE(run_all_outputs(g, dy, x, w, dx, dw, db));
  Reference r = reference(g, xv, wv, yv);
  expect_close("gradInput", dx, r.dx, r.dx_abs, kAccEps);
  expect_close("gradWeight", dw, r.dw, r.dw_abs, kAccEps);
  expect_close("gradBias", db, r.db, r.db_abs, kAccEps);
}

// Input with batch 0 (the empty tensor the seed allows): gradInput is empty, gradWeight and
// gradBias are sums over nothing.
TEST(AclnnEmpty, ZeroBatch) {
  Geometry g = conv({0, 4, 3, 4, 4}, {2, 4, 2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1});
  HostTensor x(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW), w(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW),
      dy(g.y(), ACL_FLOAT, ACL_FORMAT_NCDHW), dx(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW),
      dw(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW), db({2}, ACL_FLOAT, ACL_FORMAT_ND);
  std::mt19937 rng(5);
  w.fill_random(rng);
  ASSERT_NO_FATAL_FAILURE(run_all_outputs(g, dy, x, w, dx, dw, db));
  for (double v : dw.values()) EXPECT_EQ(v, 0.0);
  for (double v : db.values()) EXPECT_EQ(v, 0.0);
}

// The aclTensors (not their memory) may be destroyed between the two phases.
TEST(AclnnExecutor, OwnsCopiesOfTheViews) {
  Geometry g = kConv3d;
  std::mt19937 rng(3);
  HostTensor x(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW), w(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW),
      dy(g.y(), ACL_FLOAT, ACL_FORMAT_NCDHW), dw(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW);
  std::vector<double> xv = x.fill_random(rng), wv = w.fill_random(rng), yv = dy.fill_random(rng);
  uint64_t ws_size = 0;
  aclOpExecutor* exec = nullptr;
  {
    IntArray stride(g.stride), padding(g.padding), dilation(g.dilation);
    BoolArray mask({false, true, false});
    ASSERT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(
                  dy.get(), x.get(), w.get(), nullptr, stride.handle, padding.handle,
                  dilation.handle, false, nullptr, 1, mask.handle, 0, nullptr, dw.get(), nullptr,
                  &ws_size, &exec),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
  }
  x.destroy_handle();
  w.destroy_handle();
  dy.destroy_handle();
  std::vector<unsigned char> ws(ws_size);
  ASSERT_EQ(aclnnConvolutionBackward(ws.data(), ws_size, exec, nullptr), ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  Reference r = reference(g, xv, wv, yv);
  expect_close("gradWeight", dw, r.dw, r.dw_abs, kAccEps);
}

}  // namespace
}  // namespace aclnn_test
