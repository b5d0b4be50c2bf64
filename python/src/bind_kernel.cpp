/** Compiled kernels in Python: numpy arrays and DLPack tensors in, computed in place, GIL released.
 *
 * Arrays are used where they are (no copies) when C-contiguous; an input with other strides
 * (innermost dimension contiguous) is copied to dense memory first, with a PerformanceWarning. A
 * uint16/int16 array is accepted where the kernel expects float16 or bfloat16 bits. */
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbex/errors.h"
#include "tbex/kernel.h"

namespace pyb = pybind11;

namespace tbex::py {
namespace {

// The DLPack ABI (legacy, unversioned DLManagedTensor), as the protocol defines it.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int kDLCPU = 1, kDLFloat = 2, kDLBfloat = 4, kDLInt = 0, kDLUInt = 1;


std::string dtype_of(const pyb::array& a) {
  return pyb::str(a.dtype().attr("name"));
}

/** numpy dtype -> tbex dtype, accepting raw 16-bit integer bits where 16-bit floats are expected. */
DType resolve_numpy(const pyb::array& a, DType expected, const char* name) {
  const std::string dt = dtype_of(a);
  if (dt == "float32") return DType::kFloat32;
  if (dt == "float16") return DType::kFloat16;
  if (dt == "bfloat16") return DType::kBFloat16;
  if ((dt == "uint16" || dt == "int16") && expected != DType::kFloat32) return expected;
  throw UserError(code::kValue, name, "array dtype " + dt + " is not float16, bfloat16 or float32 (expected " +
                                std::string(dtype_name(expected)) + ")");
}

DType resolve_dlpack(const DLDataType& t, DType expected, const char* name) {
  user_check(t.lanes == 1, code::kValue, name, "vector DLPack dtypes are not supported");
  if (t.code == kDLFloat && t.bits == 32) return DType::kFloat32;
  if (t.code == kDLFloat && t.bits == 16) return DType::kFloat16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::kBFloat16;
  if ((t.code == kDLInt || t.code == kDLUInt) && t.bits == 16 && expected != DType::kFloat32)
    return expected;
  throw UserError(code::kValue, name, "DLPack dtype (code " + std::to_string(t.code) + ", bits " +
                                std::to_string(t.bits) + ") is not float16, bfloat16 or float32");
}

}  // namespace

DLPackHold::~DLPackHold() {
  auto* m = static_cast<DLManagedTensor*>(mt);
  if (m && m->deleter) m->deleter(m);
}

/** A TensorArg over a numpy array or a DLPack tensor (CPU). */
TensorArg tensor_arg(pyb::handle obj, DType expected, const char* name, bool writable,
                     DLPackHold& hold) {
  TensorArg t;
  if (pyb::isinstance<pyb::array>(obj)) {
    pyb::array a = pyb::reinterpret_borrow<pyb::array>(obj);
    user_check(!writable || a.writeable(), code::kValue, name, "output array is read-only");
    t.dtype = resolve_numpy(a, expected, name);
    t.data = a.data();
    for (pyb::ssize_t i = 0; i < a.ndim(); ++i) {
      t.shape.push_back(a.shape(i));
      user_check(a.strides(i) % a.itemsize() == 0, code::kValue, name, "strides are not a multiple of the element size");
      t.strides.push_back(a.strides(i) / a.itemsize());
    }
    return t;
  }
  if (pyb::hasattr(obj, "__dlpack__")) {
    pyb::object cap = obj.attr("__dlpack__")();
    auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
    user_check(mt != nullptr, code::kType, name, "__dlpack__ did not return a dltensor capsule");
    PyErr_Clear();
    PyCapsule_SetName(cap.ptr(), "used_dltensor");
    hold.mt = mt;
    const DLTensor& d = mt->dl_tensor;
    user_check(d.device.device_type == kDLCPU, code::kValue, name, "tensor is not on the CPU");
    t.dtype = resolve_dlpack(d.dtype, expected, name);
    t.data = static_cast<char*>(d.data) + d.byte_offset;
    t.shape.assign(d.shape, d.shape + d.ndim);
    if (d.strides) t.strides.assign(d.strides, d.strides + d.ndim);
    return t;
  }
  throw UserError(code::kType, name, "expected a numpy array or a DLPack tensor, got " +
                                std::string(pyb::str(obj.get_type().attr("__name__"))));
}

namespace {

void run_kernel(const Kernel& k, const pyb::sequence& inputs, pyb::handle out) {
  const Problem& p = k.problem();
  const auto dtypes = p.input_dtypes();
  const auto names = p.input_names();
  user_check(inputs.size() == dtypes.size(), code::kListLength, "inputs",
             "expected " + std::to_string(dtypes.size()) + " inputs, got " +
                 std::to_string(inputs.size()));
  std::vector<DLPackHold> holds(inputs.size() + 1);
  std::vector<TensorArg> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(tensor_arg(inputs[i], dtypes[i], names[i].c_str(), false, holds[i]));
  TensorArg o = tensor_arg(out, p.res_dtype, "out", true, holds.back());
  pyb::gil_scoped_release nogil;
  k.run(args, o);
}

}  // namespace

void define_kernel(pyb::module_& m) {
  pyb::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
      .def_property_readonly("problem", [](const Kernel& k) { return k.problem(); })
      .def_property_readonly("schedule", &Kernel::schedule_name)
      .def_property_readonly("threads", &Kernel::threads)
      .def_property_readonly("variant", &Kernel::variant)
      .def("run", &run_kernel, pyb::arg("inputs"), pyb::arg("out"),
           "Runs on numpy arrays / DLPack tensors; writes `out` in place.");

  m.def(
      "compile",
      [](const Problem& p, const std::string& schedule, const std::string& variant) {
        pyb::gil_scoped_release nogil;
        return std::const_pointer_cast<Kernel>(compile(p, CompileOptions{schedule, variant}));
      },
      pyb::arg("problem"), pyb::arg("schedule") = "auto", pyb::arg("variant") = "");
  m.def("schedule_names", [](const std::string& op) {
    if (op == "conv3d_backprop_filter") return schedule_names(OpKind::kBackpropFilter);
    if (op == "conv3d_backprop_input") return schedule_names(OpKind::kBackpropInput);
    if (op == "conv3d") return schedule_names(OpKind::kForward);
    throw UserError(code::kValue, "op", "unknown op '" + op + "'");
  });
  m.def("set_num_threads", &set_num_threads, pyb::arg("n"));
  m.def("num_threads", &num_threads);
}

}  // namespace tbex::py
