#pragma once
/** Convolution backward in framework terms (NCL / NCHW / NCDHW tensors, PyTorch / aclnn
 * arguments), running on tbex's compiled dW / dX / forward kernels.
 *
 * This is the one engine behind `aclnnConvolutionBackward` (aclnn/) and
 * `tbex.convolution_backward` (Python). A plan is made once (validation, kernel compilation,
 * workspace sizing) and run on strided views of caller memory. 1D and 2D problems run as 3D with
 * unit dims; tensors are packed to 6HD / FRACTAL_Z_3D in the caller's workspace, converted to the
 * compute dtype on the way (cubeMathType), and unpacked into the outputs' strided views. */
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tbex/dtype.h"
#include "tbex/kernel.h"  // KernelCacheStats

namespace tbex {

/** A strided view of caller memory; shape and strides in elements, outermost first. */
struct StridedTensor {
  void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  ///< empty = dense row-major
  DType dtype = DType::kFloat32;
};

/** aclnn's cubeMathType, with its CPU meaning (see compiler/src/api/conv_backward_impl.h / README). */
enum class CubeMath : int {
  kKeepDtype = 0,               ///< compute from the inputs' own values (fp32 accumulation)
  kAllowFp32DownPrecision = 1,  ///< CPU: same as kKeepDtype (fp32 is the fast path here)
  kUseFp16 = 2,                 ///< fp32/bf16 inputs are rounded to fp16 before the products
  kUseHf32 = 3,                 ///< fp32 inputs are rounded to HF32 (11-bit mantissa) first
};

/** Shape and dtype of one output as the caller supplies it (checked by make()). */
struct TensorSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
};

/** The arguments of torch.ops.aten.convolution_backward / aclnnConvolutionBackward. */
struct ConvBackwardArgs {
  std::vector<int64_t> grad_output_shape, input_shape, weight_shape;  ///< rank 3, 4 or 5
  DType grad_output_dtype = DType::kFloat32, input_dtype = DType::kFloat32,
        weight_dtype = DType::kFloat32;
  std::optional<std::vector<int64_t>> bias_sizes;  ///< required when output_mask[2]
  std::vector<int64_t> stride, dilation;  ///< rank-2 values
  /** rank-2 values, or 2*(rank-2) as (head, tail) per dim: aclnn's 4-value 2D padding (top,
   * bottom, left, right), and likewise 2 for 1D and 6 for 3D (front, back, top, bottom, left,
   * right; a tbex extension carrying TBE's asymmetric pads). */
  std::vector<int64_t> padding;
  bool transposed = false;
  std::vector<int64_t> output_padding;  ///< empty = zeros
  int64_t groups = 1;
  std::array<bool, 3> output_mask{true, true, true};  ///< grad_input, grad_weight, grad_bias
  int cube_math_type = 0;
  /** The outputs the caller will pass (checked against the expected ones when given). */
  std::optional<TensorSpec> grad_input, grad_weight, grad_bias;
};

class ConvBackwardPlan {
 public:
  /** Validates (UserError naming the argument and values) and compiles the kernels needed. */
  static std::shared_ptr<const ConvBackwardPlan> make(const ConvBackwardArgs& args);
  /** make(), through an in-process cache of plans keyed by the arguments, num_threads() and
   * the knobs that change code generation: the same least-recently-used policy and capacity
   * (TBEX_KERNEL_CACHE_CAPACITY) as the kernel cache. For callers that build a plan per call
   * (tbex.convolution_backward). */
  static std::shared_ptr<const ConvBackwardPlan> cached(const ConvBackwardArgs& args);
  /** The plan cache's hits, misses, evictions, size and capacity. */
  static KernelCacheStats cache_stats();
  virtual ~ConvBackwardPlan() = default;

  /** Bytes of scratch memory run() needs (packed operands). */
  virtual uint64_t workspace_bytes() const = 0;
  /** Expected output shapes and dtypes (index 0 grad_input, 1 grad_weight, 2 grad_bias). */
  virtual TensorSpec output_spec(int i) const = 0;
  virtual const ConvBackwardArgs& args() const = 0;
  /** The compiled kernels, e.g. "dX: dx_tiled, dW: dw_tiled" (for logs and tests). */
  virtual std::string describe() const = 0;

  /** Runs on caller memory. Outputs not in output_mask may be null. Every view is checked
   * before anything is written (UserError). workspace may be null when workspace_bytes() is 0;
   * with null workspace and a non-zero need, run() allocates its own. */
  virtual void run(const StridedTensor& grad_output, const StridedTensor& input,
                   const StridedTensor& weight, const StridedTensor* grad_input,
                   const StridedTensor* grad_weight, const StridedTensor* grad_bias,
                   void* workspace, uint64_t workspace_size) const = 0;
};

}  // namespace tbex
