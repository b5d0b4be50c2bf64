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

class UserError : public std::invalid_argument {
 public:
  /** code: TBE code such as "E60038" ("" when TBE has none); param: the argument at fault. */
  UserError(std::string code, std::string param, const std::string& message);
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }

 private:
  std::string code_;
  std::string param_;
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message);
};

/** "[a, b, c]": how messages show a list of sizes or parameters. */
std::string list_str(const std::vector<int64_t>& v);

/** Throws UserError unless cond holds. */
inline void user_check(bool cond, const char* code, const char* param, const std::string& message) {
  if (!cond) throw UserError(code, param, message);
}

/** Throws InternalError unless cond holds. */
inline void internal_check(bool cond, const std::string& message) {
  if (!cond) throw InternalError(message);
}

}  // namespace tbex
