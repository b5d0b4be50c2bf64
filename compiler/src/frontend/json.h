#pragma once
/** A small JSON reader for tbexc's --json problem files (objects, arrays, strings, numbers,
 * true/false/null). Errors are UserErrors naming `param` and the offset. */
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tbex::json {

struct Value {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  /** The integer a number holds (UserError naming `param` for anything else). */
  int64_t as_int(const std::string& param) const;
  std::vector<int64_t> as_ints(const std::string& param) const;
  const std::string& as_string(const std::string& param) const;
  /** Member `key` of an object, or nullptr. */
  const Value* find(const std::string& key) const;
};

Value parse(const std::string& text, const std::string& param);

}  // namespace tbex::json
