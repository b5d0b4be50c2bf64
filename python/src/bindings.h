#pragma once
/** Entry points of the tbex._C submodules, each defined in its own bind_*.cpp. */
#include <pybind11/pybind11.h>

namespace tbex::py {
void define_layout(pybind11::module_& m);
void define_problem(pybind11::module_& m);
void define_kernel(pybind11::module_& m);
}  // namespace tbex::py
