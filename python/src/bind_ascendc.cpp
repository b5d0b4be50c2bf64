/** tbex.ascendc: the Ascend C host tilers for a problem, as the kernel reads them (bytes) and as
 * named fields (a dict per sub-struct). */
#include <pybind11/stl.h>

#include "bindings.h"
#include "tiling/conv_backprop/conv3d_bp_filter_tiling.h"
#include "tiling/conv_backprop/conv3d_bp_input_tiling.h"

namespace pyb = pybind11;

namespace tbex::py {
namespace {

// Each field by its CANN name (pybind casts its own integer type).
#define TBEX_PY_FIELD(type, name) d[#name] = t.name;
pyb::dict dw_fields(const TConv3DBpFilterTiling& t) {
  pyb::dict d;
  TBEX_ASCENDC_DW_TILING_FIELDS(TBEX_PY_FIELD)
  return d;
}
pyb::dict dx_fields(const TConv3DBackpropInputTiling& t) {
  pyb::dict d;
  TBEX_ASCENDC_DX_TILING_FIELDS(TBEX_PY_FIELD)
  return d;
}
#undef TBEX_PY_FIELD

ConvCommonApi::ConvDtype conv_dtype(const std::string& name, const char* param) {
  if (name == "float16") return ConvCommonApi::FLOAT16;
  if (name == "bfloat16") return ConvCommonApi::BF16;
  if (name == "float32") return ConvCommonApi::FLOAT32;
  throw UserError(code::kValue, param, "should be float16, bfloat16 or float32, actual '" + name + "'");
}

std::vector<int64_t> ints(pyb::handle v, const char* param, size_t n) {
  auto out = to_ints(v, param);
  if (out.size() != n)
    throw UserError(code::kListLength, param,
                    "should have " + std::to_string(n) + " values, actual " + list_str(out));
  return out;
}

/** Applies the keyword arguments every tiler takes. */
template <class Tiler>
void describe(Tiler& t, pyb::handle weight, pyb::handle input, pyb::handle grad_output,
              pyb::handle strides, pyb::handle pads, pyb::handle dilations, int64_t groups) {
  const auto w = ints(weight, "weight_shape", 5), x = ints(input, "input_shape", 5),
             dy = ints(grad_output, "grad_output_shape", 5);
  const auto s = ints(strides, "strides", 3), p = ints(pads, "pads", 6), d = ints(dilations, "dilations", 3);
  t.SetWeightShape(w[0], w[1], w[2], w[3], w[4]);
  t.SetInputShape(x[0], x[1], x[2], x[3], x[4]);
  t.SetGradOutputShape(dy[0], dy[1], dy[2], dy[3], dy[4]);
  t.SetStride(s[0], s[1], s[2]);
  t.SetPadding(p[0], p[1], p[2], p[3], p[4], p[5]);
  t.SetDilation(d[0], d[1], d[2]);
  t.SetGroups(groups);
}

}  // namespace

void define_ascendc(pyb::module_& m) {
  m.def(
      "_ascendc_filter_tiling",
      [](pyb::handle weight, pyb::handle input, pyb::handle grad_output, const std::string& dtype,
         pyb::handle strides, pyb::handle pads, pyb::handle dilations, int64_t groups) {
        ConvBackpropApi::Conv3dBpFilterTiling t;
        describe(t, weight, input, grad_output, strides, pads, dilations, groups);
        const auto dt = conv_dtype(dtype, "dtype");
        t.SetInputType(ConvCommonApi::TPosition::GM, ConvCommonApi::NDC1HWC0, dt);
        t.SetGradOutputType(ConvCommonApi::TPosition::GM, ConvCommonApi::NDC1HWC0, dt);
        AscendC::tiling::Conv3DBackpropFilterTilingData td;
        if (t.GetTiling(td) != 0) throw UserError(code::kValue, "tiling", t.GetErrorMessage());
        pyb::dict fields;
        fields["params"] = pyb::dict(pyb::arg("totalL1Size") = td.params.totalL1Size);
        fields["dwTiling"] = dw_fields(td.dwTiling);
        fields["basicBlockTiling"] = pyb::dict(pyb::arg("singleCoreM") = td.basicBlockTiling.singleCoreM,
                                               pyb::arg("singleCoreN") = td.basicBlockTiling.singleCoreN,
                                               pyb::arg("singleCoreK") = td.basicBlockTiling.singleCoreK);
        return pyb::make_tuple(pyb::bytes(reinterpret_cast<const char*>(&td), sizeof(td)), fields);
      },
      pyb::arg("weight_shape"), pyb::arg("input_shape"), pyb::arg("grad_output_shape"),
      pyb::arg("dtype"), pyb::arg("strides"), pyb::arg("pads"), pyb::arg("dilations"), pyb::arg("groups"));
  m.def(
      "_ascendc_input_tiling",
      [](pyb::handle weight, pyb::handle input, pyb::handle grad_output, const std::string& dtype,
         const std::string& out_dtype, pyb::handle strides, pyb::handle pads, pyb::handle dilations,
         int64_t groups) {
        ConvBackpropApi::Conv3DBpInputTiling t;
        describe(t, weight, input, grad_output, strides, pads, dilations, groups);
        const auto dt = conv_dtype(dtype, "dtype");
        t.SetWeightType(ConvCommonApi::TPosition::GM, ConvCommonApi::FRACTAL_Z_3D, dt);
        t.SetGradOutputType(ConvCommonApi::TPosition::GM, ConvCommonApi::NDC1HWC0, dt);
        t.SetInputType(ConvCommonApi::TPosition::GM, ConvCommonApi::NDC1HWC0,
                       conv_dtype(out_dtype, "out_dtype"));
        AscendC::tiling::Conv3DBackpropInputTilingData td;
        if (t.GetTiling(td) != 0) throw UserError(code::kValue, "tiling", t.GetErrorMessage());
        pyb::dict fields;
        fields["conv3DDxTiling"] = dx_fields(td.conv3DDxTiling);
        return pyb::make_tuple(pyb::bytes(reinterpret_cast<const char*>(&td), sizeof(td)), fields);
      },
      pyb::arg("weight_shape"), pyb::arg("input_shape"), pyb::arg("grad_output_shape"),
      pyb::arg("dtype"), pyb::arg("out_dtype"), pyb::arg("strides"), pyb::arg("pads"),
      pyb::arg("dilations"), pyb::arg("groups"));
}

}  // namespace tbex::py
