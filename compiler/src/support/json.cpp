#include "support/json.h"

#include <cmath>
#include <cstdint>

#include "tbex/errors.h"

namespace tbex::json {
namespace {

/** The value as messages show it, cut short. */
std::string shown(const Value& v) {
  std::string s = v.dump(-1, ' ', false, Value::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

}  // namespace

Value parse(const std::string& text, const std::string& param) {
  try {
    return Value::parse(text);
  } catch (const Value::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 3: ...": keep
    // the part after the library's tag (it names the position).
    std::string what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string::npos) what = what.substr(tag + 2);
    throw UserError(code::kValue, param, "invalid JSON: " + what);
  }
}

std::string to_text(const Value& v) {
  return v.dump(2, ' ', false, Value::error_handler_t::replace) + "\n";
}

int64_t as_int(const Value& v, const std::string& param) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    throw UserError(code::kRange, param, "must be in range [-2^63, 2^63-1], got " + shown(v));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return (int64_t)d;
    if (std::isfinite(d) && std::floor(d) == d)
      throw UserError(code::kRange, param, "must be in range [-2^63, 2^63-1], got " + shown(v));
  }
  throw UserError(code::kType, param, "expected an integer, got " + shown(v));
}

double as_number(const Value& v, const std::string& param) {
  if (!v.is_number()) throw UserError(code::kType, param, "expected a number, got " + shown(v));
  return v.get<double>();
}

std::vector<int64_t> as_ints(const Value& v, const std::string& param) {
  if (!v.is_array()) throw UserError(code::kType, param, "expected a list of integers, got " + shown(v));
  std::vector<int64_t> out;
  for (const Value& e : v) out.push_back(as_int(e, param));
  return out;
}

std::string as_string(const Value& v, const std::string& param) {
  if (!v.is_string()) throw UserError(code::kType, param, "expected a string, got " + shown(v));
  return v.get<std::string>();
}

const Value& member(const Value& v, const std::string& key, const std::string& param) {
  if (!v.is_object()) throw UserError(code::kType, param, "expected an object, got " + shown(v));
  const auto it = v.find(key);
  if (it == v.end()) throw UserError(code::kValue, param, "missing \"" + key + "\"");
  return *it;
}

}  // namespace tbex::json
