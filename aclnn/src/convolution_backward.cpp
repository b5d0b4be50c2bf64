// aclnnConvolutionBackward: the C layer checks what only it can see (null pointers, array
// lengths, dtypes and formats of acl objects, null data, memory overlap), then hands the
// problem to tbex::ConvBackwardPlan, which validates the convolution itself.
#include "aclnnop/aclnn_convolution_backward.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "executor.h"
#include "objects.h"
#include "status.h"
#include "tbex/conv_backward.h"

namespace tbex::aclnn {
namespace {

constexpr const char* kPlanApi = "aclnnConvolutionBackwardGetWorkspaceSize";
constexpr const char* kRunApi = "aclnnConvolutionBackward";
constexpr std::array<const char*, 3> kOutputNames{"gradInput", "gradWeight", "gradBias"};

std::string str(const char* name) { return name; }

DType checked_dtype(const aclTensor& t, const char* name) {
  switch (t.dtype) {
    case ACL_FLOAT: return DType::kFloat32;
    case ACL_FLOAT16: return DType::kFloat16;
    case ACL_BF16: return DType::kBFloat16;
    default: break;
  }
  throw ApiError(ACLNN_ERR_PARAM_INVALID, str(name) + " dtype " + dtype_str(t.dtype) +
                                              " is not supported (ACL_FLOAT, ACL_FLOAT16 or "
                                              "ACL_BF16)");
}

/** NCL / NCHW / NCDHW by rank; ND fits any rank. gradBias (rank 1) is ND only. */
void check_format(const aclTensor& t, const char* name) {
  if (t.format == ACL_FORMAT_ND) return;
  const size_t rank = t.view_dims.size();
  const aclFormat by_rank = rank == 3   ? ACL_FORMAT_NCL
                            : rank == 4 ? ACL_FORMAT_NCHW
                            : rank == 5 ? ACL_FORMAT_NCDHW
                                        : ACL_FORMAT_UNDEFINED;
  require(t.format == by_rank && by_rank != ACL_FORMAT_UNDEFINED, ACLNN_ERR_PARAM_INVALID,
          str(name) + " format " + format_str(t.format) + " does not fit its rank " +
              std::to_string(rank) + " (expected ACL_FORMAT_ND" +
              (by_rank == ACL_FORMAT_UNDEFINED ? std::string() : str(" or ") + format_str(by_rank)) +
              ")");
}

void check_data(const aclTensor& t, const char* name) {
  require(t.data != nullptr || t.numel() == 0, ACLNN_ERR_PARAM_NULLPTR,
          str(name) + " has " + std::to_string(t.numel()) + " elements but its data is null");
}

/** True unless, with dims ordered by stride, each stride steps past everything the smaller
 * ones reach: the usual sufficient test that no two indices share an element. */
bool may_overlap_itself(const aclTensor& t) {
  if (t.numel() == 0) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (size_t i = 0; i < t.view_dims.size(); ++i)
    if (t.view_dims[i] > 1) dims.emplace_back(t.strides[i], t.view_dims[i]);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // largest element offset reachable by the dims so far
  for (auto [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += (size - 1) * stride;  // bounded by the view's span, checked at creation
  }
  return false;
}

/** Bytes [first, last) the view can touch; empty views touch nothing. */
std::pair<uintptr_t, uintptr_t> byte_range(const aclTensor& t) {
  if (t.numel() == 0) return {0, 0};
  const auto size = static_cast<uintptr_t>(dtype_size(checked_dtype(t, "tensor")));
  const uintptr_t first = reinterpret_cast<uintptr_t>(t.data) + static_cast<uintptr_t>(t.offset) * size;
  return {first, first + static_cast<uintptr_t>(t.span()) * size};
}

StridedTensor view_of(const aclTensor& t, DType dtype) {
  StridedTensor v;
  v.data = t.data ? static_cast<char*>(t.data) + t.offset * static_cast<int64_t>(dtype_size(dtype))
                  : nullptr;
  v.shape = t.view_dims;
  v.strides = t.strides;
  v.dtype = dtype;
  return v;
}

struct Call {
  const aclTensor *grad_output, *input, *weight;
  const aclIntArray *bias_sizes, *stride, *padding, *dilation, *output_padding;
  bool transposed;
  int groups;
  const aclBoolArray* output_mask;
  int8_t cube_math_type;
  std::array<aclTensor*, 3> outputs;
  uint64_t* workspace_size;
  aclOpExecutor** executor;
};

/** Missing pointers (ACLNN_ERR_PARAM_NULLPTR) and the mask's length; returns the mask. */
/** A non-null handle that was destroyed (or never created by this library). */
void require_live(const void* h, const char* name) {
  require(!h || live_handle(h), ACLNN_ERR_PARAM_INVALID,
          str(name) + " is not a live handle (destroyed already, or not made by aclCreate*)");
}

std::array<bool, 3> check_pointers(const Call& c) {
  const std::pair<const void*, const char*> handles[] = {
      {c.grad_output, "gradOutput"}, {c.input, "input"}, {c.weight, "weight"},
      {c.bias_sizes, "biasSizes"}, {c.stride, "stride"}, {c.padding, "padding"},
      {c.dilation, "dilation"}, {c.output_padding, "outputPadding"},
      {c.output_mask, "outputMask"}, {c.outputs[0], "gradInput"}, {c.outputs[1], "gradWeight"},
      {c.outputs[2], "gradBias"}};
  for (const auto& [h, name] : handles) require_live(h, name);
  require_not_null(c.grad_output, "gradOutput");
  require_not_null(c.input, "input");
  require_not_null(c.weight, "weight");
  require_not_null(c.stride, "stride");
  require_not_null(c.padding, "padding");
  require_not_null(c.dilation, "dilation");
  require_not_null(c.output_mask, "outputMask");
  require_not_null(c.workspace_size, "workspaceSize");
  require_not_null(c.executor, "executor");
  const std::vector<bool>& m = c.output_mask->values;
  require(m.size() == 3, ACLNN_ERR_PARAM_INVALID,
          "outputMask has " + std::to_string(m.size()) +
              " values; it needs 3 ({gradInput, gradWeight, gradBias})");
  const std::array<bool, 3> mask{m[0], m[1], m[2]};
  for (int i = 0; i < 3; ++i)
    require(!mask[i] || c.outputs[i], ACLNN_ERR_PARAM_NULLPTR,
            str(kOutputNames[i]) + " must not be null when outputMask[" + std::to_string(i) +
                "] is true");
  require(!mask[2] || c.bias_sizes, ACLNN_ERR_PARAM_NULLPTR,
          "biasSizes must not be null when outputMask[2] (gradBias) is true");
  require(!c.transposed || c.output_padding, ACLNN_ERR_PARAM_NULLPTR,
          "outputPadding must not be null when transposed is true");
  return mask;
}

using NamedTensors = std::vector<std::pair<const aclTensor*, const char*>>;

/** dtype, format, then data of every tensor of the call. */
void check_tensors(const NamedTensors& tensors) {
  for (auto [t, name] : tensors) checked_dtype(*t, name);
  for (auto [t, name] : tensors) {
    if (name == kOutputNames[2]) {
      require(t->format == ACL_FORMAT_ND, ACLNN_ERR_PARAM_INVALID,
              str("gradBias format ") + format_str(t->format) + " must be ACL_FORMAT_ND");
    } else {
      check_format(*t, name);
    }
  }
  for (auto [t, name] : tensors) check_data(*t, name);
}

/** Outputs (tensors[first_output...]) must have distinct elements that no other tensor of the
 * call touches: the kernels write them in parallel and read the inputs meanwhile. */
void check_output_memory(const NamedTensors& tensors, size_t first_output) {
  for (size_t i = first_output; i < tensors.size(); ++i) {
    auto [out, out_name] = tensors[i];
    require(!may_overlap_itself(*out), ACLNN_ERR_PARAM_INVALID,
            str(out_name) + " is a view whose elements may overlap (stride 0 or strides that "
                            "interleave); outputs need distinct elements");
    const auto r = byte_range(*out);
    for (size_t j = 0; j < tensors.size(); ++j) {
      const auto q = byte_range(*tensors[j].first);
      const bool disjoint =
          r.first == r.second || q.first == q.second || r.second <= q.first || q.second <= r.first;
      require(j == i || disjoint, ACLNN_ERR_PARAM_INVALID,
              str(out_name) + " shares memory with " + tensors[j].second +
                  "; outputs must not overlap any other tensor of the call");
    }
  }
}

/** The checks of the C layer, in the order a caller fixes them: missing pointers, then values.
 * Returns the output mask. */
std::array<bool, 3> check_call(const Call& c) {
  const std::array<bool, 3> mask = check_pointers(c);
  require(c.cube_math_type >= 0 && c.cube_math_type <= 3, ACLNN_ERR_PARAM_INVALID,
          "cubeMathType " + std::to_string(c.cube_math_type) +
              " is not 0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 "
              "(USE_HF32)");
  NamedTensors tensors{{c.grad_output, "gradOutput"}, {c.input, "input"}, {c.weight, "weight"}};
  for (int i = 0; i < 3; ++i)
    if (mask[i]) tensors.emplace_back(c.outputs[i], kOutputNames[i]);
  check_tensors(tensors);
  check_output_memory(tensors, 3);
  return mask;
}

ConvBackwardArgs engine_args(const Call& c, const std::array<bool, 3>& mask) {
  ConvBackwardArgs a;
  a.grad_output_shape = c.grad_output->view_dims;
  a.input_shape = c.input->view_dims;
  a.weight_shape = c.weight->view_dims;
  a.grad_output_dtype = checked_dtype(*c.grad_output, "gradOutput");
  a.input_dtype = checked_dtype(*c.input, "input");
  a.weight_dtype = checked_dtype(*c.weight, "weight");
  if (mask[2]) a.bias_sizes = c.bias_sizes->values;
  a.stride = c.stride->values;
  a.padding = c.padding->values;
  a.dilation = c.dilation->values;
  a.transposed = c.transposed;
  if (c.output_padding) a.output_padding = c.output_padding->values;
  a.groups = c.groups;
  a.output_mask = mask;
  a.cube_math_type = c.cube_math_type;
  std::optional<TensorSpec>* specs[3] = {&a.grad_input, &a.grad_weight, &a.grad_bias};
  for (int i = 0; i < 3; ++i)
    if (mask[i])
      *specs[i] = TensorSpec{c.outputs[i]->view_dims, checked_dtype(*c.outputs[i], kOutputNames[i])};
  return a;
}

/** The plan and copies of the views: the caller may destroy its aclTensors after this call. */
std::unique_ptr<aclOpExecutor> make_executor(const Call& c, const std::array<bool, 3>& mask,
                                             std::shared_ptr<const ConvBackwardPlan> plan) {
  auto e = std::make_unique<aclOpExecutor>();
  e->api = kRunApi;
  e->workspace_bytes = plan->workspace_bytes();
  StridedTensor dy = view_of(*c.grad_output, checked_dtype(*c.grad_output, "gradOutput"));
  StridedTensor x = view_of(*c.input, checked_dtype(*c.input, "input"));
  StridedTensor w = view_of(*c.weight, checked_dtype(*c.weight, "weight"));
  std::array<std::optional<StridedTensor>, 3> outs;
  for (int i = 0; i < 3; ++i)
    if (mask[i]) outs[i] = view_of(*c.outputs[i], checked_dtype(*c.outputs[i], kOutputNames[i]));
  e->run = [plan = std::move(plan), dy, x, w, outs](void* workspace, uint64_t size) {
    auto ptr = [&](int i) { return outs[i] ? &*outs[i] : nullptr; };
    plan->run(dy, x, w, ptr(0), ptr(1), ptr(2), workspace, size);
  };
  return e;
}

}  // namespace
}  // namespace tbex::aclnn

extern "C" {

ACLNN_API aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight,
    const aclIntArray* biasSizes, const aclIntArray* stride, const aclIntArray* padding,
    const aclIntArray* dilation, bool transposed, const aclIntArray* outputPadding, int groups,
    const aclBoolArray* outputMask, int8_t cubeMathType, aclTensor* gradInput,
    aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  using namespace tbex::aclnn;
  return guarded(kPlanApi, [&] {
    const Call c{gradOutput, input,   weight,   biasSizes,     stride,
                 padding,    dilation, outputPadding, transposed, groups,
                 outputMask, cubeMathType, {gradInput, gradWeight, gradBias},
                 workspaceSize, executor};
    const std::array<bool, 3> mask = check_call(c);
    auto plan = tbex::ConvBackwardPlan::make(engine_args(c, mask));
    std::unique_ptr<aclOpExecutor> e = make_executor(c, mask, plan);
    const uint64_t bytes = e->workspace_bytes;
    *executor = register_executor(std::move(e));
    *workspaceSize = bytes;
    return ACLNN_SUCCESS;
  });
}

ACLNN_API aclnnStatus aclnnConvolutionBackward(void* workspace, uint64_t workspaceSize,
                                               aclOpExecutor* executor, const aclrtStream stream) {
  return tbex::aclnn::run_executor(tbex::aclnn::kRunApi, workspace, workspaceSize, executor,
                                   stream);
}

}  // extern "C"
