/** NAME.manifest.json: what a kernel is (op, problem, operands, groups, schedule) and what built
 * it (target, tbex / Halide / LLVM versions), for tools that pick or audit AOT kernels. */
#include "Halide.h"
#include "codegen/aot_files.h"
#include "support/json.h"
#include "tbex/version.h"

namespace tbex::codegen {
namespace {

json::Value operand(const std::string& name, const std::vector<int64_t>& shape, DType t,
                    const std::string& layout) {
  return {{"name", name}, {"shape", shape}, {"dtype", dtype_name(t)}, {"layout", layout}};
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
  json::Value m;
  m["name"] = info.name;
  if (!p) {
    m["op"] = "halide_runtime";
  } else {
    const ConvGeometry& g = p->geo;
    m["op"] = op_name(p->op);
    m["problem"] = p->canonical();
    m["kernel_name"] = p->kernel_name;
    const auto shapes = p->input_shapes();
    const auto dtypes = p->input_dtypes();
    const auto names = p->input_names();
    json::Value inputs = json::Value::array();
    for (size_t i = 0; i < shapes.size(); ++i)
      inputs.push_back(operand(names[i], shapes[i], dtypes[i], layout_of(*p, names[i])));
    m["inputs"] = inputs;
    m["output"] = operand("out", p->output_shape(), p->res_dtype, layout_of(*p, "out"));
    m["kernel_output_extents"] = kernel_output_extents(*p);
    m["group_dict"] = {{"real_g", p->group.real_g},   {"mag_factor", p->group.mag_factor},
                       {"cin1_g", p->group.cin1_g},   {"cout_g", p->group.cout_g},
                       {"cin_ori", p->group.cin_ori}, {"cout_ori", p->group.cout_ori}};
    m["geometry"] = {{"N", g.n},
                     {"Cin", g.cin},
                     {"Cout", g.cout},
                     {"groups", g.groups},
                     {"in_dhw", g.in},
                     {"out_dhw", g.out},
                     {"kernel_dhw", g.kernel},
                     {"strides_dhw", g.stride},
                     {"dilations_dhw", g.dilation},
                     {"pads", g.pads}};
    m["schedule"] = info.schedule;
    m["variant"] = info.variant;
    m["selected_by"] = info.selected_by;
    m["schedule_detail"] = info.schedule_detail;
    m["threads_planned"] = info.threads;
  }
  m["target"] = info.target;
  m["tbex_version"] = TBEX_VERSION_STRING;
  m["halide_version"] = std::to_string(HALIDE_VERSION_MAJOR) + "." +
                        std::to_string(HALIDE_VERSION_MINOR) + "." +
                        std::to_string(HALIDE_VERSION_PATCH);
  m["llvm_version"] = llvm_version();
  m["files"] = info.files;
  return json::to_text(m);
}

}  // namespace tbex::codegen
