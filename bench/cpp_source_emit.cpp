/** Writes one kernel twice for bench_cpp_source.py: as C++ source (tbex::codegen::emit_cpp_source)
 * and as an LLVM-compiled object of the same schedule, plus a standalone Halide runtime object
 * and the operand shapes, so one harness can time both on the same inputs.
 *
 *   cpp_source_emit op=dw|dx|fwd dtype=f32|f16|bf16 N= Cin= Cout= groups= D= H= W= Kd= Kh= Kw=
 *                   sd= sh= sw= pads=f,b,t,bo,l,r threads= dir=DIR name=NAME
 *                   [schedule=auto|NAME]
 * writes DIR/NAME.cpp, DIR/NAME.h, DIR/NAME_llvm.o, DIR/NAME_llvm.h, DIR/NAME.shapes (one line
 * per operand, output last: "<dtype> <dims outermost first>") and DIR/halide_runtime.o. */
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "codegen/cpp_source.h"
#include "lower/pipeline.h"
#include "tbex/tbex.h"

using namespace tbex;

namespace {

std::vector<int64_t> ints(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(std::stoll(t));
  return v;
}

DType dtype_of(const std::string& s) {
  return s == "f16" ? DType::kFloat16 : s == "bf16" ? DType::kBFloat16 : DType::kFloat32;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a{{"op", "dw"}, {"dtype", "f32"}, {"N", "1"}, {"Cin", "32"},
                                       {"Cout", "32"}, {"groups", "1"}, {"D", "32"}, {"H", "32"},
                                       {"W", "32"}, {"Kd", "3"}, {"Kh", "3"}, {"Kw", "3"},
                                       {"sd", "1"}, {"sh", "1"}, {"sw", "1"},
                                       {"pads", "1,1,1,1,1,1"}, {"threads", "2"},
                                       {"dir", "."}, {"name", "kernel"}, {"schedule", "auto"}};
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto eq = s.find('=');
    if (eq == std::string::npos || !a.count(s.substr(0, eq))) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
    a[s.substr(0, eq)] = s.substr(eq + 1);
  }
  auto I = [&](const char* k) { return std::stoll(a[k]); };
  ConvGeometry g;
  g.n = I("N"), g.cin = I("Cin"), g.cout = I("Cout"), g.groups = I("groups");
  g.in = {I("D"), I("H"), I("W")};
  g.kernel = {I("Kd"), I("Kh"), I("Kw")};
  g.stride = {I("sd"), I("sh"), I("sw")};
  auto pads = ints(a["pads"]);
  for (int i = 0; i < 6; ++i) g.pads[i] = pads.at(i);
  for (int i = 0; i < 3; ++i)
    g.out[i] = (g.in[i] + g.pads[2 * i] + g.pads[2 * i + 1] - g.kernel[i]) / g.stride[i] + 1;
  const DType dt = dtype_of(a["dtype"]);
  const Dims5 xd{g.n, g.cin, g.in[0], g.in[1], g.in[2]}, yd{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  const Dims5 wd{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  ParaDict para;
  para.pads = std::vector<int64_t>(g.pads.begin(), g.pads.end());
  para.groups = g.groups;
  Problem p;
  std::vector<int64_t> out_shape;
  if (a["op"] == "dw") {
    para.strides = std::vector<int64_t>{g.stride[0], g.stride[1], g.stride[2]};
    p = make_backprop_filter_problem(shape_6hd(xd), dt, shape_6hd(yd), dt,
                                     {g.cout, g.kernel[0], g.cin_pg(), g.kernel[1], g.kernel[2]}, para);
    out_shape = {p.group.real_g, g.kernel[0], p.group.cin1_g, g.kernel[1], g.kernel[2],
                 p.group.cout_g, kC0};
  } else if (a["op"] == "fwd") {
    p = make_forward_problem(g, dt, DType::kFloat32);
    out_shape = p.dy_shape();
  } else {
    para.strides = std::vector<int64_t>{1, g.stride[0], g.stride[1], g.stride[2], 1};
    para.res_dtype = "float32";
    p = make_backprop_input_problem(shape_fz3d(wd, g.groups), dt, shape_6hd(yd), dt,
                                    {g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]},
                                    {g.n, g.in[0], g.in[1], g.in[2], g.cin}, para);
    out_shape = p.x_shape();
  }
  const std::string dir = a["dir"], name = a["name"];
  // The schedule the C++ source can express (no bf16 dot products); the LLVM object is the same.
  const Halide::Target t = codegen::cpp_source_target(lower::host_target());
  const int threads = (int)I("threads");
  lower::Lowered l = lower::lower(p, lower::select(p, {a["schedule"], ""}, threads, t), threads, t);
  codegen::emit_cpp_source(l, name, t, dir);
  l.pipeline.compile_to({{Halide::OutputFileType::object, dir + "/" + name + "_llvm.o"},
                         {Halide::OutputFileType::c_header, dir + "/" + name + "_llvm.h"}},
                        l.args, name + "_llvm", t.with_feature(Halide::Target::NoRuntime));
  Halide::compile_standalone_runtime(dir + "/halide_runtime.o", t);
  std::ofstream shapes(dir + "/" + name + ".shapes");
  auto line = [&](DType d, const std::vector<int64_t>& s) {
    shapes << (d == DType::kFloat16 ? "f16" : d == DType::kBFloat16 ? "bf16" : "f32");
    for (auto v : s) shapes << ' ' << v;
    shapes << '\n';
  };
  const auto in_shapes = p.input_shapes();
  for (size_t i = 0; i < in_shapes.size(); ++i) line(p.input_dtypes()[i], in_shapes[i]);
  line(p.res_dtype, out_shape);
  std::printf("%s %s: %s\n", name.c_str(), l.schedule.c_str(), l.schedule_detail.c_str());
  return 0;
}
