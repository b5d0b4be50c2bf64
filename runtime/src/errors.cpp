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
      param_(std::move(param)),
      message_(message) {}

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void check_range(int64_t v, int64_t lo, int64_t hi, const std::string& param,
                 const std::string& what) {
  if (v >= lo && v <= hi) return;
  throw UserError(code::kRange, param,
                  (what.empty() ? std::string() : what + " ") + "must be in range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
}

int64_t checked_mul(int64_t a, int64_t b, const std::string& param, const std::string& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw UserError(code::kSize, param,
                    "size of " + what + " exceeds 64 bits (" + std::to_string(a) + " * " +
                        std::to_string(b) + ")");
  return r;
}

InternalError::InternalError(const std::string& message)
    : std::logic_error("tbex internal error (please report): " + message) {}

}  // namespace tbex
