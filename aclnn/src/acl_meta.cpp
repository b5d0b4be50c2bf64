// aclTensor / aclIntArray / aclBoolArray: creation validates everything an op would otherwise
// have to distrust (negative dims, overflow, a view reaching outside its storage).
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "objects.h"
#include "status.h"

namespace tbex::aclnn {
namespace {

std::string join(const int64_t* v, uint64_t n) {
  std::string s = "[";
  for (uint64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/** Product of dims, rejecting negatives and int64 overflow. */
int64_t checked_count(const int64_t* dims, uint64_t n, const char* name) {
  int64_t count = 1;
  for (uint64_t i = 0; i < n; ++i) {
    require(dims[i] >= 0, ACLNN_ERR_PARAM_INVALID,
            std::string(name) + " " + join(dims, n) + " has a negative dim");
    require(!__builtin_mul_overflow(count, dims[i], &count), ACLNN_ERR_PARAM_INVALID,
            std::string(name) + " " + join(dims, n) + " has more elements than int64 holds");
  }
  return count;
}

aclTensor* create_tensor(const int64_t* view_dims, uint64_t rank, aclDataType dtype,
                         const int64_t* stride, int64_t offset, aclFormat format,
                         const int64_t* storage_dims, uint64_t storage_rank, void* data) {
  require(rank <= kMaxTensorRank, ACLNN_ERR_PARAM_INVALID,
          "viewDimsNum " + std::to_string(rank) + " exceeds " + std::to_string(kMaxTensorRank));
  require(storage_rank <= kMaxTensorRank, ACLNN_ERR_PARAM_INVALID,
          "storageDimsNum " + std::to_string(storage_rank) + " exceeds " +
              std::to_string(kMaxTensorRank));
  if (rank > 0) require_not_null(view_dims, "viewDims");
  if (storage_rank > 0) require_not_null(storage_dims, "storageDims");
  require(offset >= 0, ACLNN_ERR_PARAM_INVALID, "offset " + std::to_string(offset) + " < 0");

  auto t = std::make_unique<aclTensor>();
  t->view_dims.assign(view_dims, view_dims + rank);
  const int64_t numel = checked_count(view_dims, rank, "viewDims");
  if (stride) {
    t->strides.assign(stride, stride + rank);
    for (int64_t s : t->strides)
      require(s >= 0, ACLNN_ERR_PARAM_INVALID, "stride " + join(stride, rank) + " has a negative value");
  } else {
    t->strides.assign(rank, 1);
    for (uint64_t i = rank; i-- > 1;)
      require(!__builtin_mul_overflow(t->strides[i], std::max<int64_t>(view_dims[i], 1),
                                      &t->strides[i - 1]),
              ACLNN_ERR_PARAM_INVALID,
              "the dense strides of viewDims " + join(view_dims, rank) + " overflow int64");
  }
  t->offset = offset;
  t->dtype = dtype;
  t->format = format;
  t->data = data;

  int64_t span = 0;  // checked here once so span() can compute it unchecked later
  if (numel > 0) {
    span = 1;
    for (uint64_t i = 0; i < rank; ++i) {
      int64_t reach = 0;
      require(!__builtin_mul_overflow(view_dims[i] - 1, t->strides[i], &reach) &&
                  !__builtin_add_overflow(span, reach, &span),
              ACLNN_ERR_PARAM_INVALID,
              "viewDims " + join(view_dims, rank) + " with stride " + join(t->strides.data(), rank) +
                  " reaches past int64");
    }
    int64_t end = 0;
    require(!__builtin_add_overflow(offset, span, &end), ACLNN_ERR_PARAM_INVALID,
            "offset " + std::to_string(offset) + " plus the view's extent overflows int64");
  }
  if (storage_dims) {
    t->storage_dims.assign(storage_dims, storage_dims + storage_rank);
    const int64_t storage = checked_count(storage_dims, storage_rank, "storageDims");
    require(numel == 0 || offset + span <= storage, ACLNN_ERR_PARAM_INVALID,
            "the view (viewDims " + join(view_dims, rank) + ", stride " +
                join(t->strides.data(), rank) + ", offset " + std::to_string(offset) +
                ") reaches element " + std::to_string(offset + span - 1) +
                ", outside storageDims " + join(storage_dims, storage_rank) + " (" +
                std::to_string(storage) + " elements)");
  } else {
    t->storage_dims = {offset + span};
  }
  return t.release();
}

}  // namespace
}  // namespace tbex::aclnn

int64_t aclTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : view_dims) n *= d;
  return n;
}

int64_t aclTensor::span() const {
  if (numel() == 0) return 0;
  int64_t s = 1;
  for (size_t i = 0; i < view_dims.size(); ++i) s += (view_dims[i] - 1) * strides[i];
  return s;
}

namespace tbex::aclnn {

const char* dtype_str(aclDataType t) {
  switch (t) {
    case ACL_DT_UNDEFINED: return "ACL_DT_UNDEFINED";
    case ACL_FLOAT: return "ACL_FLOAT";
    case ACL_FLOAT16: return "ACL_FLOAT16";
    case ACL_INT8: return "ACL_INT8";
    case ACL_INT32: return "ACL_INT32";
    case ACL_UINT8: return "ACL_UINT8";
    case ACL_INT16: return "ACL_INT16";
    case ACL_UINT16: return "ACL_UINT16";
    case ACL_UINT32: return "ACL_UINT32";
    case ACL_INT64: return "ACL_INT64";
    case ACL_UINT64: return "ACL_UINT64";
    case ACL_DOUBLE: return "ACL_DOUBLE";
    case ACL_BOOL: return "ACL_BOOL";
    case ACL_STRING: return "ACL_STRING";
    case ACL_COMPLEX64: return "ACL_COMPLEX64";
    case ACL_COMPLEX128: return "ACL_COMPLEX128";
    case ACL_BF16: return "ACL_BF16";
    case ACL_INT4: return "ACL_INT4";
    case ACL_UINT1: return "ACL_UINT1";
    case ACL_COMPLEX32: return "ACL_COMPLEX32";
  }
  return "unknown aclDataType";
}

const char* format_str(aclFormat f) {
  switch (f) {
    case ACL_FORMAT_UNDEFINED: return "ACL_FORMAT_UNDEFINED";
    case ACL_FORMAT_NCHW: return "ACL_FORMAT_NCHW";
    case ACL_FORMAT_NHWC: return "ACL_FORMAT_NHWC";
    case ACL_FORMAT_ND: return "ACL_FORMAT_ND";
    case ACL_FORMAT_NC1HWC0: return "ACL_FORMAT_NC1HWC0";
    case ACL_FORMAT_FRACTAL_Z: return "ACL_FORMAT_FRACTAL_Z";
    case ACL_FORMAT_NC1HWC0_C04: return "ACL_FORMAT_NC1HWC0_C04";
    case ACL_FORMAT_HWCN: return "ACL_FORMAT_HWCN";
    case ACL_FORMAT_NDHWC: return "ACL_FORMAT_NDHWC";
    case ACL_FORMAT_FRACTAL_NZ: return "ACL_FORMAT_FRACTAL_NZ";
    case ACL_FORMAT_NCDHW: return "ACL_FORMAT_NCDHW";
    case ACL_FORMAT_NDC1HWC0: return "ACL_FORMAT_NDC1HWC0";
    case ACL_FRACTAL_Z_3D: return "ACL_FRACTAL_Z_3D";
    case ACL_FORMAT_NC: return "ACL_FORMAT_NC";
    case ACL_FORMAT_NCL: return "ACL_FORMAT_NCL";
  }
  return "unknown aclFormat";
}

namespace {
std::mutex& handles_mu() {
  static std::mutex mu;
  return mu;
}
std::unordered_set<const void*>& handles() {
  static std::unordered_set<const void*> h;
  return h;
}
}  // namespace

void add_handle(const void* h) {
  std::lock_guard<std::mutex> l(handles_mu());
  handles().insert(h);
}

bool drop_handle(const void* h) {
  std::lock_guard<std::mutex> l(handles_mu());
  return handles().erase(h) > 0;
}

bool live_handle(const void* h) {
  std::lock_guard<std::mutex> l(handles_mu());
  return handles().count(h) > 0;
}

/** Destroys a live handle of type T; a null one is a no-op, any other is refused untouched. */
template <class T>
aclnnStatus destroy(const char* api, const T* h, const char* what) {
  clear_error();
  if (!h) return ACLNN_SUCCESS;
  if (!drop_handle(h))
    return set_error(api, ACLNN_ERR_PARAM_INVALID,
                     std::string("not a live ") + what + " (destroyed already, or never created)");
  delete h;
  return ACLNN_SUCCESS;
}

}  // namespace tbex::aclnn

using tbex::aclnn::guarded;

extern "C" {

ACLNN_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum,
                                     aclDataType dataType, const int64_t* stride, int64_t offset,
                                     aclFormat format, const int64_t* storageDims,
                                     uint64_t storageDimsNum, void* tensorData) {
  aclTensor* t = nullptr;
  guarded("aclCreateTensor", [&] {
    t = tbex::aclnn::create_tensor(viewDims, viewDimsNum, dataType, stride, offset, format,
                                   storageDims, storageDimsNum, tensorData);
    tbex::aclnn::add_handle(t);
    return ACLNN_SUCCESS;
  });
  return t;
}

ACLNN_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  aclIntArray* a = nullptr;
  guarded("aclCreateIntArray", [&] {
    if (size > 0) tbex::aclnn::require_not_null(value, "value");
    a = new aclIntArray{std::vector<int64_t>(value, value + size)};
    tbex::aclnn::add_handle(a);
    return ACLNN_SUCCESS;
  });
  return a;
}

ACLNN_API aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  aclBoolArray* a = nullptr;
  guarded("aclCreateBoolArray", [&] {
    if (size > 0) tbex::aclnn::require_not_null(value, "value");
    a = new aclBoolArray{std::vector<bool>(value, value + size)};
    tbex::aclnn::add_handle(a);
    return ACLNN_SUCCESS;
  });
  return a;
}

ACLNN_API aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  return tbex::aclnn::destroy("aclDestroyTensor", tensor, "aclTensor");
}

ACLNN_API aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  return tbex::aclnn::destroy("aclDestroyIntArray", array, "aclIntArray");
}

ACLNN_API aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  return tbex::aclnn::destroy("aclDestroyBoolArray", array, "aclBoolArray");
}

}  // extern "C"
