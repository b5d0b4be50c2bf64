/** Python values -> C++ arguments, strictly: no float, string, None or bool where an int is due,
 * no value silently truncated, and every reference owned while it is read (items of a generic
 * sequence are fresh objects: a borrowed handle to one is freed before it is used). */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbex/errors.h"

namespace pyb = pybind11;

namespace tbex::py {
namespace {

/** repr() of anything, even an object whose __repr__ raises. */
std::string safe_repr(pyb::handle v) {
  try {
    std::string s = pyb::repr(v);
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  } catch (const pyb::error_already_set&) {
    return "<" + std::string(Py_TYPE(v.ptr())->tp_name) + " object>";
  }
}

bool is_bool_like(pyb::handle v) {
  if (PyBool_Check(v.ptr())) return true;
  // numpy.bool_ (its __index__ is deprecated or refused depending on the numpy version).
  const std::string tp = Py_TYPE(v.ptr())->tp_name;
  return tp == "numpy.bool_" || tp == "numpy.bool";
}

/** Longest list a TBE or framework argument can have; longer is an error, not a long loop. */
constexpr Py_ssize_t kMaxListLen = 1024;

}  // namespace

int64_t to_int(pyb::handle v, const std::string& param, ArgCodes c) {
  if (!v || v.is_none() || is_bool_like(v))
    throw UserError(c.type, param, "type error: expected an int, got " + safe_repr(v));
  PyObject* idx = PyNumber_Index(v.ptr());
  if (!idx) {
    PyErr_Clear();
    throw UserError(c.type, param, "type error: expected an int, got " + safe_repr(v));
  }
  pyb::object owned = pyb::reinterpret_steal<pyb::object>(idx);
  int overflow = 0;
  const long long r = PyLong_AsLongLongAndOverflow(owned.ptr(), &overflow);
  if (overflow || (r == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    throw UserError(c.range, param,
                    "must be in range [-2^63, 2^63-1], got " + safe_repr(owned));
  }
  return r;
}

namespace {

/** v as a list or tuple that owns its items (-> .ptr() is null when v is a scalar and
 * allow_scalar: the caller converts v itself). */
pyb::object owned_items(pyb::handle v, const std::string& param, ArgCodes c, bool allow_scalar,
                        const char* what) {
  const bool text = PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) || PyByteArray_Check(v.ptr());
  Py_ssize_t n = -1;
  if (v && !text && PySequence_Check(v.ptr())) {
    n = PySequence_Size(v.ptr());  // -1 for a 0-d numpy array: a scalar, not a list
    if (n < 0) PyErr_Clear();
  }
  if (n < 0) {
    if (allow_scalar && v && !text && !v.is_none()) return pyb::object();
    throw UserError(c.type, param, std::string("type error: expected a list of ") + what +
                                       ", got " + safe_repr(v));
  }
  if (n > kMaxListLen)
    throw UserError(c.type == code::kType ? code::kListLength : c.type, param,
                    "a list of " + std::to_string(n) + " values is far too long for " + param);
  pyb::object fast = pyb::reinterpret_steal<pyb::object>(PySequence_Fast(v.ptr(), ""));
  if (!fast) {
    PyErr_Clear();
    throw UserError(c.type, param, std::string("type error: expected a list of ") + what +
                                       ", got " + safe_repr(v));
  }
  return fast;
}

template <class T, class F>
std::vector<T> convert_items(const pyb::object& fast, F&& one) {
  std::vector<T> out;
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.ptr()); ++i) out.push_back(one(items[i]));
  return out;
}

}  // namespace

std::vector<int64_t> to_ints(pyb::handle v, const std::string& param, ArgCodes c, bool allow_scalar) {
  pyb::object fast = owned_items(v, param, c, allow_scalar, "ints");
  if (!fast) return {to_int(v, param, c)};
  return convert_items<int64_t>(fast, [&](pyb::handle e) { return to_int(e, param, c); });
}

std::vector<bool> to_bools(pyb::handle v, const std::string& param, ArgCodes c) {
  pyb::object fast = owned_items(v, param, c, false, "bools");
  return convert_items<bool>(fast, [&](pyb::handle e) { return to_bool(e, param, c); });
}

bool to_bool(pyb::handle v, const std::string& param, ArgCodes c) {
  if (v && PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (v && is_bool_like(v)) return pyb::bool_(pyb::reinterpret_borrow<pyb::object>(v));
  throw UserError(c.type, param, "type error: expected a bool, got " + safe_repr(v));
}

std::string to_str(pyb::handle v, const std::string& param, ArgCodes c) {
  if (!v || !PyUnicode_Check(v.ptr()))
    throw UserError(c.type, param, "type error: expected a string, got " + safe_repr(v));
  return pyb::reinterpret_borrow<pyb::str>(v);
}

std::vector<std::pair<std::string, pyb::object>> to_items(pyb::handle v, const std::string& param,
                                                          ArgCodes c) {
  if (!v || !PyDict_Check(v.ptr()))
    throw UserError(c.type, param, "type error: expected a dict, got " + safe_repr(v));
  std::vector<std::pair<std::string, pyb::object>> out;
  // A list of (key, value) pairs the call owns: a value's __index__ cannot change what is read.
  pyb::list items = pyb::reinterpret_steal<pyb::list>(PyDict_Items(v.ptr()));
  for (pyb::handle kv : items) {
    pyb::tuple t = pyb::reinterpret_borrow<pyb::tuple>(kv);
    out.emplace_back(to_str(t[0], param + " key", c), pyb::reinterpret_borrow<pyb::object>(t[1]));
  }
  return out;
}

void define_args(pyb::module_& m) {
  auto codes = [](bool framework) { return framework ? kFrameworkCodes : kDslCodes; };
  m.def("to_int", [=](pyb::handle v, const std::string& param, bool framework) {
    return to_int(v, param, codes(framework));
  }, pyb::arg("v").none(true), pyb::arg("param"), pyb::arg("framework") = false);
  m.def("to_ints", [=](pyb::handle v, const std::string& param, bool framework, bool allow_scalar) {
    return to_ints(v, param, codes(framework), allow_scalar);
  }, pyb::arg("v").none(true), pyb::arg("param"), pyb::arg("framework") = false,
     pyb::arg("allow_scalar") = false);
  m.def("to_bool", [=](pyb::handle v, const std::string& param, bool framework) {
    return to_bool(v, param, codes(framework));
  }, pyb::arg("v").none(true), pyb::arg("param"), pyb::arg("framework") = false);
}

}  // namespace tbex::py
