/* tbex's aclnn base API on the CPU: tensors, int/bool arrays, status codes, error messages,
 * executors and streams, with CANN's names and values so aclnn-style host code compiles
 * unchanged. C99 and C++ clean. */
#ifndef TBEX_ACLNN_ACL_META_H_
#define TBEX_ACLNN_ACL_META_H_

#include <stdbool.h>
#include <stdint.h>

#if defined(__GNUC__)
#define ACLNN_API __attribute__((visibility("default")))
#else
#define ACLNN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Status of every call; 0 is success. */
typedef int32_t aclnnStatus;
#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001 /**< a mandatory pointer argument is null */
#define ACLNN_ERR_PARAM_INVALID 161002 /**< an argument has a wrong value, shape, dtype or format */
#define ACLNN_ERR_RUNTIME_ERROR 361001 /**< work queued on a stream failed (see aclrtSynchronizeStream) */
#define ACLNN_ERR_INNER 561000         /**< a tbex bug or resource exhaustion */

/** CANN's element types (same values). The convolution ops accept ACL_FLOAT, ACL_FLOAT16 and
 * ACL_BF16; the others exist so callers get ACLNN_ERR_PARAM_INVALID, not a compile error. */
typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_STRING = 13,
  ACL_COMPLEX64 = 16,
  ACL_COMPLEX128 = 17,
  ACL_BF16 = 27,
  ACL_INT4 = 29,
  ACL_UINT1 = 30,
  ACL_COMPLEX32 = 33
} aclDataType;

/** CANN's tensor formats (same values). The format names the meaning of a view's dims; the
 * memory layout is always given by the view's strides. */
typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NC1HWC0_C04 = 12,
  ACL_FORMAT_HWCN = 16,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33,
  ACL_FORMAT_NC = 35,
  ACL_FORMAT_NCL = 47
} aclFormat;

typedef struct aclTensor aclTensor;
typedef struct aclIntArray aclIntArray;
typedef struct aclBoolArray aclBoolArray;
/** A planned operation, made by an op's ...GetWorkspaceSize call and run once. */
typedef struct aclOpExecutor aclOpExecutor;
/** On the CPU a stream is a worker thread with a FIFO queue (see aclrtCreateStream). A null
 * stream means "run synchronously on the calling thread". */
typedef void *aclrtStream;

/** The message of the most recent failing call on the calling thread, or "" when the last
 * call succeeded (every API call clears it first). Never null; valid until this thread's next
 * API call. */
ACLNN_API const char *aclGetRecentErrMsg(void);

/** A view of caller memory. tensorData is the start of the storage (storageDims elements,
 * dense); element (i0, i1, ...) of the view lives at element offset + sum(ik * stride[k]) of
 * the storage. stride may be null (dense row-major view); storageDims may be null with
 * storageDimsNum 0 (storage = exactly what the view reaches). Dims, strides and offset must be
 * >= 0 and the view must lie inside the storage; otherwise returns null (see
 * aclGetRecentErrMsg). At most 8 dims. The memory is not copied and must outlive every
 * executor that uses the tensor; the aclTensor itself may be destroyed once the op's
 * ...GetWorkspaceSize call has returned. */
ACLNN_API aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                     aclDataType dataType, const int64_t *stride, int64_t offset,
                                     aclFormat format, const int64_t *storageDims,
                                     uint64_t storageDimsNum, void *tensorData);
/** Copies `size` values (value may be null when size is 0). */
ACLNN_API aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
ACLNN_API aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size);
/** Destroying null is a no-op returning ACLNN_SUCCESS. A handle is destroyed once: destroying it
 * again (or any pointer these functions did not return) returns ACLNN_ERR_PARAM_INVALID and
 * touches nothing, and an op given a destroyed handle returns ACLNN_ERR_PARAM_INVALID (tbex
 * keeps a registry of live handles). */
ACLNN_API aclnnStatus aclDestroyTensor(const aclTensor *tensor);
ACLNN_API aclnnStatus aclDestroyIntArray(const aclIntArray *array);
ACLNN_API aclnnStatus aclDestroyBoolArray(const aclBoolArray *array);

/** Frees an executor that will not be run. An executor that has been run (or queued on a
 * stream) is freed by tbex; destroying it, or any pointer that is not a live executor, returns
 * ACLNN_ERR_PARAM_INVALID. */
ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);

/** Creates a stream: a worker thread that runs queued ops in order. Ops given this stream
 * return as soon as they are queued; their memory (inputs, outputs, workspace) must stay valid
 * until aclrtSynchronizeStream returns. */
ACLNN_API aclnnStatus aclrtCreateStream(aclrtStream *stream);
/** Waits until every op queued on the stream has finished. Returns ACLNN_ERR_RUNTIME_ERROR
 * (message in aclGetRecentErrMsg) when one of them failed since the last synchronization; the
 * error is then cleared. A null stream has nothing queued and returns ACLNN_SUCCESS. */
ACLNN_API aclnnStatus aclrtSynchronizeStream(aclrtStream stream);
/** Finishes the queued work (as aclrtSynchronizeStream, with its status), then ends the thread
 * and frees the stream. */
ACLNN_API aclnnStatus aclrtDestroyStream(aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TBEX_ACLNN_ACL_META_H_ */
