// One builder for every route in: the TBE frontend (6HD / FRACTAL_Z_3D shapes + para_dict) and
// convolution_backward (framework NCHW arguments) build the identical Problem for one
// convolution (make_problem's own errors: test_errors.cpp).
#include <gtest/gtest.h>

#include "api/conv_backward_impl.h"
#include "tbex/tbex.h"

namespace tbex {
namespace {

/** A convolution described once, in the test's own terms; both routes' arguments are written
 * from it independently. sp = spatial rank (1, 2 or 3); lists hold sp values (pads: head, tail
 * per dim), the leading D (and H for 1D) being unit. */
struct Conv {
  const char* name;
  int64_t n, cin, cout, groups;
  std::vector<int64_t> in, k, s, dil, pads;
  DType dtype = DType::kFloat32;

  size_t sp() const { return in.size(); }
  std::vector<int64_t> out() const {
    std::vector<int64_t> o;
    for (size_t i = 0; i < sp(); ++i)
      o.push_back((in[i] + pads[2 * i] + pads[2 * i + 1] - (dil[i] * (k[i] - 1) + 1)) / s[i] + 1);
    return o;
  }
  /** A list of sp values as D, H, W (unit leading dims). */
  std::array<int64_t, 3> dhw(const std::vector<int64_t>& v, int64_t fill = 1) const {
    std::array<int64_t, 3> r{fill, fill, fill};
    for (size_t i = 0; i < sp(); ++i) r[3 - sp() + i] = v[i];
    return r;
  }
  std::vector<int64_t> pads6() const {
    std::vector<int64_t> p(6, 0);
    for (size_t i = 0; i < 2 * sp(); ++i) p[2 * (3 - sp()) + i] = pads[i];
    return p;
  }
  std::vector<int64_t> cat(std::vector<int64_t> head, const std::vector<int64_t>& tail) const {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  }
};

const Conv kConvs[] = {
    {"grouped_3d", 2, 32, 48, 2, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"strided_2d", 1, 16, 32, 1, {11, 9}, {3, 2}, {2, 3}, {1, 1}, {1, 1, 0, 0}, DType::kFloat16},
    {"dilated_1d", 3, 8, 24, 1, {20}, {3}, {1}, {3}, {2, 2}},
    {"asym_pads_3d", 1, 20, 36, 4, {4, 7, 9}, {2, 3, 3}, {1, 2, 2}, {2, 1, 1}, {0, 1, 2, 0, 1, 2}},
    {"depthwise_2d", 2, 24, 24, 24, {8, 8}, {3, 3}, {1, 1}, {1, 2}, {0, 2, 2, 0}, DType::kBFloat16},
};

/** convolution_backward's arguments for `c` (transposed: c is the conv C whose dX the
 * transposed forward is, so input and grad_output swap roles). */
ConvBackwardArgs framework_args(const Conv& c, bool transposed) {
  ConvBackwardArgs a;
  const auto x = c.cat({c.n, c.cin}, c.in), y = c.cat({c.n, c.cout}, c.out());
  a.input_shape = transposed ? y : x;
  a.grad_output_shape = transposed ? x : y;
  a.weight_shape = c.cat({c.cout, c.cin / c.groups}, c.k);
  a.grad_output_dtype = a.input_dtype = a.weight_dtype = c.dtype;
  a.stride = c.s;
  a.dilation = c.dil;
  a.padding = c.pads;
  a.groups = c.groups;
  a.transposed = transposed;
  a.bias_sizes = std::vector<int64_t>{transposed ? c.cin : c.cout};
  if (transposed)  // the rows the forward output rule drops come back as output_padding
    for (size_t i = 0; i < c.sp(); ++i)
      a.output_padding.push_back((c.in[i] + c.pads[2 * i] + c.pads[2 * i + 1] -
                                  (c.dil[i] * (c.k[i] - 1) + 1)) % c.s[i]);
  return a;
}

/** TBE's dsl.conv3d_backprop_filter for `c`: grouped cases give Cin through group_dict (TBE's own
 * spelling), the others through the groups extension. */
Problem tbe_filter_problem(const Conv& c) {
  const auto in = c.dhw(c.in), out = c.dhw(c.out()), k = c.dhw(c.k), s = c.dhw(c.s), d = c.dhw(c.dil);
  ParaDict para;
  para.strides = std::vector<int64_t>{s[0], s[1], s[2]};
  para.pads = c.pads6();
  para.dilations = std::vector<int64_t>{1, d[0], 1, d[1], d[2]};
  if (c.groups > 1)
    para.group_dict = std::map<std::string, int64_t>{{"cin_ori", c.cin}, {"cout_ori", c.cout}};
  else
    para.groups = 1;
  return make_backprop_filter_problem({c.n, in[0], (c.cin + 15) / 16, in[1], in[2], 16}, c.dtype,
                                      {c.n, out[0], (c.cout + 15) / 16, out[1], out[2], 16}, c.dtype,
                                      {c.cout, k[0], c.cin / c.groups, k[1], k[2]}, para);
}

/** TBE's dsl.conv3d_backprop_input for `c` (res_dtype: the framework's grad_input dtype). */
Problem tbe_input_problem(const Conv& c) {
  const auto in = c.dhw(c.in), out = c.dhw(c.out()), k = c.dhw(c.k), s = c.dhw(c.s), d = c.dhw(c.dil);
  ParaDict para;
  para.strides = std::vector<int64_t>{1, s[0], s[1], s[2], 1};
  para.pads = c.pads6();
  para.dilations = std::vector<int64_t>{1, d[0], d[1], d[2], 1};
  para.groups = c.groups;
  para.res_dtype = dtype_name(c.dtype);
  const Dims5 w{c.cout, c.cin / c.groups, k[0], k[1], k[2]};
  return make_backprop_input_problem(shape_fz3d(w, c.groups), c.dtype,
                                     {c.n, out[0], (c.cout + 15) / 16, out[1], out[2], 16}, c.dtype,
                                     {w.begin(), w.end()}, {c.n, in[0], in[1], in[2], c.cin}, para);
}

void expect_same(const Problem& a, const Problem& b, const std::string& what) {
  EXPECT_EQ(a.canonical(), b.canonical()) << what;
  EXPECT_TRUE(a.group == b.group) << what << ": " << a.group.to_string() << " vs " << b.group.to_string();
  EXPECT_EQ(a.input_shapes(), b.input_shapes()) << what;
  EXPECT_EQ(a.output_shape(), b.output_shape()) << what;
}

TEST(ProblemRoutes, TbeAndFrameworkBuildTheSameProblem) {
  for (const Conv& c : kConvs) {
    const ConvBackwardArgs a = framework_args(c, false);
    const conv_bwd::KernelProblems k = conv_bwd::kernel_problems(a, conv_bwd::check_args(a));
    ASSERT_TRUE(k.dx && k.dw) << c.name;
    EXPECT_EQ(k.dx->op, OpKind::kBackpropInput) << c.name;
    expect_same(*k.dw, tbe_filter_problem(c), std::string(c.name) + " dW");
    expect_same(*k.dx, tbe_input_problem(c), std::string(c.name) + " dX");
  }
}

TEST(ProblemRoutes, TransposedRunsTheSameConv) {
  for (const Conv& c : kConvs) {
    const ConvBackwardArgs a = framework_args(c, true);
    const conv_bwd::KernelProblems k = conv_bwd::kernel_problems(a, conv_bwd::check_args(a));
    ASSERT_TRUE(k.dx && k.dw) << c.name;
    // grad_weight of the transposed conv is dW of C, as TBE spells C's dW.
    expect_same(*k.dw, tbe_filter_problem(c), std::string(c.name) + " transposed dW");
    // grad_input is C's forward conv, its filter packed per-group transposed.
    ASSERT_EQ(k.dx->op, OpKind::kForward) << c.name;
    EXPECT_EQ(k.dx->geo.cin, c.cin) << c.name;
    EXPECT_EQ(k.dx->geo.cout, c.cout) << c.name;
    EXPECT_EQ(k.dx->geo.pads, (std::array<int64_t, 6>{c.pads6()[0], c.pads6()[1], c.pads6()[2],
                                                      c.pads6()[3], c.pads6()[4], c.pads6()[5]}))
        << c.name;
    EXPECT_TRUE(k.dx->group == derive_group_dict(c.cout, c.cin, c.groups)) << c.name;
    EXPECT_EQ(k.dx->x_shape(), k.dw->x_shape()) << c.name;  // both read grad_output as C's x
  }
}

TEST(ProblemRoutes, MaskAndEmptyBatchBuildNoKernel) {
  ConvBackwardArgs a = framework_args(kConvs[0], false);
  a.output_mask = {false, true, false};
  auto k = conv_bwd::kernel_problems(a, conv_bwd::check_args(a));
  EXPECT_FALSE(k.dx);
  EXPECT_TRUE(k.dw);
  a.input_shape[0] = a.grad_output_shape[0] = 0;
  a.output_mask = {true, true, true};
  k = conv_bwd::kernel_problems(a, conv_bwd::check_args(a));
  EXPECT_FALSE(k.dx || k.dw);
}

// Workspace: dW shares dX's grad_output pack only when both compute in one dtype.
TEST(ProblemRoutes, WorkspaceLayout) {
  ConvBackwardArgs a = framework_args(kConvs[0], false);
  auto k = conv_bwd::kernel_problems(a, conv_bwd::check_args(a));
  const conv_bwd::Layout shared = conv_bwd::workspace_layout(a, k);
  EXPECT_TRUE(shared.share_go);
  EXPECT_EQ(shared.dw_go, shared.dx_go);
  a.weight_dtype = a.grad_output_dtype = DType::kFloat16;  // dX computes fp16, dW (mixed) fp32
  k = conv_bwd::kernel_problems(a, conv_bwd::check_args(a));
  ASSERT_NE(k.dx->in_dtype, k.dw->in_dtype);
  const conv_bwd::Layout split = conv_bwd::workspace_layout(a, k);
  EXPECT_FALSE(split.share_go);
  // Buffers follow each other: dX's three, then dW's own grad_output, input and output.
  const uint64_t offs[] = {split.dx_w, split.dx_go, split.dx_out, split.dw_go, split.dw_in, split.dw_out};
  for (size_t i = 1; i < 6; ++i) EXPECT_GT(offs[i], offs[i - 1]) << i;
  EXPECT_GT(split.bytes, split.dw_out);
  for (uint64_t off : {split.dx_w, split.dx_go, split.dx_out, split.dw_go, split.dw_in, split.dw_out})
    EXPECT_EQ(off % 64, 0u);
}

}  // namespace
}  // namespace tbex
