/** Problems from TBE arguments: the para_dict is parsed here, once, into tbex::ParaDict. */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbex/errors.h"
#include "tbex/kernel.h"
#include "tbex/problem.h"

namespace pyb = pybind11;

namespace tbex::py {
namespace {

int64_t to_int(pyb::handle v, const std::string& param) {
  if (pyb::isinstance<pyb::bool_>(v) || !pyb::hasattr(v, "__index__"))
    throw UserError("", param, "expected an integer, got " + std::string(pyb::repr(v)));
  return v.attr("__index__")().cast<int64_t>();
}

std::vector<int64_t> to_ints(pyb::handle v, const std::string& param) {
  if (!pyb::isinstance<pyb::sequence>(v) || pyb::isinstance<pyb::str>(v))
    throw UserError("", param, "expected a list of integers, got " + std::string(pyb::repr(v)));
  std::vector<int64_t> out;
  for (pyb::handle e : v.cast<pyb::sequence>()) out.push_back(to_int(e, param));
  return out;
}

std::string to_str(pyb::handle v, const std::string& param) {
  if (!pyb::isinstance<pyb::str>(v))
    throw UserError("", param, "expected a string, got " + std::string(pyb::repr(v)));
  return v.cast<std::string>();
}

ParaDict parse_para_dict(const pyb::dict& d) {
  ParaDict p;
  for (auto [k, v] : d) {
    const std::string key = pyb::str(k);
    if (v.is_none()) continue;
    if (key == "strides") p.strides = to_ints(v, "strides");
    else if (key == "pads") p.pads = to_ints(v, "pads");
    else if (key == "dilations") p.dilations = to_ints(v, "dilations");
    else if (key == "res_dtype") p.res_dtype = to_str(v, "res_dtype");
    else if (key == "kernel_name") p.kernel_name = to_str(v, "kernel_name");
    else if (key == "groups") p.groups = to_int(v, "groups");
    else if (key == "group_dict") {
      if (!pyb::isinstance<pyb::dict>(v))
        throw UserError("", "group_dict", "expected a dict, got " + std::string(pyb::repr(v)));
      std::map<std::string, int64_t> gd;
      for (auto [gk, gv] : v.cast<pyb::dict>()) {
        const std::string name = pyb::str(gk);
        gd[name] = to_int(gv, "group_dict['" + name + "']");
      }
      p.group_dict = gd;
    }
    // Other keys (TBE passes framework attributes through para_dict) do not affect the math.
  }
  return p;
}

pyb::dict group_dict_of(const GroupDict& g) {
  pyb::dict d;
  d["real_g"] = g.real_g;
  d["mag_factor"] = g.mag_factor;
  d["cin1_g"] = g.cin1_g;
  d["cout_g"] = g.cout_g;
  d["cin_ori"] = g.cin_ori;
  d["cout_ori"] = g.cout_ori;
  return d;
}

}  // namespace

void define_problem(pyb::module_& m) {
  pyb::class_<Problem>(m, "Problem")
      .def_property_readonly("op", [](const Problem& p) { return op_name(p.op); })
      .def_property_readonly("canonical", &Problem::canonical)
      .def_property_readonly("output_shape", &Problem::output_shape)
      .def_property_readonly("input_shapes", &Problem::input_shapes)
      .def_property_readonly("input_dtypes",
                             [](const Problem& p) {
                               std::vector<std::string> out;
                               for (DType t : p.input_dtypes()) out.push_back(dtype_name(t));
                               return out;
                             })
      .def_property_readonly("in_dtype", [](const Problem& p) { return dtype_name(p.in_dtype); })
      .def_property_readonly("res_dtype", [](const Problem& p) { return dtype_name(p.res_dtype); })
      .def_property_readonly("has_bias", [](const Problem& p) { return p.has_bias; })
      .def_property_readonly("kernel_name", [](const Problem& p) { return p.kernel_name; })
      .def_property_readonly("group_dict", [](const Problem& p) { return group_dict_of(p.group); })
      .def_property_readonly("groups", [](const Problem& p) { return p.geo.groups; })
      .def_property_readonly("flops", [](const Problem& p) { return p.geo.flops(); })
      .def_property_readonly("ncdhw",
                             [](const Problem& p) {
                               const auto& g = p.geo;
                               pyb::dict d;
                               d["N"] = g.n; d["Cin"] = g.cin; d["Cout"] = g.cout;
                               d["groups"] = g.groups;
                               d["in_dhw"] = g.in; d["out_dhw"] = g.out; d["kernel_dhw"] = g.kernel;
                               d["strides_dhw"] = g.stride; d["dilations_dhw"] = g.dilation;
                               d["pads"] = g.pads;
                               return d;
                             })
      .def("explain_schedules", [](const Problem& p) { return explain_schedules(p); })
      .def("__repr__", [](const Problem& p) { return "<tbex.Problem " + p.canonical() + ">"; });

  m.def(
      "make_filter_problem",
      [](std::vector<int64_t> x_shape, const std::string& x_dtype, std::vector<int64_t> dy_shape,
         const std::string& dy_dtype, pyb::object filter_size, pyb::dict para) {
        return make_backprop_filter_problem(
            x_shape, parse_dtype(x_dtype, "x"), dy_shape, parse_dtype(dy_dtype, "out_backprop"),
            to_ints(filter_size, "filter_size"), parse_para_dict(para));
      },
      pyb::arg("x_shape"), pyb::arg("x_dtype"), pyb::arg("dy_shape"), pyb::arg("dy_dtype"),
      pyb::arg("filter_size"), pyb::arg("para_dict"));
  m.def(
      "make_input_problem",
      [](std::vector<int64_t> filter_shape, const std::string& filter_dtype,
         std::vector<int64_t> dy_shape, const std::string& dy_dtype, pyb::object filter_size,
         pyb::object input_size, pyb::dict para, std::vector<int64_t> bias_shape,
         const std::string& bias_dtype) {
        return make_backprop_input_problem(
            filter_shape, parse_dtype(filter_dtype, "filter"), dy_shape,
            parse_dtype(dy_dtype, "out_backprop"), to_ints(filter_size, "filter_size"),
            to_ints(input_size, "input_size"), parse_para_dict(para), bias_shape,
            parse_dtype(bias_dtype, "tensor_bias"));
      },
      pyb::arg("filter_shape"), pyb::arg("filter_dtype"), pyb::arg("dy_shape"),
      pyb::arg("dy_dtype"), pyb::arg("filter_size"), pyb::arg("input_size"),
      pyb::arg("para_dict"), pyb::arg("bias_shape") = std::vector<int64_t>{},
      pyb::arg("bias_dtype") = "float32");
  m.def("derive_group_dict", [](int64_t cin, int64_t cout, int64_t groups) {
    return group_dict_of(derive_group_dict(cin, cout, groups));
  });
}

}  // namespace tbex::py
