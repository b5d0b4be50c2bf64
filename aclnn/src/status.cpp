#include "status.h"

#include <new>

#include "tbex/errors.h"

namespace tbex::aclnn {
namespace {
thread_local std::string recent_error;
}  // namespace

void clear_error() { recent_error.clear(); }

aclnnStatus set_error(const char* api, aclnnStatus status, const std::string& message) {
  recent_error = std::string(api) + ": " + message;
  return status;
}

aclnnStatus status_of(const std::exception& e) {
  if (auto* api = dynamic_cast<const ApiError*>(&e)) return api->status();
  if (auto* user = dynamic_cast<const UserError*>(&e))
    return user->code() == code::kAclnnNull ? ACLNN_ERR_PARAM_NULLPTR : ACLNN_ERR_PARAM_INVALID;
  return ACLNN_ERR_INNER;  // InternalError, bad_alloc, anything from below tbex
}

}  // namespace tbex::aclnn

extern "C" ACLNN_API const char* aclGetRecentErrMsg(void) {
  return tbex::aclnn::recent_error.c_str();
}
