/** Framework (PyTorch / aclnn) arguments -> the geometry of the conv whose kernels run, with the
 * errors a framework caller can make (UserError naming the argument, snake_case with the aclnn
 * spelling appended). */
#include <algorithm>
#include <cstring>

#include "conv_backward_impl.h"
#include "tbex/errors.h"

namespace tbex::conv_bwd {
namespace {

/** The aclnn spelling of a parameter, as a suffix for messages (Python spells them snake_case). */
std::string aclnn_alias(const char* snake) {
  static const std::pair<const char*, const char*> kCamel[] = {
      {"grad_output", "gradOutput"},     {"bias_sizes", "biasSizes"},
      {"output_padding", "outputPadding"}, {"output_mask", "outputMask"},
      {"cube_math_type", "cubeMathType"}, {"grad_input", "gradInput"},
      {"grad_weight", "gradWeight"},     {"grad_bias", "gradBias"}};
  for (const auto& [s, c] : kCamel)
    if (std::strcmp(s, snake) == 0) return std::string(" (aclnn: ") + c + ")";
  return "";
}

DType promote(DType a, DType b) { return a == b ? a : DType::kFloat32; }

/** One window parameter: `n` values (or `alt` values when alt > 0), each >= lo. */
std::vector<int64_t> window(const std::vector<int64_t>& v, const char* param, size_t n, size_t alt,
                            int64_t lo) {
  check(v.size() == n || (alt && v.size() == alt), param,
        "expected " + std::to_string(n) + (alt ? " or " + std::to_string(alt) : "") +
            " values for a " + std::to_string(n) + "D convolution, got " +
            std::to_string(v.size()) + " " + list_str(v));
  for (int64_t x : v)
    check(x >= lo && x <= kMaxDim, param,
          "every value must be in [" + std::to_string(lo) + ", " + std::to_string(kMaxDim) +
              "], got " + list_str(v));
  return v;
}

/** A spatial list of rank-2 values, widened to D, H, W with `fill` for the missing leading dims. */
std::array<int64_t, 3> to3(const std::vector<int64_t>& v, int64_t fill) {
  std::array<int64_t, 3> r{fill, fill, fill};
  std::copy(v.begin(), v.end(), r.begin() + (3 - v.size()));
  return r;
}

std::array<int64_t, 5> to5(const std::vector<int64_t>& v) {
  std::array<int64_t, 5> r{v[0], v[1], 1, 1, 1};
  std::copy(v.begin() + 2, v.end(), r.begin() + (7 - v.size()));
  return r;
}

void check_shapes(const ConvBackwardArgs& a) {
  const auto& in = a.input_shape;
  const auto& go = a.grad_output_shape;
  const auto& w = a.weight_shape;
  check(in.size() >= 3 && in.size() <= 5, "input",
        "rank must be 3 (NCL), 4 (NCHW) or 5 (NCDHW), got shape " + list_str(in));
  check(go.size() == in.size(), "grad_output",
        "rank " + std::to_string(go.size()) + " differs from input's rank " +
            std::to_string(in.size()) + " (shapes " + list_str(go) + " and " + list_str(in) + ")");
  check(w.size() == in.size(), "weight",
        "rank " + std::to_string(w.size()) + " differs from input's rank " +
            std::to_string(in.size()) + " (shapes " + list_str(w) + " and " + list_str(in) + ")");
  for (size_t i = 0; i < in.size(); ++i) {
    check(in[i] > 0 || (i == 0 && in[i] == 0), "input",
          "every dim must be > 0 (only N may be 0), got shape " + list_str(in));
    check(go[i] > 0 || (i == 0 && go[i] == 0 && in[0] == 0), "grad_output",
          "every dim must be > 0 (N may be 0 only with input's N), got shape " + list_str(go));
    check(w[i] > 0, "weight", "every dim must be > 0, got shape " + list_str(w));
    check(in[i] <= INT32_MAX, "input", "dims must be < 2^31, got shape " + list_str(in));
    check(go[i] <= INT32_MAX, "grad_output", "dims must be < 2^31, got shape " + list_str(go));
    check(w[i] <= INT32_MAX, "weight", "dims must be < 2^31, got shape " + list_str(w));
  }
  // Past 2^46 bytes (fp32) an operand's offsets come near int64's end: refused, as by the DSL.
  const std::pair<const char*, const std::vector<int64_t>*> operands[] = {
      {"input", &in}, {"grad_output", &go}, {"weight", &w}};
  for (const auto& [name, shape] : operands) {
    int64_t bytes = 4;
    for (int64_t d : *shape)
      check(!__builtin_mul_overflow(bytes, d, &bytes) && bytes <= (int64_t(1) << 46), name,
            "size of shape " + list_str(*shape) + " exceeds 2^46 bytes");
  }
}

/** Channels of the conv C: normal -> the conv itself; transposed -> its adjoint. */
void set_channels(const ConvBackwardArgs& a, ConvGeometry& c) {
  const auto& in = a.input_shape;
  const auto& go = a.grad_output_shape;
  const auto& w = a.weight_shape;
  const int64_t g = a.groups;
  if (!a.transposed) {
    check(w[1] * g == in[1], "groups",
          "groups " + std::to_string(g) + " * weight's C " + std::to_string(w[1]) +
              " must equal input's C " + std::to_string(in[1]));
    check(w[0] % g == 0, "groups",
          "weight's out channels " + std::to_string(w[0]) + " are not divisible by groups " +
              std::to_string(g));
    check(go[1] == w[0], "grad_output",
          "C " + std::to_string(go[1]) + " must equal weight's out channels " + std::to_string(w[0]));
    c.cin = in[1];
    c.cout = w[0];
  } else {
    check(w[0] == in[1], "weight",
          "transposed weight's dim 0 " + std::to_string(w[0]) + " must equal input's C " +
              std::to_string(in[1]));
    check(w[0] % g == 0, "groups",
          "input's C " + std::to_string(w[0]) + " is not divisible by groups " + std::to_string(g));
    check(go[1] == w[1] * g, "grad_output",
          "C " + std::to_string(go[1]) + " must equal weight's dim 1 " + std::to_string(w[1]) +
              " * groups " + std::to_string(g));
    c.cin = go[1];
    c.cout = in[1];
  }
  c.groups = g;
  c.n = in[0];
}

/** Window and spatial sizes of C; grad_output's spatial dims must follow the output rule. */
void set_window(const ConvBackwardArgs& a, ConvGeometry& c) {
  const auto& in = a.input_shape;
  const auto& go = a.grad_output_shape;
  const auto& w = a.weight_shape;
  const size_t sp = in.size() - 2;
  const auto stride = window(a.stride, "stride", sp, 0, 1);
  const auto dil = window(a.dilation, "dilation", sp, 0, 1);
  // rank-2 values (symmetric), or (head, tail) per dim: aclnn's 4-value 2D padding, and the same
  // for 1D / 3D as a tbex extension (TBE's asymmetric pads).
  const auto pad = window(a.padding, "padding", sp, 2 * sp, 0);
  const auto opad = a.output_padding.empty() ? std::vector<int64_t>(sp, 0)
                                             : window(a.output_padding, "output_padding", sp, 0, 0);
  check(a.groups >= 1 && a.groups <= kMaxDim, "groups",
        "must be in [1, " + std::to_string(kMaxDim) + "], got " + std::to_string(a.groups));
  check(a.cube_math_type >= 0 && a.cube_math_type <= 3, "cube_math_type",
        "must be 0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32), got " +
            std::to_string(a.cube_math_type));
  for (size_t i = 0; i < sp; ++i) {
    if (!a.transposed)
      check(opad[i] == 0, "output_padding",
            "must be 0 unless transposed is true, got " + list_str(a.output_padding));
    else
      check(opad[i] < stride[i], "output_padding",
            "each value must be in [0, stride), got " + list_str(opad) + " with stride " + list_str(stride));
  }
  check(go[0] == in[0], "grad_output",
        "batch " + std::to_string(go[0]) + " differs from input's batch " + std::to_string(in[0]));
  set_channels(a, c);

  const auto k3 = to3({w.begin() + 2, w.end()}, 1);
  const auto s3 = to3(stride, 1), d3 = to3(dil, 1), op3 = to3(opad, 0);
  const auto in3 = to3({in.begin() + 2, in.end()}, 1), go3 = to3({go.begin() + 2, go.end()}, 1);
  static const char* kAxis[3] = {"D", "H", "W"};
  for (int i = 0; i < 3; ++i) {
    const int dim = i - (3 - (int)sp);  // index into the caller's lists; < 0 for a unit dim
    const int64_t head = dim < 0 ? 0 : pad.size() == sp ? pad[dim] : pad[2 * dim];
    const int64_t tail = dim < 0 ? 0 : pad.size() == sp ? pad[dim] : pad[2 * dim + 1];
    const int64_t dk = d3[i] * (k3[i] - 1) + 1;
    const int64_t padded = in3[i] + head + tail;
    int64_t want;
    if (!a.transposed) {
      check(padded >= dk, "input",
            std::string("padded ") + kAxis[i] + " " + std::to_string(padded) +
                " is smaller than the dilated kernel " + std::to_string(dk) + " (input " + list_str(in) +
                ", padding " + list_str(a.padding) + ", weight " + list_str(w) + ")");
      want = (padded - dk) / s3[i] + 1;
    } else {
      want = (in3[i] - 1) * s3[i] - head - tail + dk + op3[i];
      check(want >= 1, "padding",
            std::string("the transposed output ") + kAxis[i] + " would be " +
                std::to_string(want) + " (padding " + list_str(a.padding) + " too large)");
    }
    check(go3[i] == want, "grad_output",
          std::string("spatial ") + kAxis[i] + " is " + std::to_string(go3[i]) +
              " but input " + list_str(in) + ", weight " + list_str(w) + ", stride " + list_str(stride) +
              ", padding " + list_str(a.padding) + ", dilation " + list_str(dil) +
              (a.transposed ? ", output_padding " + list_str(opad) : "") + " give " +
              std::to_string(want));
    c.kernel[i] = k3[i];
    c.stride[i] = s3[i];
    c.dilation[i] = d3[i];
    c.pads[2 * i] = head;
    c.pads[2 * i + 1] = tail;
    c.in[i] = a.transposed ? go3[i] : in3[i];
    c.out[i] = a.transposed ? in3[i] : go3[i];
  }
}

/** Expected outputs: grad_input / grad_weight in the wider of their operands' dtypes,
 * grad_bias in grad_output's; a caller's declared outputs must match. */
std::array<TensorSpec, 3> output_specs(const ConvBackwardArgs& a) {
  const auto& w = a.weight_shape;
  const int64_t bias_c = a.transposed ? w[1] * a.groups : w[0];
  if (a.output_mask[2])
    check(a.bias_sizes.has_value(), "bias_sizes", "is required when output_mask[2] is true");
  if (a.bias_sizes)
    check(a.bias_sizes->size() == 1 && (*a.bias_sizes)[0] == bias_c, "bias_sizes",
          "must be [" + std::to_string(bias_c) + "] (" +
              (a.transposed ? "weight.shape[1] * groups" : "weight.shape[0]") + "), got " +
              list_str(*a.bias_sizes));
  std::array<TensorSpec, 3> spec;
  spec[0] = {a.input_shape, promote(a.input_dtype, a.grad_output_dtype)};
  spec[1] = {w, promote(a.weight_dtype, a.grad_output_dtype)};
  spec[2] = {{bias_c}, a.grad_output_dtype};
  const std::optional<TensorSpec>* given[3] = {&a.grad_input, &a.grad_weight, &a.grad_bias};
  static const char* kOut[3] = {"grad_input", "grad_weight", "grad_bias"};
  for (int i = 0; i < 3; ++i) {
    if (!a.output_mask[i] || !*given[i]) continue;
    const TensorSpec& t = **given[i];
    check(t.shape == spec[i].shape, kOut[i],
          "shape " + list_str(t.shape) + " must be " + list_str(spec[i].shape));
    check(t.dtype == spec[i].dtype, kOut[i],
          std::string("dtype ") + dtype_name(t.dtype) + " must be " + dtype_name(spec[i].dtype) +
              (i == 2 ? " (grad_output's dtype)"
                      : i == 0 ? " (the wider of input's and grad_output's dtypes)"
                               : " (the wider of weight's and grad_output's dtypes)"));
  }
  return spec;
}

}  // namespace

void check(bool cond, const char* param, const std::string& msg) {
  if (!cond) throw UserError(code::kAclnnInvalid, param, msg + aclnn_alias(param));
}

Checked check_args(const ConvBackwardArgs& a) {
  Checked c;
  check_shapes(a);
  set_window(a, c.geo);
  c.spec = output_specs(a);
  return c;
}

View5 view_of(const StridedTensor* t, const char* param, const std::vector<int64_t>& shape,
              DType dtype) {
  if (t == nullptr)
    throw UserError(code::kAclnnNull, param, "is required (its output_mask entry is true) but null");
  check(t->shape == shape, param, "shape " + list_str(t->shape) + " must be " + list_str(shape));
  check(t->dtype == dtype, param,
        std::string("dtype ") + dtype_name(t->dtype) + " must be " + dtype_name(dtype));
  std::vector<int64_t> st = t->strides;
  if (st.empty()) {
    st.assign(shape.size(), 1);
    for (int i = (int)shape.size() - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  }
  check(st.size() == shape.size(), param,
        "has " + std::to_string(st.size()) + " strides for rank " + std::to_string(shape.size()));
  int64_t numel = 1;
  for (size_t i = 0; i < st.size(); ++i) {
    check(st[i] >= 0, param, "negative strides are not supported, got " + list_str(st));
    numel *= shape[i];
  }
  if (t->data == nullptr && numel != 0)
    throw UserError(code::kAclnnNull, param, "data pointer is null");
  View5 v;
  v.data = t->data;
  v.dtype = dtype;
  if (shape.size() == 1) {  // grad_bias: [C] as (C, 1, 1, 1, 1)
    v.shape = {shape[0], 1, 1, 1, 1};
    v.strides = {st[0], 0, 0, 0, 0};
    return v;
  }
  v.shape = to5(shape);
  std::vector<int64_t> st5 = st;
  st5.insert(st5.begin() + 2, 5 - shape.size(), 0);  // unit D/H dims
  std::copy(st5.begin(), st5.end(), v.strides.begin());
  return v;
}

}  // namespace tbex::conv_bwd
