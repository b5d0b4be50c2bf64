#pragma once
/** What the opaque handles of acl_meta.h hold. Values are validated when they are created, so
 * ops may rely on: dims, strides and offset >= 0, element counts fit in int64, and the view
 * lies inside its storage. */
#include <cstdint>
#include <vector>

#include "aclnn/acl_meta.h"

struct aclTensor {
  std::vector<int64_t> view_dims;
  std::vector<int64_t> strides;  ///< in elements, one per view dim
  int64_t offset = 0;            ///< in elements
  aclDataType dtype = ACL_FLOAT;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> storage_dims;
  void* data = nullptr;

  int64_t numel() const;
  /** Elements between the first and one past the last the view reaches (0 when empty). */
  int64_t span() const;
};

struct aclIntArray {
  std::vector<int64_t> values;
};

struct aclBoolArray {
  std::vector<bool> values;
};

namespace tbex::aclnn {

constexpr uint64_t kMaxTensorRank = 8;

/** Live aclTensor / aclIntArray / aclBoolArray handles: created ones until destroyed. A second
 * destroy, or a destroyed handle passed to an op, is ACLNN_ERR_PARAM_INVALID instead of a
 * double free or a use after free. */
void add_handle(const void* h);
bool drop_handle(const void* h);  ///< false when h is not live
bool live_handle(const void* h);

/** CANN spellings, for messages: "ACL_FLOAT16", "ACL_FORMAT_NCDHW"; the number otherwise. */
const char* dtype_str(aclDataType t);
const char* format_str(aclFormat f);

}  // namespace tbex::aclnn
