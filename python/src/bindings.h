#pragma once
/** Entry points of the tbex._C submodules, each defined in its own bind_*.cpp. */
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "tbex/errors.h"
#include "tbex/kernel.h"

namespace tbex::py {

/** The codes a conversion error carries: TBE's for the DSL, aclnn's for convolution_backward. */
struct ArgCodes {
  const char* type;   ///< a value of the wrong type
  const char* range;  ///< an int outside int64
};
constexpr ArgCodes kDslCodes{code::kType, code::kRange};
constexpr ArgCodes kFrameworkCodes{code::kAclnnInvalid, code::kAclnnInvalid};

/** Strict conversions (bind_args.cpp): an int (anything with __index__ but bool), a list of them
 * (any sequence but a string; `allow_scalar` also takes one int), a bool, a str, a dict's items;
 * UserError naming `param` otherwise. */
int64_t to_int(pybind11::handle v, const std::string& param, ArgCodes c = kDslCodes);
std::vector<int64_t> to_ints(pybind11::handle v, const std::string& param, ArgCodes c = kDslCodes,
                             bool allow_scalar = false);
bool to_bool(pybind11::handle v, const std::string& param, ArgCodes c = kDslCodes);
std::vector<bool> to_bools(pybind11::handle v, const std::string& param, ArgCodes c = kDslCodes);
std::string to_str(pybind11::handle v, const std::string& param, ArgCodes c = kDslCodes);
std::vector<std::pair<std::string, pybind11::object>> to_items(pybind11::handle v,
                                                               const std::string& param,
                                                               ArgCodes c = kDslCodes);

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

void define_args(pybind11::module_& m);
void define_layout(pybind11::module_& m);
void define_problem(pybind11::module_& m);
void define_kernel(pybind11::module_& m);
void define_conv_backward(pybind11::module_& m);
void define_aot(pybind11::module_& m);
void define_cache(pybind11::module_& m);
void define_tune(pybind11::module_& m);
void define_knobs(pybind11::module_& m);
void define_machine(pybind11::module_& m);
void define_ascendc(pybind11::module_& m);
}  // namespace tbex::py
