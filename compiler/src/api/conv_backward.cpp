/** Convolution backward in framework terms, on tbex's kernels.
 *
 * Every problem runs as 3D (1D/2D get unit D/H dims). For the forward conv y = conv(x, W):
 *   grad_input  = dX(W, dy)             (conv3d_backprop_input)
 *   grad_weight = dW(x, dy)             (conv3d_backprop_filter)
 * For a transposed forward y = conv_transpose(x, W), which is dX of the conv C with input y and
 * output x (C: Cin = Cout_t, Cout = Cin_t, weight W as given):
 *   grad_input  = forward conv C(dy, W)  (conv3d; W packed per-group transposed)
 *   grad_weight = dW_C(x = dy, dy = x)
 * grad_bias is the sum of dy over N and space either way.
 *
 * cubeMathType on CPU (the compute dtype is what operands are packed to; products accumulate in
 * fp32 in every case):
 *   0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION: the inputs' own values (1 keeps fp32: allowed,
 *     not required, to go lower, and fp32 is the fast path here);
 *   2 USE_FP16: every input is rounded to fp16 first;
 *   3 USE_HF32: fp32 inputs are rounded to HF32 (11 mantissa bits) first; fp16/bf16 are kept. */
#include "tbex/conv_backward.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <sstream>

#include <chrono>

#include "tbex/log.h"
#include "tbex/errors.h"
#include "tbex/kernel.h"
#include "tbex/layout.h"
#include "tbex/pack.h"

namespace tbex {
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

void check(bool cond, const char* param, const std::string& msg) {
  if (!cond) throw UserError("", param, msg + aclnn_alias(param));
}

DType promote(DType a, DType b) { return a == b ? a : DType::kFloat32; }

/** One window parameter: `n` values (or `alt` values when alt > 0), each >= lo. */
std::vector<int64_t> window(const std::vector<int64_t>& v, const char* param, size_t n, size_t alt,
                            int64_t lo) {
  check(v.size() == n || (alt && v.size() == alt), param,
        "expected " + std::to_string(n) + (alt ? " or " + std::to_string(alt) : "") +
            " values for a " + std::to_string(n) + "D convolution, got " +
            std::to_string(v.size()) + " " + list_str(v));
  for (int64_t x : v) check(x >= lo, param, "every value must be >= " + std::to_string(lo) + ", got " + list_str(v));
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

struct Buffer {
  uint64_t offset = 0, bytes = 0;
};

/** The packed operands of one kernel run: where they sit in the workspace. */
struct Step {
  std::shared_ptr<const Kernel> kernel;
  DType compute = DType::kFloat32;
};

class Plan final : public ConvBackwardPlan {
 public:
  explicit Plan(const ConvBackwardArgs& a) : args_(a) {
    validate_args();
    build();
  }

  uint64_t workspace_bytes() const override { return workspace_; }
  TensorSpec output_spec(int i) const override { return spec_.at(i); }
  const ConvBackwardArgs& args() const override { return args_; }
  std::string describe() const override {
    std::string s = args_.transposed ? "transposed; " : "";
    if (dx_.kernel) s += std::string(args_.transposed ? "grad_input: conv3d " : "grad_input: dX ") + dx_.kernel->schedule_name() + "; ";
    if (dw_.kernel) s += "grad_weight: dW " + dw_.kernel->schedule_name() + "; ";
    if (args_.output_mask[2]) s += "grad_bias: sum; ";
    return s + "workspace " + std::to_string(workspace_) + " bytes";
  }

  void run(const StridedTensor& grad_output, const StridedTensor& input,
           const StridedTensor& weight, const StridedTensor* grad_input,
           const StridedTensor* grad_weight, const StridedTensor* grad_bias, void* workspace,
           uint64_t workspace_size) const override;

 private:
  void validate_args();
  void build();
  uint64_t reserve(const std::vector<int64_t>& shape, DType t) {
    uint64_t bytes = dtype_size(t);
    for (int64_t d : shape) bytes *= (uint64_t)d;
    const uint64_t off = workspace_;
    workspace_ += (bytes + 63) / 64 * 64;
    return off;
  }
  DType compute_dtype(DType a, DType b) const {
    return args_.cube_math_type == 2 ? DType::kFloat16 : promote(a, b);
  }

  ConvBackwardArgs args_;
  ConvGeometry geo_;           ///< the conv whose dX/dW/forward kernels run (3D)
  std::array<TensorSpec, 3> spec_;
  Step dx_, dw_;               ///< grad_input / grad_weight kernels (null when masked off / N = 0)
  uint64_t workspace_ = 0;
  // Workspace offsets of the packed operands.
  // grad_output's 6HD pack is shared by both kernels when their compute dtypes agree.
  uint64_t off_dx_go_ = 0, off_dx_w_ = 0, off_dx_out_ = 0;
  uint64_t off_dw_go_ = 0, off_dw_in_ = 0, off_dw_out_ = 0;
  bool share_go_ = false;
  mutable std::mutex ws_mu_;
  mutable std::unique_ptr<uint8_t[]> ws_cache_;
};

void Plan::validate_args() {
  const auto& a = args_;
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
  const size_t sp = in.size() - 2;
  const auto stride = window(a.stride, "stride", sp, 0, 1);
  const auto dil = window(a.dilation, "dilation", sp, 0, 1);
  // rank-2 values (symmetric), or (head, tail) per dim: aclnn's 4-value 2D padding, and the same
  // for 1D / 3D as a tbex extension (TBE's asymmetric pads).
  const auto pad = window(a.padding, "padding", sp, 2 * sp, 0);
  const auto opad = a.output_padding.empty() ? std::vector<int64_t>(sp, 0)
                                             : window(a.output_padding, "output_padding", sp, 0, 0);
  check(a.groups >= 1, "groups", "must be >= 1, got " + std::to_string(a.groups));
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

  // Channels. The kernels' conv C: normal -> the conv itself; transposed -> its adjoint.
  const int64_t g = a.groups;
  int64_t cin_c, cout_c;
  if (!a.transposed) {
    check(w[1] * g == in[1], "groups",
          "groups " + std::to_string(g) + " * weight's C " + std::to_string(w[1]) +
              " must equal input's C " + std::to_string(in[1]));
    check(w[0] % g == 0, "groups",
          "weight's out channels " + std::to_string(w[0]) + " are not divisible by groups " +
              std::to_string(g));
    check(go[1] == w[0], "grad_output",
          "C " + std::to_string(go[1]) + " must equal weight's out channels " + std::to_string(w[0]));
    cin_c = in[1];
    cout_c = w[0];
  } else {
    check(w[0] == in[1], "weight",
          "transposed weight's dim 0 " + std::to_string(w[0]) + " must equal input's C " +
              std::to_string(in[1]));
    check(w[0] % g == 0, "groups",
          "input's C " + std::to_string(w[0]) + " is not divisible by groups " + std::to_string(g));
    check(go[1] == w[1] * g, "grad_output",
          "C " + std::to_string(go[1]) + " must equal weight's dim 1 " + std::to_string(w[1]) +
              " * groups " + std::to_string(g));
    cin_c = go[1];
    cout_c = in[1];
  }

  // Spatial sizes: the forward output rule.
  ConvGeometry& c = geo_;
  c.groups = g;
  c.n = in[0];
  c.cin = cin_c;
  c.cout = cout_c;
  const auto k3 = to3({w.begin() + 2, w.end()}, 1);
  const auto s3 = to3(stride, 1), d3 = to3(dil, 1), op3 = to3(opad, 0);
  std::vector<int64_t> pads6(6, 0);
  for (size_t i = 0; i < sp; ++i) {
    const size_t dim = 3 - sp + i;
    pads6[2 * dim] = pad.size() == sp ? pad[i] : pad[2 * i];
    pads6[2 * dim + 1] = pad.size() == sp ? pad[i] : pad[2 * i + 1];
  }
  const auto in3 = to3({in.begin() + 2, in.end()}, 1), go3 = to3({go.begin() + 2, go.end()}, 1);
  static const char* kAxis[3] = {"D", "H", "W"};
  for (int i = 0; i < 3; ++i) {
    const int64_t dk = d3[i] * (k3[i] - 1) + 1;
    const int64_t padded = in3[i] + pads6[2 * i] + pads6[2 * i + 1];
    int64_t want;
    if (!a.transposed) {
      check(padded >= dk, "input",
            std::string("padded ") + kAxis[i] + " " + std::to_string(padded) +
                " is smaller than the dilated kernel " + std::to_string(dk) + " (input " + list_str(in) +
                ", padding " + list_str(a.padding) + ", weight " + list_str(w) + ")");
      want = (padded - dk) / s3[i] + 1;
    } else {
      want = (in3[i] - 1) * s3[i] - pads6[2 * i] - pads6[2 * i + 1] + dk + op3[i];
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
    c.pads[2 * i] = pads6[2 * i];
    c.pads[2 * i + 1] = pads6[2 * i + 1];
    c.in[i] = a.transposed ? go3[i] : in3[i];
    c.out[i] = a.transposed ? in3[i] : go3[i];
  }

  // Bias and outputs.
  const int64_t bias_c = a.transposed ? w[1] * g : w[0];
  if (a.output_mask[2]) {
    check(a.bias_sizes.has_value(), "bias_sizes", "is required when output_mask[2] is true");
  }
  if (a.bias_sizes)
    check(a.bias_sizes->size() == 1 && (*a.bias_sizes)[0] == bias_c, "bias_sizes",
          "must be [" + std::to_string(bias_c) + "] (" +
              (a.transposed ? "weight.shape[1] * groups" : "weight.shape[0]") + "), got " +
              list_str(*a.bias_sizes));
  spec_[0] = {in, promote(a.input_dtype, a.grad_output_dtype)};
  spec_[1] = {w, promote(a.weight_dtype, a.grad_output_dtype)};
  spec_[2] = {{bias_c}, a.grad_output_dtype};
  const std::optional<TensorSpec>* given[3] = {&a.grad_input, &a.grad_weight, &a.grad_bias};
  static const char* kOut[3] = {"grad_input", "grad_weight", "grad_bias"};
  for (int i = 0; i < 3; ++i) {
    if (!a.output_mask[i] || !*given[i]) continue;
    const TensorSpec& t = **given[i];
    check(t.shape == spec_[i].shape, kOut[i],
          "shape " + list_str(t.shape) + " must be " + list_str(spec_[i].shape));
    check(t.dtype == spec_[i].dtype, kOut[i],
          std::string("dtype ") + dtype_name(t.dtype) + " must be " + dtype_name(spec_[i].dtype) +
              (i == 2 ? " (grad_output's dtype)"
                      : i == 0 ? " (the wider of input's and grad_output's dtypes)"
                               : " (the wider of weight's and grad_output's dtypes)"));
  }
}

void Plan::build() {
  const auto& a = args_;
  if (geo_.n == 0) return;  // empty batch: grad_weight and grad_bias are zeros, nothing to run
  const ConvGeometry& c = geo_;
  const Dims5 x_dims{c.n, c.cin, c.in[0], c.in[1], c.in[2]};
  const Dims5 dy_dims{c.n, c.cout, c.out[0], c.out[1], c.out[2]};
  // The conv C's weight [Cout_c, Cin_c/groups, k]: the weight as given, in both cases.
  const Dims5 w_dims{c.cout, c.cin / c.groups, c.kernel[0], c.kernel[1], c.kernel[2]};
  // C's input and output tensors, in caller terms.
  const DType x_dt = a.transposed ? a.grad_output_dtype : a.input_dtype;
  const DType dy_dt = a.transposed ? a.input_dtype : a.grad_output_dtype;

  ParaDict para;
  para.groups = c.groups;
  para.pads = std::vector<int64_t>(c.pads.begin(), c.pads.end());
  if (a.output_mask[0]) {
    dx_.compute = compute_dtype(a.weight_dtype, a.grad_output_dtype);
    Problem p;
    if (!a.transposed) {
      para.strides = std::vector<int64_t>{1, c.stride[0], c.stride[1], c.stride[2], 1};
      para.dilations = std::vector<int64_t>{1, c.dilation[0], c.dilation[1], c.dilation[2], 1};
      para.res_dtype = dtype_name(spec_[0].dtype);
      p = make_backprop_input_problem(shape_fz3d(w_dims, c.groups), dx_.compute,
                                      shape_6hd(dy_dims), dx_.compute,
                                      {c.cout, c.cin / c.groups, c.kernel[0], c.kernel[1], c.kernel[2]},
                                      {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para);
    } else {
      p = make_forward_problem(c, dx_.compute, spec_[0].dtype);
    }
    dx_.kernel = compile(p);
    const auto ins = p.input_shapes();
    off_dx_w_ = reserve(ins[a.transposed ? 1 : 0], dx_.compute);
    off_dx_go_ = reserve(ins[a.transposed ? 0 : 1], dx_.compute);
    off_dx_out_ = reserve(p.output_shape(), spec_[0].dtype);
  }
  if (a.output_mask[1]) {
    dw_.compute = compute_dtype(x_dt, dy_dt);
    para.strides = std::vector<int64_t>{c.stride[0], c.stride[1], c.stride[2]};
    para.dilations = std::vector<int64_t>{1, c.dilation[0], 1, c.dilation[1], c.dilation[2]};
    para.res_dtype = "float32";
    Problem p = make_backprop_filter_problem(
        shape_6hd(x_dims), dw_.compute, shape_6hd(dy_dims), dw_.compute,
        {c.cout, c.kernel[0], c.cin / c.groups, c.kernel[1], c.kernel[2]}, para);
    dw_.kernel = compile(p);
    // grad_output is C's dy (normal) or C's x (transposed); input is the other one.
    const auto go_shape = a.transposed ? p.x_shape() : p.dy_shape();
    share_go_ = dx_.kernel && dx_.compute == dw_.compute;
    off_dw_go_ = share_go_ ? off_dx_go_ : reserve(go_shape, dw_.compute);
    off_dw_in_ = reserve(a.transposed ? p.dy_shape() : p.x_shape(), dw_.compute);
    off_dw_out_ = reserve(p.output_shape(), DType::kFloat32);
  }
}

/** Checks a caller view against the plan and widens it to 5-D. */
View5 view_of(const StridedTensor* t, const char* param, const std::vector<int64_t>& shape,
              DType dtype) {
  check(t != nullptr, param, "is required (its output_mask entry is true) but null");
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
  check(t->data != nullptr || numel == 0, param, "data pointer is null");
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

void zero_fill(const View5& v) {
  const size_t es = dtype_size(v.dtype);
  const auto& s = v.shape;
  for (int64_t i0 = 0; i0 < s[0]; ++i0)
    for (int64_t i1 = 0; i1 < s[1]; ++i1)
      for (int64_t i2 = 0; i2 < s[2]; ++i2)
        for (int64_t i3 = 0; i3 < s[3]; ++i3)
          for (int64_t i4 = 0; i4 < s[4]; ++i4) {
            const int64_t off = i0 * v.strides[0] + i1 * v.strides[1] + i2 * v.strides[2] +
                                i3 * v.strides[3] + i4 * v.strides[4];
            std::memset(static_cast<char*>(v.data) + off * (int64_t)es, 0, es);
          }
}

float load_f32(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

void store_f32(void* p, int64_t i, DType t, float v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = v; return;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(v); return;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); return;
  }
}

/** grad_bias[c] = sum of dy[n, c, ...] (fp64 accumulation, rounded once). */
void bias_sum(const View5& dy, const View5& gb) {
  const auto& s = dy.shape;
  parallel_range(s[1], [&](int64_t c) {
    double acc = 0.0;
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t d = 0; d < s[2]; ++d)
        for (int64_t h = 0; h < s[3]; ++h) {
          const int64_t row = n * dy.strides[0] + c * dy.strides[1] + d * dy.strides[2] +
                              h * dy.strides[3];
          float part = 0.0f;  // fp32 within a row keeps the inner loop vectorizable
          for (int64_t w = 0; w < s[4]; ++w) part += load_f32(dy.data, row + w * dy.strides[4], dy.dtype);
          acc += part;
        }
    store_f32(gb.data, c * gb.strides[0], gb.dtype, (float)acc);
  });
}

void Plan::run(const StridedTensor& grad_output, const StridedTensor& input,
               const StridedTensor& weight, const StridedTensor* grad_input,
               const StridedTensor* grad_weight, const StridedTensor* grad_bias, void* workspace,
               uint64_t workspace_size) const {
  const auto& a = args_;
  // Check everything before anything is written.
  const View5 go = view_of(&grad_output, "grad_output", a.grad_output_shape, a.grad_output_dtype);
  const View5 in = view_of(&input, "input", a.input_shape, a.input_dtype);
  const View5 w = view_of(&weight, "weight", a.weight_shape, a.weight_dtype);
  View5 out[3];
  const StridedTensor* outs[3] = {grad_input, grad_weight, grad_bias};
  static const char* kOut[3] = {"grad_input", "grad_weight", "grad_bias"};
  for (int i = 0; i < 3; ++i)
    if (a.output_mask[i]) out[i] = view_of(outs[i], kOut[i], spec_[i].shape, spec_[i].dtype);
  // Without a caller workspace, the plan's own buffer is reused (its pages stay mapped across
  // calls, e.g. a training loop); a concurrent run of the same plan allocates a fresh one.
  std::unique_ptr<uint8_t[]> fresh;
  std::unique_lock<std::mutex> ws_lock(ws_mu_, std::defer_lock);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  if (workspace_ > 0) {
    if (ws == nullptr) {
      uint8_t* base;
      if (ws_lock.try_lock()) {
        if (!ws_cache_) ws_cache_.reset(new uint8_t[workspace_ + 64]);
        base = ws_cache_.get();
      } else {
        fresh.reset(new uint8_t[workspace_ + 64]);
        base = fresh.get();
      }
      ws = base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    } else {
      check(workspace_size >= workspace_, "workspace",
            "size " + std::to_string(workspace_size) + " is smaller than the " +
                std::to_string(workspace_) + " bytes the plan needs");
    }
  }
  const PackRound round = a.cube_math_type == 3 ? PackRound::kHf32 : PackRound::kNone;
  // TBEX_LOG=conv: time of each step (how much the layout conversion costs next to the kernels).
  const bool timed = log::enabled("conv");
  auto t = std::chrono::steady_clock::now();
  std::string steps;
  auto step = [&](const char* name) {
    if (!timed) return;
    const auto now = std::chrono::steady_clock::now();
    steps += std::string(steps.empty() ? "" : ", ") + name + " " +
             std::to_string(std::chrono::duration<double, std::milli>(now - t).count()) + " ms";
    t = now;
  };
  const int64_t groups = a.groups;

  if (geo_.n == 0) {
    if (a.output_mask[1]) zero_fill(out[1]);
    if (a.output_mask[2]) zero_fill(out[2]);
    return;
  }
  if (dx_.kernel) {
    const Problem& p = dx_.kernel->problem();
    void* wbuf = ws + off_dx_w_;
    void* gobuf = ws + off_dx_go_;
    void* obuf = ws + off_dx_out_;
    pack_fz3d(w, groups, /*transpose_groups=*/a.transposed, wbuf, dx_.compute, round);
    // dX reads grad_output as C's dy; the forward conv reads it as C's input x.
    pack_6hd(go, gobuf, dx_.compute, round);
    step("pack grad_output+weight");
    const auto ins = p.input_shapes();
    std::vector<TensorArg> args;
    if (!a.transposed)
      args = {TensorArg{wbuf, ins[0], {}, dx_.compute}, TensorArg{gobuf, ins[1], {}, dx_.compute}};
    else
      args = {TensorArg{gobuf, ins[0], {}, dx_.compute}, TensorArg{wbuf, ins[1], {}, dx_.compute}};
    dx_.kernel->run(args, TensorArg{obuf, p.output_shape(), {}, spec_[0].dtype});
    step(a.transposed ? "conv3d kernel" : "dX kernel");
    unpack_6hd(obuf, spec_[0].dtype, out[0]);
    step("unpack grad_input");
  }
  if (dw_.kernel) {
    const Problem& p = dw_.kernel->problem();
    void* gobuf = ws + off_dw_go_;
    void* inbuf = ws + off_dw_in_;
    void* obuf = ws + off_dw_out_;
    if (!share_go_) pack_6hd(go, gobuf, dw_.compute, round);
    pack_6hd(in, inbuf, dw_.compute, round);
    step(share_go_ ? "pack input" : "pack input+grad_output");
    void* xbuf = a.transposed ? gobuf : inbuf;
    void* dybuf = a.transposed ? inbuf : gobuf;
    dw_.kernel->run({TensorArg{xbuf, p.x_shape(), {}, dw_.compute},
                     TensorArg{dybuf, p.dy_shape(), {}, dw_.compute}},
                    TensorArg{obuf, p.output_shape(), {}, DType::kFloat32});
    step("dW kernel");
    unpack_fz3d(obuf, DType::kFloat32, groups, out[1]);
    step("unpack grad_weight");
  }
  if (a.output_mask[2]) {
    bias_sum(go, out[2]);
    step("grad_bias");
  }
  if (timed) log::print("conv", describe() + ": " + steps);
}

}  // namespace

std::shared_ptr<const ConvBackwardPlan> ConvBackwardPlan::make(const ConvBackwardArgs& args) {
  return std::make_shared<Plan>(args);
}

}  // namespace tbex
