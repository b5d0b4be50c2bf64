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

/** para_dict -> ParaDict: every key one of TBE's own (a misspelled key is an error, not its
 * default), every value of the type the key needs. */
ParaDict parse_para_dict(pyb::handle d, OpKind op) {
  ParaDict p;
  if (d.is_none()) return p;
  for (const auto& [key, v] : to_items(d, "para_dict")) {
    check_para_dict_key(key, op);
    if (v.is_none()) continue;
    if (key == "strides") p.strides = to_ints(v, "strides");
    else if (key == "pads") p.pads = to_ints(v, "pads");
    else if (key == "dilations") p.dilations = to_ints(v, "dilations");
    else if (key == "res_dtype") p.res_dtype = to_str(v, "res_dtype");
    else if (key == "kernel_name") p.kernel_name = to_str(v, "kernel_name");
    else if (key == "groups") p.groups = to_int(v, "groups");
    else if (key == "group_dict") {
      std::map<std::string, int64_t> gd;
      for (const auto& [name, gv] : to_items(v, "group_dict"))
        gd[name] = to_int(gv, "group_dict['" + name + "']");
      p.group_dict = gd;
    }
    // The rest are TBE's pass-through attributes (para_dict_keys): no effect on the math.
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
      [](pyb::object x_shape, const std::string& x_dtype, pyb::object dy_shape,
         const std::string& dy_dtype, pyb::object filter_size, pyb::object para) {
        return make_backprop_filter_problem(
            to_ints(x_shape, "x"), parse_dtype(x_dtype, "x"), to_ints(dy_shape, "out_backprop"),
            parse_dtype(dy_dtype, "out_backprop"), to_ints(filter_size, "filter_size"),
            parse_para_dict(para, OpKind::kBackpropFilter));
      },
      pyb::arg("x_shape"), pyb::arg("x_dtype"), pyb::arg("dy_shape"), pyb::arg("dy_dtype"),
      pyb::arg("filter_size").none(true), pyb::arg("para_dict").none(true));
  m.def(
      "make_input_problem",
      [](pyb::object filter_shape, const std::string& filter_dtype, pyb::object dy_shape,
         const std::string& dy_dtype, pyb::object filter_size, pyb::object input_size,
         pyb::object para, pyb::object bias_shape, const std::string& bias_dtype) {
        return make_backprop_input_problem(
            to_ints(filter_shape, "filter"), parse_dtype(filter_dtype, "filter"),
            to_ints(dy_shape, "out_backprop"), parse_dtype(dy_dtype, "out_backprop"),
            to_ints(filter_size, "filter_size"), to_ints(input_size, "input_size"),
            parse_para_dict(para, OpKind::kBackpropInput), to_ints(bias_shape, "tensor_bias"),
            parse_dtype(bias_dtype, "tensor_bias"));
      },
      pyb::arg("filter_shape"), pyb::arg("filter_dtype"), pyb::arg("dy_shape"),
      pyb::arg("dy_dtype"), pyb::arg("filter_size").none(true), pyb::arg("input_size").none(true),
      pyb::arg("para_dict").none(true), pyb::arg("bias_shape") = pyb::list(),
      pyb::arg("bias_dtype") = "float32");
  m.def("derive_group_dict", [](pyb::object cin, pyb::object cout, pyb::object groups) {
    return group_dict_of(derive_group_dict(to_int(cin, "Cin"), to_int(cout, "Cout"),
                                           to_int(groups, "groups")));
  });
}

}  // namespace tbex::py
