/** TBE arguments -> typed Problem, with every semantic check of docs/validation.md.
 *
 * Ascend hardware limits (stride <= 63, sizes <= 4096, pad < kernel, buffer sizes) are
 * deliberately not enforced: a CPU computes those problems. */
#include <array>
#include <climits>
#include <sstream>

#include "tbex/errors.h"
#include "tbex/problem.h"

namespace tbex {
namespace {

constexpr const char* kDimName[3] = {"D", "H", "W"};
// TBE's codes for these checks differ per spatial dim: D, H, W.
constexpr const char* kKernelTooBig[3] = {"E60014", "E60015", "E62507"};
constexpr const char* kOutSizeRule[3] = {"E60024", "E60025", "E62508"};
/** Largest tensor tbex accepts: 2^46 bytes (64 TiB) keeps every offset far from int64 overflow. */
constexpr int64_t kMaxBytes = int64_t(1) << 46;


void check_len(const std::vector<int64_t>& v, size_t n, const char* param) {
  user_check(v.size() == n, "", param,
             "expected " + std::to_string(n) + " values, got " + std::to_string(v.size()) + " " +
                 list_str(v));
}

void check_positive(const std::vector<int64_t>& v, const char* param) {
  for (int64_t d : v)
    user_check(d > 0, "", param, "every value must be > 0, got " + list_str(v));
}

/** 6HD operand: 6 dims > 0 and C0 == 16. */
void check_6hd(const std::vector<int64_t>& s, const char* param) {
  check_len(s, 6, param);
  check_positive(s, param);
  user_check(s[5] == kC0, "E62511", param,
             "C0 (last dim of the 6HD shape " + list_str(s) + ") must be 16, got " + std::to_string(s[5]));
}

std::vector<int64_t> or_default(const std::optional<std::vector<int64_t>>& v,
                                std::vector<int64_t> dflt) {
  return v ? *v : dflt;
}

void check_bytes(const std::vector<int64_t>& shape, DType t, const char* param) {
  int64_t bytes = (int64_t)dtype_size(t);
  for (int64_t d : shape) {
    user_check(d <= INT32_MAX, "", param,
               "dimension " + std::to_string(d) + " of shape " + list_str(shape) + " exceeds 2^31-1");
    user_check(d == 0 || bytes <= kMaxBytes / d, "", param,
               "tensor of shape " + list_str(shape) + " is too large (more than 2^46 bytes)");
    bytes *= d;
  }
}

/** Where D, H, W and N, C sit in a 5-int list: dW's dilations are N,D,C,H,W; dX's strides and
 * dilations are N,D,H,W,C. */
struct AxisOrder {
  const char* name;
  std::array<int, 3> dhw;
  std::array<int, 2> nc;
};
constexpr AxisOrder kNDCHW{"N,D,C,H,W", {1, 3, 4}, {0, 2}};
constexpr AxisOrder kNDHWC{"N,D,H,W,C", {1, 2, 3}, {0, 4}};

/** para_dict's strides (3 ints D,H,W, or 5 in `order`), pads (6) and dilations (5 in `order`). */
void parse_window(ConvGeometry& g, const ParaDict& para, const AxisOrder& order, bool five_strides) {
  const auto strides = or_default(para.strides, std::vector<int64_t>(five_strides ? 5 : 3, 1));
  const auto pads = or_default(para.pads, {0, 0, 0, 0, 0, 0});
  const auto dil = or_default(para.dilations, {1, 1, 1, 1, 1});
  const std::string where = std::string(" (positions ") + std::to_string(order.nc[0]) + " and " +
                            std::to_string(order.nc[1]) + " of " + order.name + ") must be 1, got ";
  check_len(strides, five_strides ? 5 : 3, "strides");
  check_positive(strides, "strides");
  if (five_strides)
    user_check(strides[order.nc[0]] == 1 && strides[order.nc[1]] == 1, "", "strides",
               "stride on N and C" + where + list_str(strides));
  check_len(pads, 6, "pads");
  check_len(dil, 5, "dilations");
  user_check(dil[order.nc[0]] == 1 && dil[order.nc[1]] == 1, "E62510", "dilations",
             "dilation on N and C" + where + list_str(dil));
  check_positive(dil, "dilations");
  for (int i = 0; i < 6; ++i)
    user_check(pads[i] >= 0, "", "pads", "every pad must be >= 0, got " + list_str(pads));
  for (int i = 0; i < 3; ++i) {
    g.stride[i] = five_strides ? strides[order.dhw[i]] : strides[i];
    g.dilation[i] = dil[order.dhw[i]];
  }
  for (int i = 0; i < 6; ++i) g.pads[i] = pads[i];
}

/** Dilated kernel fits the padded input, and the output size rule holds, per spatial dim.
 * Errors name the caller's parameters: filter_size / out_backprop for dW and dX, the
 * ConvGeometry fields kernel / out for the forward conv. */
void check_spatial(const ConvGeometry& g, bool forward) {
  const char* kernel_param = forward ? "kernel" : "filter_size";
  const char* out_param = forward ? "out" : "out_backprop";
  for (int i = 0; i < 3; ++i) {
    const int64_t padded = g.in[i] + g.pads[2 * i] + g.pads[2 * i + 1];
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;
    const std::string dim = kDimName[i];
    user_check(dk <= padded, kKernelTooBig[i], kernel_param,
               "dilated kernel " + dim + " (" + std::to_string(g.kernel[i]) + "-1)*" +
                   std::to_string(g.dilation[i]) + "+1 = " + std::to_string(dk) +
                   " exceeds the padded input " + dim + " " + std::to_string(g.in[i]) + "+" +
                   std::to_string(g.pads[2 * i]) + "+" + std::to_string(g.pads[2 * i + 1]) +
                   " = " + std::to_string(padded));
    const int64_t expect = (padded - dk) / g.stride[i] + 1;
    user_check(g.out[i] == expect, kOutSizeRule[i], out_param,
               std::string(out_param) + " " + dim + " is " + std::to_string(g.out[i]) +
                   " but the input " + dim + " " + std::to_string(g.in[i]) + ", pads " +
                   std::to_string(g.pads[2 * i]) + "/" + std::to_string(g.pads[2 * i + 1]) +
                   ", dilated kernel " + std::to_string(dk) + " and stride " +
                   std::to_string(g.stride[i]) + " give " + std::to_string(expect));
  }
}

/** Resolves Cin and groups, derives group_dict and checks a caller's group_dict against it. */
GroupDict resolve_groups(ConvGeometry& g, int64_t cin_pg, const ParaDict& para,
                         std::optional<int64_t> cin_known) {
  std::optional<int64_t> cin = cin_known;
  std::string cin_from = "filter_size";  // named when Cin and the filter disagree
  const auto& gd = para.group_dict;
  if (gd) {
    for (const auto& [key, value] : *gd) {
      static const char* known[] = {"real_g", "mag_factor", "cin1_g", "cout_g", "cin_ori",
                                    "cout_ori", "groups"};
      bool ok = false;
      for (const char* k : known) ok |= key == k;
      user_check(ok, "", "group_dict", "unknown key '" + key + "'");
    }
    if (!cin && gd->count("cin_ori")) {
      cin = gd->at("cin_ori");
      cin_from = "group_dict['cin_ori']";
    }
  }
  int64_t groups = 0;
  if (para.groups) groups = *para.groups;
  else if (gd && gd->count("groups")) groups = gd->at("groups");
  if (para.groups || (gd && gd->count("groups")))
    user_check(groups > 0, "E60038", "groups", "groups must be > 0, got " + std::to_string(groups));
  if (!cin) cin = (groups > 0 ? groups : 1) * cin_pg;
  user_check(*cin > 0, "", cin_from.c_str(), "input channels must be > 0, got " + std::to_string(*cin));
  // TBE's DSL carries groups only in group_dict (Cin over the filter's C, then checked against
  // every key); without either, groups is 1 as in TBE's operators, so a filter C that disagrees
  // with Cin is an error.
  if (groups == 0 && !gd) groups = 1;
  if (groups == 0) {
    user_check(*cin % cin_pg == 0, "E60010", cin_from.c_str(),
               "Cin " + std::to_string(*cin) + " is not a multiple of the filter's channels " +
                   std::to_string(cin_pg) + " (Cin must equal filter C * groups)");
    groups = *cin / cin_pg;
  }
  user_check(*cin == cin_pg * groups, "E60010", cin_from.c_str(),
             "Cin " + std::to_string(*cin) + " != filter C " + std::to_string(cin_pg) +
                 " * groups " + std::to_string(groups));
  g.cin = *cin;
  g.groups = groups;
  GroupDict derived = derive_group_dict(g.cin, g.cout, groups);
  if (gd) {
    const std::pair<const char*, int64_t> fields[] = {
        {"real_g", derived.real_g}, {"mag_factor", derived.mag_factor},
        {"cin1_g", derived.cin1_g}, {"cout_g", derived.cout_g},
        {"cin_ori", derived.cin_ori}, {"cout_ori", derived.cout_ori}};
    for (const auto& [key, want] : fields) {
      auto it = gd->find(key);
      if (it == gd->end()) continue;
      user_check(it->second == want, "E60038", (std::string("group_dict['") + key + "']").c_str(),
                 "is " + std::to_string(it->second) + " but the shapes (Cin=" +
                     std::to_string(g.cin) + ", Cout=" + std::to_string(g.cout) +
                     ", groups=" + std::to_string(groups) + ") give " + std::to_string(want) +
                     "; derived group_dict " + derived.to_string());
    }
  }
  return derived;
}

/** Every size, stride and dilation > 0 and every pad >= 0 (a hand-built geometry has not been
 * through parse_window). */
void check_geometry(const ConvGeometry& g) {
  user_check(g.n > 0 && g.cin > 0 && g.cout > 0, "", "shape",
             "N, Cin, Cout must be > 0, got N=" + std::to_string(g.n) + ", Cin=" +
                 std::to_string(g.cin) + ", Cout=" + std::to_string(g.cout));
  for (int i = 0; i < 3; ++i) {
    user_check(g.in[i] > 0 && g.out[i] > 0 && g.kernel[i] > 0, "", "shape",
               std::string("spatial sizes must be > 0 (dim ") + kDimName[i] + "), got input " +
                   std::to_string(g.in[i]) + ", output " + std::to_string(g.out[i]) +
                   ", kernel " + std::to_string(g.kernel[i]));
    user_check(g.stride[i] > 0 && g.dilation[i] > 0, "", "strides",
               std::string("strides and dilations must be > 0 (dim ") + kDimName[i] +
                   "), got stride " + std::to_string(g.stride[i]) + ", dilation " +
                   std::to_string(g.dilation[i]));
  }
  for (int i = 0; i < 6; ++i)
    user_check(g.pads[i] >= 0, "", "pads",
               "every pad must be >= 0, got " + list_str({g.pads.begin(), g.pads.end()}));
}

void check_dtypes(DType a, DType b, const char* a_name, const char* b_name) {
  user_check(a == b, "", b_name,
             std::string("dtype ") + dtype_name(b) + " differs from " + a_name + "'s dtype " +
                 dtype_name(a) + "; both must be the same (float16, bfloat16 or float32)");
}

}  // namespace

Problem make_backprop_filter_problem(const std::vector<int64_t>& x_shape, DType x_dtype,
                                     const std::vector<int64_t>& dy_shape, DType dy_dtype,
                                     const std::vector<int64_t>& filter_size,
                                     const ParaDict& para) {
  Problem p;
  p.op = OpKind::kBackpropFilter;
  p.kernel_name = para.kernel_name;
  check_6hd(x_shape, "x");
  check_6hd(dy_shape, "out_backprop");
  check_dtypes(x_dtype, dy_dtype, "x", "out_backprop");
  p.in_dtype = x_dtype;
  p.res_dtype = parse_dtype(para.res_dtype.value_or("float32"), "res_dtype");
  user_check(p.res_dtype == DType::kFloat32, "", "res_dtype",
             std::string("conv3d_backprop_filter computes float32, got ") + dtype_name(p.res_dtype));
  check_len(filter_size, 5, "filter_size");
  check_positive(filter_size, "filter_size");

  ConvGeometry& g = p.geo;
  user_check(x_shape[0] == dy_shape[0], "E62503", "out_backprop",
             "batch " + std::to_string(dy_shape[0]) + " differs from x's batch " +
                 std::to_string(x_shape[0]));
  g.n = x_shape[0];
  g.in = {x_shape[1], x_shape[3], x_shape[4]};
  g.out = {dy_shape[1], dy_shape[3], dy_shape[4]};
  g.kernel = {filter_size[1], filter_size[3], filter_size[4]};
  g.cout = filter_size[0];
  if (para.group_dict && para.group_dict->count("cout_ori"))
    user_check(para.group_dict->at("cout_ori") == g.cout, "E60038", "group_dict['cout_ori']",
               "is " + std::to_string(para.group_dict->at("cout_ori")) +
                   " but filter_size gives Cout " + std::to_string(g.cout));
  parse_window(g, para, kNDCHW, /*five_strides=*/false);
  p.group = resolve_groups(g, filter_size[2], para, std::nullopt);
  const bool cin_from_gd = !para.groups && para.group_dict && para.group_dict->count("cin_ori");
  user_check(g.cin1() == x_shape[2], "E60010", cin_from_gd ? "group_dict['cin_ori']" : "x",
             "C1 " + std::to_string(x_shape[2]) + " of x does not hold Cin = filter C " +
                 std::to_string(filter_size[2]) + " * groups " + std::to_string(g.groups) + " = " +
                 std::to_string(g.cin) + " channels (needs C1 " + std::to_string(g.cin1()) + ")");
  user_check(g.cout1() == dy_shape[2], "E62504", "out_backprop",
             "C1 " + std::to_string(dy_shape[2]) + " does not hold Cout " +
                 std::to_string(g.cout) + " of filter_size (needs C1 " +
                 std::to_string(g.cout1()) + ")");
  validate(p);
  return p;
}

Problem make_backprop_input_problem(const std::vector<int64_t>& filter_shape, DType filter_dtype,
                                    const std::vector<int64_t>& dy_shape, DType dy_dtype,
                                    const std::vector<int64_t>& filter_size,
                                    const std::vector<int64_t>& input_size, const ParaDict& para,
                                    const std::vector<int64_t>& bias_shape, DType bias_dtype) {
  Problem p;
  p.op = OpKind::kBackpropInput;
  p.kernel_name = para.kernel_name;
  check_len(filter_shape, 4, "filter");
  check_positive(filter_shape, "filter");
  user_check(filter_shape[2] == kC0 && filter_shape[3] == kC0, "E62511", "filter",
             "FRACTAL_Z_3D shape " + list_str(filter_shape) + " must end in (16, 16)");
  check_6hd(dy_shape, "out_backprop");
  check_dtypes(filter_dtype, dy_dtype, "filter", "out_backprop");
  p.in_dtype = filter_dtype;
  p.res_dtype = parse_dtype(para.res_dtype.value_or("float16"), "res_dtype");
  check_len(filter_size, 5, "filter_size");
  check_positive(filter_size, "filter_size");
  check_len(input_size, 5, "input_size");
  check_positive(input_size, "input_size");

  ConvGeometry& g = p.geo;
  user_check(input_size[0] == dy_shape[0], "E62503", "out_backprop",
             "batch " + std::to_string(dy_shape[0]) + " differs from input_size's batch " +
                 std::to_string(input_size[0]));
  g.n = input_size[0];
  g.in = {input_size[1], input_size[2], input_size[3]};
  g.out = {dy_shape[1], dy_shape[3], dy_shape[4]};
  g.kernel = {filter_size[2], filter_size[3], filter_size[4]};
  g.cout = filter_size[0];
  parse_window(g, para, kNDHWC, /*five_strides=*/true);
  p.group = resolve_groups(g, filter_size[1], para, input_size[4]);
  user_check(g.cout1() == dy_shape[2], "E62504", "out_backprop",
             "C1 " + std::to_string(dy_shape[2]) + " does not hold Cout " +
                 std::to_string(g.cout) + " of filter_size (needs C1 " +
                 std::to_string(g.cout1()) + ")");
  user_check(filter_shape == p.filter_shape(), "E60010", "filter",
             "FRACTAL_Z_3D shape " + list_str(filter_shape) + " does not match filter_size " +
                 list_str(filter_size) + " with groups " + std::to_string(g.groups) + ", which needs " +
                 list_str(p.filter_shape()));
  if (!bias_shape.empty()) {
    user_check(bias_shape.size() == 1 && bias_shape[0] == g.cin, "", "tensor_bias",
               "shape " + list_str(bias_shape) + " must be [Cin] = [" + std::to_string(g.cin) + "]");
    user_check(bias_dtype == DType::kFloat32 || bias_dtype == filter_dtype, "", "tensor_bias",
               std::string("dtype ") + dtype_name(bias_dtype) + " must be float32 or " +
                   dtype_name(filter_dtype));
    p.has_bias = true;
    p.bias_dtype = bias_dtype;
  }
  validate(p);
  return p;
}

Problem make_forward_problem(const ConvGeometry& geo, DType in_dtype, DType res_dtype,
                             const std::string& kernel_name) {
  Problem p;
  p.op = OpKind::kForward;
  p.geo = geo;
  p.in_dtype = in_dtype;
  p.res_dtype = res_dtype;
  p.kernel_name = kernel_name;
  check_geometry(geo);
  derive_group_dict(geo.cin, geo.cout, geo.groups);  // E60038, in the conv's own Cin/Cout terms
  // The filter is the FRACTAL_Z_3D of the per-group transposed weight [Cin, Cout/groups, K...]:
  // packed as a conv whose input channels are our Cout and output channels our Cin.
  p.group = derive_group_dict(geo.cout, geo.cin, geo.groups);
  validate(p);
  return p;
}

void validate(const Problem& p) {
  const ConvGeometry& g = p.geo;
  check_geometry(g);
  check_spatial(g, p.op == OpKind::kForward);
  GroupDict want = derive_group_dict(g.cin, g.cout, g.groups);
  if (p.op == OpKind::kForward) want = derive_group_dict(g.cout, g.cin, g.groups);
  internal_check(want == p.group, "group_dict out of sync with the geometry");
  for (const auto& s : p.input_shapes()) check_bytes(s, DType::kFloat32, "shape");
  check_bytes(p.output_shape(), DType::kFloat32, "shape");
  // Kernel-internal staging holds the padded input in fp32.
  check_bytes({g.n, g.in[0] + g.pads[0] + g.pads[1], g.cin1(), g.in[1] + g.pads[2] + g.pads[3],
               g.in[2] + g.pads[4] + g.pads[5], kC0},
              DType::kFloat32, "pads");
}

}  // namespace tbex
