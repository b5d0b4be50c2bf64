/** tbex._C: the private extension. The public API is the pure-Python package on top. */
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "tbex/errors.h"
#include "tbex/log.h"

namespace pyb = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "tbex native core (private; use the tbex package)";
  // tbex.UserError is defined in Python (a ValueError with .code and .param); it is looked up
  // lazily so importing _C alone still works.
  static pyb::handle user_error_type;
  m.def("_set_user_error_type", [](pyb::object t) { user_error_type = t.release(); });
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tbex::UserError& e) {
      if (!user_error_type) {
        PyErr_SetString(PyExc_ValueError, e.what());
        return;
      }
      pyb::object err = pyb::reinterpret_borrow<pyb::object>(user_error_type)(e.what(), e.code(), e.param());
      PyErr_SetObject(user_error_type.ptr(), err.ptr());
    } catch (const tbex::InternalError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  // tbex.CacheWarning / tbex.PerformanceWarning: warnings from C++ (log::warn_once) become
  // `warnings` entries of their kind's category.
  static pyb::handle cache_warning, performance_warning;
  m.def("_set_warning_types", [](pyb::object cache, pyb::object performance) {
    cache_warning = cache.release();
    performance_warning = performance.release();
    tbex::log::set_warning_sink([](tbex::log::WarningKind kind, const std::string& message) {
      pyb::gil_scoped_acquire gil;
      const pyb::handle type =
          kind == tbex::log::WarningKind::kPerformance ? performance_warning : cache_warning;
      try {
        pyb::module_::import("warnings").attr("warn")(message, type, 2);
      } catch (pyb::error_already_set& e) {
        // A filter turned it into an error: C++ frames cannot carry it; it is printed instead.
        e.discard_as_unraisable("tbex warning");
      }
    });
  });
  m.def("_check_log", [] { tbex::log::check(); });
  tbex::py::define_args(m);
  tbex::py::define_layout(m);
  tbex::py::define_problem(m);
  tbex::py::define_kernel(m);
  tbex::py::define_conv_backward(m);
  tbex::py::define_aot(m);
  tbex::py::define_cache(m);
  tbex::py::define_tune(m);
  tbex::py::define_knobs(m);
  tbex::py::define_machine(m);
  tbex::py::define_ascendc(m);
}
