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
      .def_property_readonly("output_mask",
                             [](const ConvBackwardPlan& p) {
                               const auto& m = p.args().output_mask;
                               return std::vector<bool>{m[0], m[1], m[2]};
                             })
      .def(
          "output_spec",
          [](const ConvBackwardPlan& p, int i) {
            user_check(i >= 0 && i < 3, code::kAclnnInvalid, "i", "output index must be 0, 1 or 2");
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
         pyb::object bias_sizes, pyb::object stride, pyb::object padding, pyb::object dilation,
         pyb::object transposed, pyb::object output_padding, pyb::object groups,
         pyb::object output_mask, pyb::object cube_math_type) {
        const ArgCodes c = kFrameworkCodes;
        // torch's one-value window lists apply to every spatial dim; so do they here.
        const size_t spatial = input_shape.size() >= 2 ? input_shape.size() - 2 : 0;
        auto window = [&](pyb::handle v, const char* param) {
          std::vector<int64_t> r = to_ints(v, param, c, /*allow_scalar=*/true);
          if (r.size() == 1 && spatial > 1) r.assign(spatial, r[0]);
          return r;
        };
        ConvBackwardArgs a;
        a.grad_output_shape = std::move(grad_output_shape);
        a.input_shape = std::move(input_shape);
        a.weight_shape = std::move(weight_shape);
        a.grad_output_dtype = parse_dtype(grad_output_dtype, "grad_output");
        a.input_dtype = parse_dtype(input_dtype, "input");
        a.weight_dtype = parse_dtype(weight_dtype, "weight");
        if (!bias_sizes.is_none()) a.bias_sizes = to_ints(bias_sizes, "bias_sizes", c);
        a.stride = window(stride, "stride");
        a.padding = window(padding, "padding");
        a.dilation = window(dilation, "dilation");
        a.transposed = to_bool(transposed, "transposed", c);
        if (!output_padding.is_none()) a.output_padding = window(output_padding, "output_padding");
        a.groups = to_int(groups, "groups", c);
        const std::vector<bool> mask = to_bools(output_mask, "output_mask", c);
        user_check(mask.size() == 3, code::kAclnnInvalid, "output_mask",
                   "expected 3 values, got " + std::to_string(mask.size()));
        a.output_mask = {mask[0], mask[1], mask[2]};
        const int64_t cmt = to_int(cube_math_type, "cube_math_type", c);
        user_check(cmt >= 0 && cmt <= 3, code::kAclnnInvalid, "cube_math_type",
                   "must be 0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 "
                   "(USE_HF32), got " + std::to_string(cmt));
        a.cube_math_type = (int)cmt;
        pyb::gil_scoped_release nogil;
        return std::const_pointer_cast<ConvBackwardPlan>(ConvBackwardPlan::cached(a));
      },
      pyb::arg("grad_output_shape"), pyb::arg("grad_output_dtype"), pyb::arg("input_shape"),
      pyb::arg("input_dtype"), pyb::arg("weight_shape"), pyb::arg("weight_dtype"),
      pyb::arg("bias_sizes").none(true), pyb::arg("stride").none(true),
      pyb::arg("padding").none(true), pyb::arg("dilation").none(true),
      pyb::arg("transposed").none(true), pyb::arg("output_padding").none(true),
      pyb::arg("groups").none(true), pyb::arg("output_mask").none(true),
      pyb::arg("cube_math_type").none(true));
}

}  // namespace tbex::py
