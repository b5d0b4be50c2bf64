/** make_problem: a ConvGeometry and dtypes -> a checked Problem, for every route in (TBE
 * frontends, convolution_backward). Codes and their meaning: docs/validation.md.
 *
 * Ascend hardware limits (stride <= 63, sizes <= 4096, pad < kernel, buffer sizes) are
 * deliberately not enforced: a CPU computes those problems. */
#include <algorithm>

#include "tbex/errors.h"
#include "tbex/problem.h"

namespace tbex {
namespace {

constexpr const char* kDimName[3] = {"D", "H", "W"};
// TBE's codes, indexed by spatial dim D, H, W.
constexpr const char* kKernelTooBig[3] = {"E60014", "E60015", "E62507"};
constexpr const char* kOutSizeRule[3] = {"E60024", "E60025", "E62508"};
/** Largest tensor tbex accepts: 2^46 bytes (64 TiB) keeps every offset far from int64 overflow. */
constexpr int64_t kMaxBytes = int64_t(1) << 46;

void check_bytes(const std::vector<int64_t>& shape, DType t, const char* param) {
  int64_t bytes = (int64_t)dtype_size(t);
  for (int64_t d : shape) {
    user_check(d == 0 || bytes <= kMaxBytes / d, code::kSize, param,
               "size of the tensor of shape " + list_str(shape) + " exceeds 2^46 bytes");
    bytes *= d;
  }
}

/** Halide's kernels index an operand with 32-bit element offsets where its extents are known
 * at compile time (their bounds are constants): 2^31 - 1 elements per operand. Operands that
 * carry the batch (dim 0 = N) may exceed it: the kernel then runs per batch slice
 * (codegen/batched.cpp), so one sample of them must fit. */
constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;

void check_elements(const std::vector<int64_t>& shape, const char* param, bool batched) {
  int64_t n = 1;
  for (size_t i = batched ? 1 : 0; i < shape.size(); ++i)
    n = checked_mul(n, shape[i], param, "the tensor of shape " + list_str(shape));
  check_range(n, 0, kMaxElements, param,
              std::string(batched ? "the element count of one sample of shape "
                                  : "the element count of shape ") +
                  list_str(shape) + " (a kernel indexes at most 2^31-1 elements per operand" +
                  (batched ? ")" : "; larger operands are split along the batch only)"));
}

/** Dilated kernel fits the padded input, and the output size rule holds, per spatial dim.
 * Errors name the caller's parameters: filter_size / out_backprop for dW and dX, the
 * ConvGeometry fields kernel / out for the forward conv. */
void check_spatial(const ConvGeometry& g, bool forward) {
  const char* kernel_param = forward ? "kernel" : "filter_size";
  const char* out_param = forward ? "out" : "out_backprop";
  for (int i = 0; i < 3; ++i) {
    const int64_t padded = g.in[i] + g.pads[2 * i] + g.pads[2 * i + 1];
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;
    const std::string dim = kDimName[i];
    user_check(dk <= padded, kKernelTooBig[i], kernel_param,
               "dilated kernel " + dim + " (" + std::to_string(g.kernel[i]) + "-1)*" +
                   std::to_string(g.dilation[i]) + "+1 = " + std::to_string(dk) +
                   " exceeds the padded input " + dim + " " + std::to_string(g.in[i]) + "+" +
                   std::to_string(g.pads[2 * i]) + "+" + std::to_string(g.pads[2 * i + 1]) +
                   " = " + std::to_string(padded));
    const int64_t expect = (padded - dk) / g.stride[i] + 1;
    user_check(g.out[i] == expect, kOutSizeRule[i], out_param,
               std::string(out_param) + " " + dim + " is " + std::to_string(g.out[i]) +
                   " but the input " + dim + " " + std::to_string(g.in[i]) + ", pads " +
                   std::to_string(g.pads[2 * i]) + "/" + std::to_string(g.pads[2 * i + 1]) +
                   ", dilated kernel " + std::to_string(dk) + " and stride " +
                   std::to_string(g.stride[i]) + " give " + std::to_string(expect));
  }
}

/** Every size, stride and dilation > 0 and every pad >= 0 (the TBE frontends check their own
 * spelling of these first; a hand-built or framework geometry is checked here). */
void check_geometry(const ConvGeometry& g) {
  const std::pair<const char*, int64_t> counts[] = {{"N", g.n}, {"Cin", g.cin}, {"Cout", g.cout}};
  for (const auto& [name, v] : counts) {
    user_check(v > 0, code::kNotPositive, "shape",
               std::string(name) + " must be a positive int, got N=" + std::to_string(g.n) +
                   ", Cin=" + std::to_string(g.cin) + ", Cout=" + std::to_string(g.cout));
    check_range(v, 1, kMaxDim, "shape", name);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string dim = kDimName[i];
    const std::pair<const char*, int64_t> sizes[] = {
        {"shape", g.in[i]}, {"shape", g.out[i]}, {"shape", g.kernel[i]},
        {"strides", g.stride[i]}, {"dilations", g.dilation[i]}};
    for (const auto& [param, v] : sizes) {
      user_check(v > 0, code::kNotPositive, param,
                 "sizes, strides and dilations must be positive ints (dim " + dim + "), got input " +
                     std::to_string(g.in[i]) + ", output " + std::to_string(g.out[i]) + ", kernel " +
                     std::to_string(g.kernel[i]) + ", stride " + std::to_string(g.stride[i]) +
                     ", dilation " + std::to_string(g.dilation[i]));
      check_range(v, 1, kMaxDim, param, "dim " + dim);
    }
  }
  const std::vector<int64_t> pads(g.pads.begin(), g.pads.end());
  for (int64_t p : pads) {
    user_check(p >= 0, code::kValue, "pads", "every pad should be >= 0, actual " + list_str(pads));
    check_range(p, 0, kMaxDim, "pads", "every value of " + list_str(pads));
  }
}

/** The filter packing's group_dict. The forward conv's filter is the FRACTAL_Z_3D of the
 * per-group transposed weight [Cin, Cout/groups, K...]: packed as a conv whose input channels
 * are our Cout and output channels our Cin (docs/group_dict.md). */
GroupDict filter_group_dict(OpKind op, const ConvGeometry& g) {
  return op == OpKind::kForward ? derive_group_dict(g.cout, g.cin, g.groups)
                                : derive_group_dict(g.cin, g.cout, g.groups);
}

}  // namespace

Problem make_problem(OpKind op, const ConvGeometry& geo, DType in_dtype, DType res_dtype,
                     const std::string& kernel_name, std::optional<DType> bias_dtype) {
  check_geometry(geo);
  // E60038 in the conv's own Cin / Cout terms, whichever way the filter is packed.
  derive_group_dict(geo.cin, geo.cout, geo.groups);
  user_check(op != OpKind::kBackpropFilter || res_dtype == DType::kFloat32, code::kValue, "res_dtype",
             std::string("conv3d_backprop_filter computes float32, got ") + dtype_name(res_dtype));
  if (bias_dtype) {
    user_check(op == OpKind::kBackpropInput, code::kValue, "tensor_bias",
               std::string("only conv3d_backprop_input takes a bias, not ") + op_name(op));
    user_check(*bias_dtype == DType::kFloat32 || *bias_dtype == in_dtype, code::kValue, "tensor_bias",
               std::string("dtype ") + dtype_name(*bias_dtype) + " must be float32 or " +
                   dtype_name(in_dtype));
  }
  Problem p;
  p.op = op;
  p.geo = geo;
  check_geometry(geo);
  check_spatial(geo, op == OpKind::kForward);
  // A dim with one output position never multiplies its stride by anything but 0: the smallest
  // stride that keeps the output-size rule gives the same conv, and dX's stride-phase frame
  // (one phase per stride step) stays the size of the input (a stride of 2^31-1 made 2^31 phases).
  for (int i = 0; i < 3; ++i)
    if (geo.out[i] == 1) {
      const int64_t padded = geo.in[i] + geo.pads[2 * i] + geo.pads[2 * i + 1];
      p.geo.stride[i] = std::min(geo.stride[i], padded - ((geo.kernel[i] - 1) * geo.dilation[i] + 1) + 1);
    }
  p.group = filter_group_dict(op, geo);
  p.in_dtype = in_dtype;
  p.res_dtype = res_dtype;
  p.has_bias = bias_dtype.has_value();
  p.bias_dtype = bias_dtype.value_or(DType::kFloat32);
  p.kernel_name = kernel_name;
  validate(p);
  return p;
}

void validate(const Problem& p) {
  const ConvGeometry& g = p.geo;
  check_geometry(g);
  check_spatial(g, p.op == OpKind::kForward);
  internal_check(filter_group_dict(p.op, g) == p.group, "group_dict out of sync with the geometry");
  const auto shapes = p.input_shapes();
  const auto names = p.input_names();
  // Operands with the batch as dim 0: x and dy (the output's too, except dW's).
  for (size_t i = 0; i < shapes.size(); ++i) {
    check_bytes(shapes[i], DType::kFloat32, names[i].c_str());
    check_elements(shapes[i], names[i].c_str(), names[i] == "x" || names[i] == "out_backprop");
  }
  check_bytes(p.output_shape(), DType::kFloat32, "output");
  check_elements(p.output_shape(), "output", p.op != OpKind::kBackpropFilter);
  // Kernel-internal staging holds the padded input in fp32.
  const std::vector<int64_t> padded = {g.n, g.in[0] + g.pads[0] + g.pads[1], g.cin1(),
                                       g.in[1] + g.pads[2] + g.pads[3], g.in[2] + g.pads[4] + g.pads[5], kC0};
  check_bytes(padded, DType::kFloat32, "pads");
  check_elements(padded, "pads", true);
}

}  // namespace tbex
