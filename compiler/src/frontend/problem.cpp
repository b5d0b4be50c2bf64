#include <sstream>

#include "tbex/errors.h"
#include "tbex/problem.h"

namespace tbex {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::kBackpropFilter: return "conv3d_backprop_filter";
    case OpKind::kBackpropInput: return "conv3d_backprop_input";
    case OpKind::kForward: return "conv3d";
  }
  throw InternalError("unknown OpKind");
}

double ConvGeometry::flops() const {
  return 2.0 * n * cout * out[0] * out[1] * out[2] * cin_pg() * kernel[0] * kernel[1] * kernel[2];
}

std::vector<int64_t> Problem::x_shape() const {
  return {geo.n, geo.in[0], geo.cin1(), geo.in[1], geo.in[2], kC0};
}
std::vector<int64_t> Problem::dy_shape() const {
  return {geo.n, geo.out[0], geo.cout1(), geo.out[1], geo.out[2], kC0};
}
std::vector<int64_t> Problem::filter_shape() const {
  const auto& k = geo.kernel;
  return {group.real_g * k[0] * group.cin1_g * k[1] * k[2], group.cout_g / kC0, kC0, kC0};
}
std::vector<int64_t> Problem::dw_shape() const {
  const auto& k = geo.kernel;
  return {group.real_g, k[0] * group.cin1_g * k[1] * k[2], group.cout_g, kC0};
}
std::vector<int64_t> Problem::dx_shape() const {
  return {geo.n, geo.in[0], geo.cin1(), geo.in[1] * geo.in[2], kC0};
}
std::vector<int64_t> Problem::bias_shape() const { return {geo.cin}; }

std::vector<std::vector<int64_t>> Problem::input_shapes() const {
  if (op == OpKind::kBackpropFilter) return {x_shape(), dy_shape()};
  if (op == OpKind::kForward) return {x_shape(), filter_shape()};
  std::vector<std::vector<int64_t>> s{filter_shape(), dy_shape()};
  if (has_bias) s.push_back(bias_shape());
  return s;
}

std::vector<DType> Problem::input_dtypes() const {
  std::vector<DType> t{in_dtype, in_dtype};
  if (op == OpKind::kBackpropInput && has_bias) t.push_back(bias_dtype);
  return t;
}

std::vector<std::string> Problem::input_names() const {
  if (op == OpKind::kBackpropFilter) return {"x", "out_backprop"};
  if (op == OpKind::kForward) return {"x", "filter"};
  std::vector<std::string> n{"filter", "out_backprop"};
  if (has_bias) n.push_back("tensor_bias");
  return n;
}

std::vector<int64_t> Problem::output_shape() const {
  switch (op) {
    case OpKind::kBackpropFilter: return dw_shape();
    case OpKind::kBackpropInput: return dx_shape();
    case OpKind::kForward: return dy_shape();
  }
  throw InternalError("unknown OpKind");
}

std::string Problem::canonical() const {
  const auto& g = geo;
  std::ostringstream s;
  const char* tag = op == OpKind::kBackpropFilter ? "dw" : op == OpKind::kBackpropInput ? "dx" : "fwd";
  s << tag << "_g" << g.groups << "mb" << g.n << "ic"
    << g.cin << "id" << g.in[0] << "ih" << g.in[1] << "iw" << g.in[2] << "oc" << g.cout << "od"
    << g.out[0] << "oh" << g.out[1] << "ow" << g.out[2] << "kd" << g.kernel[0] << "kh"
    << g.kernel[1] << "kw" << g.kernel[2] << "sd" << g.stride[0] << "sh" << g.stride[1] << "sw"
    << g.stride[2] << "dd" << g.dilation[0] << "dh" << g.dilation[1] << "dw" << g.dilation[2]
    << "pd" << g.pads[0] << "_" << g.pads[1] << "ph" << g.pads[2] << "_" << g.pads[3] << "pw"
    << g.pads[4] << "_" << g.pads[5] << "_" << dtype_name(in_dtype) << "_" << dtype_name(res_dtype);
  if (has_bias) s << "_bias_" << dtype_name(bias_dtype);
  return s.str();
}

}  // namespace tbex
