#pragma once
/** Entry points of the tbex._C submodules, each defined in its own bind_*.cpp. */
#include <pybind11/pybind11.h>

#include "tbex/kernel.h"

namespace tbex::py {

/** Keeps a DLPack producer's memory alive for the duration of one call. */
struct DLPackHold {
  void* mt = nullptr;  ///< DLManagedTensor*
  DLPackHold() = default;
  DLPackHold(const DLPackHold&) = delete;
  DLPackHold& operator=(const DLPackHold&) = delete;
  ~DLPackHold();
};

/** A view of a numpy array or a CPU DLPack tensor (no copy). `expected` resolves raw 16-bit
 * integer arrays to float16/bfloat16 bits; UserError naming `name` for anything unusable. */
TensorArg tensor_arg(pybind11::handle obj, DType expected, const char* name, bool writable,
                     DLPackHold& hold);

void define_layout(pybind11::module_& m);
void define_problem(pybind11::module_& m);
void define_kernel(pybind11::module_& m);
void define_conv_backward(pybind11::module_& m);
void define_aot(pybind11::module_& m);
void define_cache(pybind11::module_& m);
void define_tune(pybind11::module_& m);
void define_knobs(pybind11::module_& m);
void define_machine(pybind11::module_& m);
}  // namespace tbex::py
