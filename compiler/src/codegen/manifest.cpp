/** NAME.manifest.json: what a kernel is (op, problem, operands, groups, schedule) and what built
 * it (target, tbex / Halide / LLVM versions), for tools that pick or audit AOT kernels. */
#include <sstream>

#include "Halide.h"
#include "codegen/aot_files.h"

#ifndef TBEX_VERSION
#error "TBEX_VERSION is defined by CMake (project version)"
#endif

namespace tbex::codegen {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if ((unsigned char)c < 0x20) out += ' ';
    else out += c;
  }
  return out + "\"";
}

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

template <size_t N>
std::string ints(const std::array<int64_t, N>& a) {
  return ints(std::vector<int64_t>(a.begin(), a.end()));
}

std::string strings(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + quote(v[i]);
  return s + "]";
}

std::string operand(const std::string& name, const std::vector<int64_t>& shape, DType t,
                    const std::string& layout) {
  return "{\"name\": " + quote(name) + ", \"shape\": " + ints(shape) + ", \"dtype\": " +
         quote(dtype_name(t)) + ", \"layout\": " + quote(layout) + "}";
}

std::string layout_of(const Problem& p, const std::string& name) {
  if (name == "filter") return "FRACTAL_Z_3D";
  if (name == "tensor_bias") return "ND";
  if (name == "out" && p.op == OpKind::kBackpropFilter) return "FRACTAL_Z_3D (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16)";
  if (name == "out" && p.op == OpKind::kBackpropInput) return "NDC1HWC0 (N, D, C1, H*W, 16)";
  return "NDC1HWC0";
}

/** "20.1" from Halide's LLVM_VERSION (major * 10 + minor): the LLVM libHalide was built with. */
std::string llvm_version() {
  const int v = Halide::Internal::get_llvm_version();
  return std::to_string(v / 10) + "." + std::to_string(v % 10);
}

}  // namespace

std::string aot_manifest(const Problem* p, const AotBuildInfo& info) {
  std::ostringstream o;
  o << "{\n  \"name\": " << quote(info.name) << ",\n";
  if (!p) {
    o << "  \"op\": \"halide_runtime\",\n";
  } else {
    const ConvGeometry& g = p->geo;
    o << "  \"op\": " << quote(op_name(p->op)) << ",\n"
      << "  \"problem\": " << quote(p->canonical()) << ",\n"
      << "  \"kernel_name\": " << quote(p->kernel_name) << ",\n"
      << "  \"inputs\": [\n";
    const auto shapes = p->input_shapes();
    const auto dtypes = p->input_dtypes();
    const auto names = p->input_names();
    for (size_t i = 0; i < shapes.size(); ++i)
      o << "    " << operand(names[i], shapes[i], dtypes[i], layout_of(*p, names[i]))
        << (i + 1 < shapes.size() ? "," : "") << "\n";
    o << "  ],\n  \"output\": " << operand("out", p->output_shape(), p->res_dtype, layout_of(*p, "out"))
      << ",\n  \"kernel_output_extents\": " << ints(kernel_output_extents(*p)) << ",\n"
      << "  \"group_dict\": {\"real_g\": " << p->group.real_g << ", \"mag_factor\": " << p->group.mag_factor
      << ", \"cin1_g\": " << p->group.cin1_g << ", \"cout_g\": " << p->group.cout_g
      << ", \"cin_ori\": " << p->group.cin_ori << ", \"cout_ori\": " << p->group.cout_ori << "},\n"
      << "  \"geometry\": {\"N\": " << g.n << ", \"Cin\": " << g.cin << ", \"Cout\": " << g.cout
      << ", \"groups\": " << g.groups << ", \"in_dhw\": " << ints(g.in) << ", \"out_dhw\": " << ints(g.out)
      << ", \"kernel_dhw\": " << ints(g.kernel) << ", \"strides_dhw\": " << ints(g.stride)
      << ", \"dilations_dhw\": " << ints(g.dilation) << ", \"pads\": " << ints(g.pads) << "},\n"
      << "  \"schedule\": " << quote(info.schedule) << ",\n"
      << "  \"variant\": " << quote(info.variant) << ",\n"
      << "  \"selected_by\": " << quote(info.selected_by) << ",\n"
      << "  \"schedule_detail\": " << quote(info.schedule_detail) << ",\n"
      << "  \"threads_planned\": " << info.threads << ",\n";
  }
  o << "  \"target\": " << quote(info.target) << ",\n"
    << "  \"tbex_version\": " << quote(TBEX_VERSION) << ",\n"
    << "  \"halide_version\": \"" << HALIDE_VERSION_MAJOR << "." << HALIDE_VERSION_MINOR << "."
    << HALIDE_VERSION_PATCH << "\",\n"
    << "  \"llvm_version\": " << quote(llvm_version()) << ",\n"
    << "  \"files\": " << strings(info.files) << "\n}\n";
  return o.str();
}

}  // namespace tbex::codegen
