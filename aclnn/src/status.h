#pragma once
/** The C boundary: every entry point runs its body through guarded(), which clears the
 * thread's message, turns each exception into a status code plus message, and lets nothing
 * escape into C. */
#include <stdexcept>
#include <string>

#include "aclnn/acl_meta.h"

namespace tbex::aclnn {

/** A check of the C layer failed: status and message for the caller. */
class ApiError : public std::runtime_error {
 public:
  ApiError(aclnnStatus status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  aclnnStatus status() const { return status_; }

 private:
  aclnnStatus status_;
};

void clear_error();
/** Records "api: message" as this thread's recent error and returns status. */
aclnnStatus set_error(const char* api, aclnnStatus status, const std::string& message);
/** The status and message an exception stands for (UserError -> PARAM_INVALID, ApiError -> its
 * own, anything else -> INNER). */
aclnnStatus status_of(const std::exception& e);

/** Runs body (returning aclnnStatus) with the boundary's error handling. */
template <class F>
aclnnStatus guarded(const char* api, F&& body) noexcept {
  clear_error();
  try {
    return body();
  } catch (const std::exception& e) {
    return set_error(api, status_of(e), e.what());
  } catch (...) {
    return set_error(api, ACLNN_ERR_INNER, "unknown exception (tbex bug)");
  }
}

inline void require(bool cond, aclnnStatus status, const std::string& message) {
  if (!cond) throw ApiError(status, message);
}

/** ACLNN_ERR_PARAM_NULLPTR naming `name` unless p is non-null. */
inline void require_not_null(const void* p, const char* name) {
  require(p != nullptr, ACLNN_ERR_PARAM_NULLPTR, std::string(name) + " must not be null");
}

}  // namespace tbex::aclnn
