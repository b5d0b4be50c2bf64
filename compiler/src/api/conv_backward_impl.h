#pragma once
/** ConvBackwardPlan's three roles, private to compiler/src/api:
 *  - args (conv_backward_args.cpp): framework arguments -> the geometry of the conv whose
 *    kernels run and the expected outputs, with the framework-level errors; caller views;
 *  - plan (conv_backward_plan.cpp): the kernels' Problems (make_problem, as the TBE frontend
 *    builds them), compilation, the workspace layout;
 *  - run (conv_backward_run.cpp): packing, kernels, bias sum, unpacking, TBEX_LOG=conv timing.
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
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "tbex/conv_backward.h"
#include "tbex/kernel.h"
#include "tbex/pack.h"
#include "tbex/problem.h"

namespace tbex::conv_bwd {

/** UserError(param) unless cond; the message ends with the aclnn spelling of param. */
void check(bool cond, const char* param, const std::string& msg);

/** Checked framework arguments. */
struct Checked {
  ConvGeometry geo;                  ///< the conv C whose kernels run (3D; N may be 0)
  std::array<TensorSpec, 3> spec;    ///< grad_input, grad_weight, grad_bias as the caller gets them
};
Checked check_args(const ConvBackwardArgs& a);

/** A caller view checked against the plan's shape and dtype, widened to 5-D. */
View5 view_of(const StridedTensor* t, const char* param, const std::vector<int64_t>& shape,
              DType dtype);

/** The kernels' problems: grad_input's (dX, or the forward conv when transposed) and
 * grad_weight's (dW); none when masked off or N = 0. */
struct KernelProblems {
  std::optional<Problem> dx, dw;
};
KernelProblems kernel_problems(const ConvBackwardArgs& a, const Checked& c);

inline float load_f32(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

inline void store_f32(void* p, int64_t i, DType t, float v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = v; return;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(v); return;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); return;
  }
}

/** Operands without their NaN / Inf (conv_backward_nonfinite.cpp): dense copies where the values
 * that are NaN or Inf as rounded to the compute dtype are 0, for the kernels. */
struct Sanitized {
  std::vector<std::vector<char>> bufs;
  /** A dense copy of src without its NaN / Inf (its memory lives as long as this object). */
  View5 copy(const View5& src, DType compute);
};

/** Gives every element of `out` (the result of kernel `op` on the sanitized operands of conv C)
 * the class the IEEE sum of its terms has, the terms read from the caller's own x, w, dy
 * (conv C's: a transposed conv's grad_output is C's x and its input C's dy). */
void apply_nonfinite(OpKind op, const ConvGeometry& g, const View5& x, const View5& w,
                     const View5& dy, DType compute, const View5& out);

/** Where each packed operand sits in the workspace (bytes from its start, 64-byte aligned). */
struct Layout {
  uint64_t dx_w = 0, dx_go = 0, dx_out = 0;
  uint64_t dw_go = 0, dw_in = 0, dw_out = 0;
  bool share_go = false;  ///< dW reads dX's grad_output pack (same compute dtype)
  uint64_t bytes = 0;
};
Layout workspace_layout(const ConvBackwardArgs& a, const KernelProblems& k);

class Plan final : public ConvBackwardPlan {
 public:
  explicit Plan(const ConvBackwardArgs& a);

  uint64_t workspace_bytes() const override { return layout_.bytes; }
  TensorSpec output_spec(int i) const override { return checked_.spec.at(i); }
  const ConvBackwardArgs& args() const override { return args_; }
  std::string describe() const override;
  void run(const StridedTensor& grad_output, const StridedTensor& input,
           const StridedTensor& weight, const StridedTensor* grad_input,
           const StridedTensor* grad_weight, const StridedTensor* grad_bias, void* workspace,
           uint64_t workspace_size) const override;

 private:
  /** The caller's workspace, else the plan's own buffer (or a fresh one when another run holds
   * it); 64-byte aligned. */
  uint8_t* workspace_for(void* workspace, uint64_t workspace_size, std::unique_lock<std::mutex>& lock,
                         std::unique_ptr<uint8_t[]>& fresh) const;

  ConvBackwardArgs args_;
  Checked checked_;
  std::shared_ptr<const Kernel> dx_, dw_;  ///< null when masked off or N = 0
  Layout layout_;
  mutable std::mutex ws_mu_;
  mutable std::unique_ptr<uint8_t[]> ws_cache_;
};

}  // namespace tbex::conv_bwd
