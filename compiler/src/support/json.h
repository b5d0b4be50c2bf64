#pragma once
/** JSON through nlohmann-json, with tbex's error convention: a bad document or a value of the
 * wrong type is a UserError naming the parameter it came from (tbexc's --json call files, the
 * tuning database, cache sidecars). */
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tbex::json {

// Insertion-ordered: files tbex writes keep their fields in the order a reader expects.
using Value = nlohmann::ordered_json;

/** The document `text`; UserError(param) "invalid JSON: parse error at line L, column C: ..."
 * when it is not JSON. */
Value parse(const std::string& text, const std::string& param);

/** The document as a file holds it: indented by 2, one trailing newline (bytes that are not
 * UTF-8 become U+FFFD instead of failing). */
std::string to_text(const Value& v);

/** An integer (a number with no fractional part); UserError(param) otherwise. */
int64_t as_int(const Value& v, const std::string& param);
/** A number; UserError(param) otherwise. */
double as_number(const Value& v, const std::string& param);
std::vector<int64_t> as_ints(const Value& v, const std::string& param);
std::string as_string(const Value& v, const std::string& param);
/** Member `key` of object `v`; UserError(param) "missing \"key\"" when absent (or `v` is no
 * object). */
const Value& member(const Value& v, const std::string& key, const std::string& param);

}  // namespace tbex::json
