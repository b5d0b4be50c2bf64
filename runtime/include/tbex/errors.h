#pragma once
/** Error types shared by every tbex layer.
 *
 * The type says whose fault it is: UserError for bad input (carries the TBE error code,
 * the parameter and the offending values), InternalError for a tbex bug. */
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tbex {

/** The codes UserErrors carry (docs/validation.md): TBE's general codes for the DSL side, aclnn's
 * status codes for the framework side (convolution_backward, the aclnn C API). */
namespace code {
constexpr const char* kListLength = "E62501";    ///< a list of the wrong length
constexpr const char* kRank = "E60006";          ///< a tensor shape of the wrong rank
constexpr const char* kNotPositive = "E62509";   ///< a size, stride or dilation <= 0
constexpr const char* kType = "E62002";          ///< a value of the wrong type
constexpr const char* kValue = "E60000";         ///< "should be X, actual Y" (pads < 0, dtypes, keys)
constexpr const char* kRange = "E60011";         ///< outside the range tbex supports
constexpr const char* kSize = "E60020";          ///< an element count / byte size overflowing 64 bits
constexpr const char* kAclnnNull = "161001";     ///< ACLNN_ERR_PARAM_NULLPTR: a missing operand
constexpr const char* kAclnnInvalid = "161002";  ///< ACLNN_ERR_PARAM_INVALID: any other bad argument
}  // namespace code

/** Largest size, stride, dilation or pad tbex accepts (TBE's own dimension bound): every
 * geometry product of two such values fits int64 with room to spare. */
constexpr int64_t kMaxDim = 2147483647;

class UserError : public std::invalid_argument {
 public:
  /** code: one of tbex::code (or a TBE op code such as "E60038"); param: the argument at fault. */
  UserError(std::string code, std::string param, const std::string& message);
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }
  /** The message without the "[code] param: " prefix what() has. */
  const std::string& message() const { return message_; }

 private:
  std::string code_;
  std::string param_;
  std::string message_;
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message);
};

/** "[a, b, c]": how messages show a list of sizes or parameters. */
std::string list_str(const std::vector<int64_t>& v);

/** v in [lo, hi], else UserError(code::kRange) "must be in range [lo, hi], got v". */
void check_range(int64_t v, int64_t lo, int64_t hi, const std::string& param,
                 const std::string& what = "");

/** a * b, or UserError(code::kSize) naming param and `what` when it overflows int64. */
int64_t checked_mul(int64_t a, int64_t b, const std::string& param, const std::string& what);

/** Throws UserError unless cond holds. */
inline void user_check(bool cond, const char* code, const char* param, const std::string& message) {
  if (!cond) throw UserError(code, param, message);
}

/** Throws InternalError unless cond holds. */
inline void internal_check(bool cond, const std::string& message) {
  if (!cond) throw InternalError(message);
}

}  // namespace tbex
