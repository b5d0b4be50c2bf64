#include "tbex/errors.h"

namespace tbex {

static std::string format_user(const std::string& code, const std::string& param,
                               const std::string& message) {
  std::string s;
  if (!code.empty()) s += "[" + code + "] ";
  if (!param.empty()) s += param + ": ";
  return s + message;
}

UserError::UserError(std::string code, std::string param, const std::string& message)
    : std::invalid_argument(format_user(code, param, message)),
      code_(std::move(code)),
      param_(std::move(param)) {}

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

InternalError::InternalError(const std::string& message)
    : std::logic_error("tbex internal error (please report): " + message) {}

}  // namespace tbex
