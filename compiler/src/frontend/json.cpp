#include "frontend/json.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "tbex/errors.h"

namespace tbex::json {
namespace {

class Reader {
 public:
  Reader(const std::string& text, const std::string& param) : s_(text), param_(param) {}

  Value document() {
    Value v = value();
    skip();
    if (i_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw UserError("", param_, "invalid JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void skip() {
    while (i_ < s_.size() && std::isspace((unsigned char)s_[i_])) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    const std::string ws(w);
    if (s_.compare(i_, ws.size(), ws) != 0) return false;
    i_ += ws.size();
    return true;
  }

  Value value() {
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    Value v;
    const char c = s_[i_];
    if (c == '{') {
      v.kind = Value::Kind::kObject;
      ++i_;
      if (eat('}')) return v;
      do {
        skip();
        std::string key = string();
        expect(':');
        v.object[key] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Value::Kind::kArray;
      ++i_;
      if (eat(']')) return v;
      do v.array.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Value::Kind::kString;
      v.string = string();
    } else if (word("true")) {
      v.kind = Value::Kind::kBool;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = Value::Kind::kBool;
    } else if (word("null")) {
      v.kind = Value::Kind::kNull;
    } else {
      const char* begin = s_.c_str() + i_;
      char* end = nullptr;
      v.number = std::strtod(begin, &end);
      if (end == begin) fail("expected a value");
      v.kind = Value::Kind::kNumber;
      i_ += end - begin;
    }
    return v;
  }

  std::string string() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) break;
        const char e = s_[i_++];
        if (e == 'n') c = '\n';
        else if (e == 't') c = '\t';
        else if (e == '"' || e == '\\' || e == '/') c = e;
        else fail("unsupported escape \\" + std::string(1, e));
      }
      out += c;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  const std::string& s_;
  std::string param_;
  size_t i_ = 0;
};

}  // namespace

int64_t Value::as_int(const std::string& param) const {
  if (kind != Kind::kNumber || std::floor(number) != number)
    throw UserError("", param, "expected an integer");
  return (int64_t)number;
}

std::vector<int64_t> Value::as_ints(const std::string& param) const {
  if (kind != Kind::kArray) throw UserError("", param, "expected a list of integers");
  std::vector<int64_t> out;
  for (const Value& v : array) out.push_back(v.as_int(param));
  return out;
}

const std::string& Value::as_string(const std::string& param) const {
  if (kind != Kind::kString) throw UserError("", param, "expected a string");
  return string;
}

const Value* Value::find(const std::string& key) const {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

Value parse(const std::string& text, const std::string& param) { return Reader(text, param).document(); }

}  // namespace tbex::json
