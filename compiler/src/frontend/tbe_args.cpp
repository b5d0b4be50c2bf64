/** TBE arguments (6HD / FRACTAL_Z_3D shapes, filter_size, para_dict) -> ConvGeometry ->
 * make_problem. Only what TBE's own spelling can get wrong is checked here (codes in
 * docs/validation.md); the convolution itself is checked by make_problem (validate.cpp). */
#include <array>

#include "tbex/errors.h"
#include "tbex/layout.h"
#include "tbex/problem.h"
#include "tbe_args.h"

namespace tbex {
namespace {

void check_len(const std::vector<int64_t>& v, size_t n, const char* param) {
  user_check(v.size() == n, code::kListLength, param,
             "should be a " + std::to_string(n) + "d list, got " + std::to_string(v.size()) +
                 " values " + list_str(v));
}

/** Every value a positive int tbex can index with (TBE's dimension bound, kMaxDim). */
void check_positive(const std::vector<int64_t>& v, const char* param) {
  for (int64_t d : v) {
    user_check(d > 0, code::kNotPositive, param, "must be a positive int, got " + list_str(v));
    check_range(d, 1, kMaxDim, param, "every value of " + list_str(v));
  }
}

/** 6HD operand: 6 dims > 0 and C0 == 16. */
void check_6hd(const std::vector<int64_t>& s, const char* param) {
  user_check(s.size() == 6, code::kRank, param,
             "dim of the 6HD shape must be 6, got " + std::to_string(s.size()) + " " + list_str(s));
  check_positive(s, param);
  user_check(s[5] == kC0, "E62511", param,
             "C0 (last dim of the 6HD shape " + list_str(s) + ") must be 16, got " + std::to_string(s[5]));
}

std::vector<int64_t> or_default(const std::optional<std::vector<int64_t>>& v,
                                std::vector<int64_t> dflt) {
  return v ? *v : dflt;
}

/** N, the input's D, H, W (from `n_from`), out_backprop's Do, Ho, Wo, the kernel and Cout. */
ConvGeometry sizes(int64_t n, const char* n_from, const std::array<int64_t, 3>& in,
                   const std::vector<int64_t>& dy_shape, const std::array<int64_t, 3>& kernel,
                   int64_t cout) {
  user_check(n == dy_shape[0], "E62503", "out_backprop",
             "batch " + std::to_string(dy_shape[0]) + " differs from " + n_from + "'s batch " +
                 std::to_string(n));
  ConvGeometry g;
  g.n = n;
  g.in = in;
  g.out = {dy_shape[1], dy_shape[3], dy_shape[4]};
  g.kernel = kernel;
  g.cout = cout;
  return g;
}

/** Where D, H, W and N, C sit in a 5-int list: dW's dilations are N,D,C,H,W; dX's strides and
 * dilations are N,D,H,W,C. */
struct AxisOrder {
  const char* name;
  std::array<int, 3> dhw;
  std::array<int, 2> nc;
};
constexpr AxisOrder kNDCHW{"N,D,C,H,W", {1, 3, 4}, {0, 2}};
constexpr AxisOrder kNDHWC{"N,D,H,W,C", {1, 2, 3}, {0, 4}};

/** para_dict's strides (3 ints D,H,W, or 5 in `order`), pads (6) and dilations (5 in `order`). */
void parse_window(ConvGeometry& g, const ParaDict& para, const AxisOrder& order, bool five_strides) {
  const auto strides = or_default(para.strides, std::vector<int64_t>(five_strides ? 5 : 3, 1));
  const auto pads = or_default(para.pads, {0, 0, 0, 0, 0, 0});
  const auto dil = or_default(para.dilations, {1, 1, 1, 1, 1});
  const std::string where = std::string(" (positions ") + std::to_string(order.nc[0]) + " and " +
                            std::to_string(order.nc[1]) + " of " + order.name + ") must be 1, got ";
  check_len(strides, five_strides ? 5 : 3, "strides");
  check_positive(strides, "strides");
  if (five_strides)
    user_check(strides[order.nc[0]] == 1 && strides[order.nc[1]] == 1, code::kValue, "strides",
               "stride on N and C" + where + list_str(strides));
  check_len(pads, 6, "pads");
  check_len(dil, 5, "dilations");
  user_check(dil[order.nc[0]] == 1 && dil[order.nc[1]] == 1, "E62510", "dilations",
             "dilation on N and C" + where + list_str(dil));
  check_positive(dil, "dilations");
  for (int i = 0; i < 6; ++i) {
    user_check(pads[i] >= 0, code::kValue, "pads", "every pad should be >= 0, actual " + list_str(pads));
    check_range(pads[i], 0, kMaxDim, "pads", "every value of " + list_str(pads));
  }
  for (int i = 0; i < 3; ++i) {
    g.stride[i] = five_strides ? strides[order.dhw[i]] : strides[i];
    g.dilation[i] = dil[order.dhw[i]];
  }
  for (int i = 0; i < 6; ++i) g.pads[i] = pads[i];
}

void check_dtypes(DType a, DType b, const char* a_name, const char* b_name) {
  user_check(a == b, code::kValue, b_name,
             std::string("dtype ") + dtype_name(b) + " differs from " + a_name + "'s dtype " +
                 dtype_name(a) + "; both must be the same (float16, bfloat16 or float32)");
}

void check_dy_blocks(const ConvGeometry& g, const std::vector<int64_t>& dy_shape) {
  user_check(g.cout1() == dy_shape[2], "E62504", "out_backprop",
             "C1 " + std::to_string(dy_shape[2]) + " does not hold Cout " +
                 std::to_string(g.cout) + " of filter_size (needs C1 " +
                 std::to_string(g.cout1()) + ")");
}

}  // namespace

Problem make_backprop_filter_problem(const std::vector<int64_t>& x_shape, DType x_dtype,
                                     const std::vector<int64_t>& dy_shape, DType dy_dtype,
                                     const std::vector<int64_t>& filter_size,
                                     const ParaDict& para) {
  check_6hd(x_shape, "x");
  check_6hd(dy_shape, "out_backprop");
  check_dtypes(x_dtype, dy_dtype, "x", "out_backprop");
  const DType res_dtype = parse_dtype(para.res_dtype.value_or("float32"), "res_dtype");
  check_len(filter_size, 5, "filter_size");
  check_positive(filter_size, "filter_size");

  ConvGeometry g = sizes(x_shape[0], "x", {x_shape[1], x_shape[3], x_shape[4]}, dy_shape,
                         {filter_size[1], filter_size[3], filter_size[4]}, filter_size[0]);
  if (para.group_dict && para.group_dict->count("cout_ori"))
    user_check(para.group_dict->at("cout_ori") == g.cout, "E60038", "group_dict['cout_ori']",
               "is " + std::to_string(para.group_dict->at("cout_ori")) +
                   " but filter_size gives Cout " + std::to_string(g.cout));
  parse_window(g, para, kNDCHW, /*five_strides=*/false);
  frontend::resolve_groups(g, filter_size[2], para, std::nullopt, x_shape[2]);
  const bool cin_from_gd = !para.groups && para.group_dict && para.group_dict->count("cin_ori");
  user_check(g.cin1() == x_shape[2], "E60010", cin_from_gd ? "group_dict['cin_ori']" : "x",
             "C1 " + std::to_string(x_shape[2]) + " of x does not hold Cin = filter C " +
                 std::to_string(filter_size[2]) + " * groups " + std::to_string(g.groups) + " = " +
                 std::to_string(g.cin) + " channels (needs C1 " + std::to_string(g.cin1()) + ")");
  check_dy_blocks(g, dy_shape);
  return make_problem(OpKind::kBackpropFilter, g, x_dtype, res_dtype, para.kernel_name);
}

Problem make_backprop_input_problem(const std::vector<int64_t>& filter_shape, DType filter_dtype,
                                    const std::vector<int64_t>& dy_shape, DType dy_dtype,
                                    const std::vector<int64_t>& filter_size,
                                    const std::vector<int64_t>& input_size, const ParaDict& para,
                                    const std::vector<int64_t>& bias_shape, DType bias_dtype) {
  user_check(filter_shape.size() == 4, code::kRank, "filter",
             "dim of the FRACTAL_Z_3D shape must be 4, got " + std::to_string(filter_shape.size()) +
                 " " + list_str(filter_shape));
  check_positive(filter_shape, "filter");
  user_check(filter_shape[2] == kC0 && filter_shape[3] == kC0, "E62511", "filter",
             "FRACTAL_Z_3D shape " + list_str(filter_shape) + " must end in (16, 16)");
  check_6hd(dy_shape, "out_backprop");
  check_dtypes(filter_dtype, dy_dtype, "filter", "out_backprop");
  const DType res_dtype = parse_dtype(para.res_dtype.value_or("float16"), "res_dtype");
  check_len(filter_size, 5, "filter_size");
  check_positive(filter_size, "filter_size");
  check_len(input_size, 5, "input_size");
  check_positive(input_size, "input_size");

  ConvGeometry g = sizes(input_size[0], "input_size", {input_size[1], input_size[2], input_size[3]},
                         dy_shape, {filter_size[2], filter_size[3], filter_size[4]}, filter_size[0]);
  parse_window(g, para, kNDHWC, /*five_strides=*/true);
  frontend::resolve_groups(g, filter_size[1], para, input_size[4], std::nullopt);
  check_dy_blocks(g, dy_shape);
  const auto want = shape_fz3d({g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]}, g.groups);
  user_check(filter_shape == want, "E60010", "filter",
             "FRACTAL_Z_3D shape " + list_str(filter_shape) + " does not match filter_size " +
                 list_str(filter_size) + " with groups " + std::to_string(g.groups) + ", which needs " +
                 list_str(want));
  std::optional<DType> bias;
  if (!bias_shape.empty()) {
    user_check(bias_shape.size() == 1 && bias_shape[0] == g.cin, code::kValue, "tensor_bias",
               "shape " + list_str(bias_shape) + " must be [Cin] = [" + std::to_string(g.cin) + "]");
    bias = bias_dtype;
  }
  return make_problem(OpKind::kBackpropInput, g, filter_dtype, res_dtype, para.kernel_name, bias);
}

}  // namespace tbex
