/* aclnnConvolutionBackward on the CPU: gradients of a 1D, 2D or 3D (optionally grouped or
 * transposed) convolution with respect to its input, weight and bias. C99 and C++ clean. */
#ifndef TBEX_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_
#define TBEX_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/** cubeMathType values and what each means on the CPU (accumulation is always fp32):
 *  - 0 KEEP_DTYPE: products of the inputs' own values.
 *  - 1 ALLOW_FP32_DOWN_PRECISION: same as 0 (fp32 is already the fast path on a CPU).
 *  - 2 USE_FP16: fp32 and bf16 inputs are rounded to fp16 before the products.
 *  - 3 USE_HF32: fp32 inputs are rounded (to nearest even) to Ascend's HF32, fp32 with an
 *    11-bit mantissa, before the products; fp16 and bf16 inputs are used as they are.
 * Any other value is ACLNN_ERR_PARAM_INVALID. */
#define ACLNN_CUBE_MATH_KEEP_DTYPE 0
#define ACLNN_CUBE_MATH_ALLOW_FP32_DOWN_PRECISION 1
#define ACLNN_CUBE_MATH_USE_FP16 2
#define ACLNN_CUBE_MATH_USE_HF32 3

/** Validates the arguments and plans the computation (kernels are compiled here).
 *
 * - gradOutput, input, weight: rank 3 (NCL), 4 (NCHW) or 5 (NCDHW), all the same rank, which
 *   chooses 1D, 2D or 3D; format ND or the one matching the rank; dtype ACL_FLOAT,
 *   ACL_FLOAT16 or ACL_BF16. Any strides and offset (non-contiguous views are read in place).
 *   weight is [Cout, Cin/groups, k...], or [Cin, Cout/groups, k...] when transposed.
 * - biasSizes: [Cout] ([weight.shape[1] * groups] when transposed); required when
 *   outputMask[2].
 * - stride, dilation (> 0) and padding (>= 0): rank-2 values each; 2D padding may have 4
 *   values (top, bottom, left, right), and, as a tbex extension, 1D padding 2 and 3D padding 6
 *   (head, tail per dim: TBE's asymmetric pads).
 * - transposed: the forward op was a transposed convolution. outputPadding: rank-2 values in
 *   [0, stride), non-zero only when transposed; null means zeros and is allowed only when
 *   transposed is false.
 * - groups >= 1 dividing both channel counts.
 * - outputMask: 3 bools {gradInput, gradWeight, gradBias}; only requested gradients are
 *   computed and written, and a requested output must be non-null. Outputs not requested may
 *   be null and are never touched.
 * - gradInput (input's shape), gradWeight (weight's shape), gradBias (1-D, biasSizes): any
 *   strides that do not make the view overlap itself; an output must not share memory with
 *   another tensor of the call. Format ND or the one matching the rank (gradBias: ND).
 *   dtypes: gradInput has input's dtype when gradOutput has the same, else ACL_FLOAT (likewise
 *   gradWeight with weight); gradBias has gradOutput's dtype.
 * - cubeMathType: see ACLNN_CUBE_MATH_* above.
 *
 * On success *workspaceSize is the number of workspace bytes aclnnConvolutionBackward needs
 * and *executor the plan. On error nothing is written to any output, *workspaceSize and
 * *executor are left as they were, and aclGetRecentErrMsg names the argument at fault:
 * ACLNN_ERR_PARAM_NULLPTR for a missing pointer (or null data of a non-empty tensor),
 * ACLNN_ERR_PARAM_INVALID for bad values, shapes, dtypes or formats, ACLNN_ERR_INNER for a tbex
 * bug. */
ACLNN_API aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *input, const aclTensor *weight,
    const aclIntArray *biasSizes, const aclIntArray *stride, const aclIntArray *padding,
    const aclIntArray *dilation, bool transposed, const aclIntArray *outputPadding, int groups,
    const aclBoolArray *outputMask, int8_t cubeMathType, aclTensor *gradInput,
    aclTensor *gradWeight, aclTensor *gradBias, uint64_t *workspaceSize,
    aclOpExecutor **executor);

/** Runs a planned executor (once). workspace must hold at least the size reported by
 * aclnnConvolutionBackwardGetWorkspaceSize (it may be null when that size is 0) and
 * workspaceSize says how much it holds. A null stream runs synchronously; a stream from
 * aclrtCreateStream queues the run and returns ACLNN_SUCCESS at once (failures are reported by
 * aclrtSynchronizeStream). Argument errors (ACLNN_ERR_PARAM_*: null, unknown or already-run
 * executor, short or null workspace, unknown stream) leave the executor usable and the outputs
 * untouched; once the run has started the executor is consumed, whatever its outcome. */
ACLNN_API aclnnStatus aclnnConvolutionBackward(void *workspace, uint64_t workspaceSize,
                                               aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TBEX_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_ */
