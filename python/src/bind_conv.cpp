/** tbex.convolution_backward's native half: plans (validated, compiled) and their runs on numpy
 * arrays / DLPack tensors, GIL released while running. */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbex/conv_backward.h"
#include "tbex/errors.h"

namespace pyb = pybind11;

namespace tbex::py {
namespace {

StridedTensor strided(const TensorArg& t) {
  return StridedTensor{const_cast<void*>(t.data), t.shape, t.strides, t.dtype};
}

void run_plan(const ConvBackwardPlan& plan, pyb::handle grad_output, pyb::handle input,
              pyb::handle weight, pyb::handle grad_input, pyb::handle grad_weight,
              pyb::handle grad_bias) {
  const ConvBackwardArgs& a = plan.args();
  DLPackHold holds[6];
  const StridedTensor go = strided(tensor_arg(grad_output, a.grad_output_dtype, "grad_output", false, holds[0]));
  const StridedTensor in = strided(tensor_arg(input, a.input_dtype, "input", false, holds[1]));
  const StridedTensor w = strided(tensor_arg(weight, a.weight_dtype, "weight", false, holds[2]));
  pyb::handle outs[3] = {grad_input, grad_weight, grad_bias};
  static const char* kOut[3] = {"grad_input", "grad_weight", "grad_bias"};
  StridedTensor o[3];
  const StridedTensor* op[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    if (outs[i].is_none()) continue;
    o[i] = strided(tensor_arg(outs[i], plan.output_spec(i).dtype, kOut[i], true, holds[3 + i]));
    op[i] = &o[i];
  }
  pyb::gil_scoped_release nogil;
  plan.run(go, in, w, op[0], op[1], op[2], nullptr, 0);
}

}  // namespace

void define_conv_backward(pyb::module_& m) {
  pyb::class_<ConvBackwardPlan, std::shared_ptr<ConvBackwardPlan>>(m, "ConvBackwardPlan")
      .def_property_readonly("workspace_bytes", &ConvBackwardPlan::workspace_bytes)
      .def("describe", &ConvBackwardPlan::describe)
      .def(
          "output_spec",
          [](const ConvBackwardPlan& p, int i) {
            user_check(i >= 0 && i < 3, "", "i", "output index must be 0, 1 or 2");
            const TensorSpec s = p.output_spec(i);
            return pyb::make_tuple(s.shape, dtype_name(s.dtype));
          },
          pyb::arg("i"))
      .def("run", &run_plan, pyb::arg("grad_output"), pyb::arg("input"), pyb::arg("weight"),
           pyb::arg("grad_input"), pyb::arg("grad_weight"), pyb::arg("grad_bias"),
           "Computes the masked outputs into the given arrays (None where masked off).");

  m.def(
      "conv_backward_plan",
      [](std::vector<int64_t> grad_output_shape, const std::string& grad_output_dtype,
         std::vector<int64_t> input_shape, const std::string& input_dtype,
         std::vector<int64_t> weight_shape, const std::string& weight_dtype,
         std::optional<std::vector<int64_t>> bias_sizes, std::vector<int64_t> stride,
         std::vector<int64_t> padding, std::vector<int64_t> dilation, bool transposed,
         std::vector<int64_t> output_padding, int64_t groups, std::array<bool, 3> output_mask,
         int cube_math_type) {
        ConvBackwardArgs a;
        a.grad_output_shape = std::move(grad_output_shape);
        a.input_shape = std::move(input_shape);
        a.weight_shape = std::move(weight_shape);
        a.grad_output_dtype = parse_dtype(grad_output_dtype, "grad_output");
        a.input_dtype = parse_dtype(input_dtype, "input");
        a.weight_dtype = parse_dtype(weight_dtype, "weight");
        a.bias_sizes = std::move(bias_sizes);
        a.stride = std::move(stride);
        a.padding = std::move(padding);
        a.dilation = std::move(dilation);
        a.transposed = transposed;
        a.output_padding = std::move(output_padding);
        a.groups = groups;
        a.output_mask = output_mask;
        a.cube_math_type = cube_math_type;
        pyb::gil_scoped_release nogil;
        return std::const_pointer_cast<ConvBackwardPlan>(ConvBackwardPlan::cached(a));
      },
      pyb::arg("grad_output_shape"), pyb::arg("grad_output_dtype"), pyb::arg("input_shape"),
      pyb::arg("input_dtype"), pyb::arg("weight_shape"), pyb::arg("weight_dtype"),
      pyb::arg("bias_sizes"), pyb::arg("stride"), pyb::arg("padding"), pyb::arg("dilation"),
      pyb::arg("transposed"), pyb::arg("output_padding"), pyb::arg("groups"),
      pyb::arg("output_mask"), pyb::arg("cube_math_type"));
}

}  // namespace tbex::py
