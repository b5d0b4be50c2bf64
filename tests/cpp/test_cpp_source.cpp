// C++ source kernels (tbex::codegen::emit_cpp_source): for dW and dX, fp32 / fp16 / bf16,
// grouped and not, the emitted C++ must build with g++ and with clang++ at -O3 -march=native
// -Wall -Wextra -Werror with no include path (only its own files), link with a standalone
// Halide runtime into a shared object, run, and match the float64 reference. fp16 kernels are
// also built without F16C, which runs the prelude's portable scalar conversions.
//
// Inputs are multiples of 1/8 (exact in every dtype, exact fp32 sums here), so a correct kernel
// matches the reference to the last bit; the checks allow 1e-6 relative as the other kernel tests.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "HalideRuntime.h"
#include "codegen/cpp_source.h"
#include "lower/pipeline.h"
#include "reference.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

namespace fs = std::filesystem;
using test::count;
using test::encode;
using test::expect_close;
using test::random_eighths;

struct Build {
  const char* cxx;
  const char* flags;
};
const char* const kFlags = "-std=c++17 -O3 -march=native -Wall -Wextra -Werror";
const Build kBuilds[] = {{TBEX_TEST_GXX, kFlags}, {TBEX_TEST_CLANGXX, kFlags}};
/** fp16 kernels also build without F16C: the prelude's portable scalar conversions (vectors of 16
 * still convert with AVX-512F; the kernel's vectors are AVX-512 wide, so the ISA must stay). */
const Build kPortable{TBEX_TEST_GXX, "-std=c++17 -O3 -march=native -mno-f16c -Wall -Wextra -Werror"};

struct Case {
  const char* name;
  OpKind op;
  DType dtype;
  const char* schedule;
  int64_t n, cin, cout, groups;
  std::array<int64_t, 3> in, k, s;
  std::array<int64_t, 6> pads;
  bool f16_result = false;  ///< dX with TBE's default float16 result (fp32 -> fp16 vectors)
};

const Case kCases[] = {
    {"dw_plain_f32", OpKind::kBackpropFilter, DType::kFloat32, "dw_tiled", 2, 16, 32, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"dw_plain_f16", OpKind::kBackpropFilter, DType::kFloat16, "dw_tiled", 2, 16, 32, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"dw_plain_bf16", OpKind::kBackpropFilter, DType::kBFloat16, "dw_tiled", 2, 16, 32, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
    {"dw_grouped_f32", OpKind::kBackpropFilter, DType::kFloat32, "auto", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 2, 1}, {0, 0, 1, 1, 0, 1}},
    {"dw_grouped_f16", OpKind::kBackpropFilter, DType::kFloat16, "auto", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 2, 1}, {0, 0, 1, 1, 0, 1}},
    {"dw_grouped_bf16", OpKind::kBackpropFilter, DType::kBFloat16, "auto", 1, 20, 56, 4, {4, 5, 6}, {1, 3, 2}, {1, 2, 1}, {0, 0, 1, 1, 0, 1}},
    {"dx_strided_f32", OpKind::kBackpropInput, DType::kFloat32, "auto", 2, 16, 32, 1, {7, 9, 11}, {3, 3, 3}, {2, 2, 3}, {1, 0, 1, 1, 0, 2}},
    {"dx_strided_f16", OpKind::kBackpropInput, DType::kFloat16, "auto", 2, 16, 32, 1, {7, 9, 11}, {3, 3, 3}, {2, 2, 3}, {1, 0, 1, 1, 0, 2}},
    {"dx_strided_bf16", OpKind::kBackpropInput, DType::kBFloat16, "auto", 2, 16, 32, 1, {7, 9, 11}, {3, 3, 3}, {2, 2, 3}, {1, 0, 1, 1, 0, 2}},
    {"dx_grouped_f32", OpKind::kBackpropInput, DType::kFloat32, "auto", 1, 48, 48, 6, {3, 4, 5}, {2, 2, 2}, {1, 1, 1}, {1, 0, 0, 1, 1, 0}},
    {"dx_grouped_f16", OpKind::kBackpropInput, DType::kFloat16, "auto", 1, 48, 48, 6, {3, 4, 5}, {2, 2, 2}, {1, 1, 1}, {1, 0, 0, 1, 1, 0}},
    {"dx_grouped_bf16", OpKind::kBackpropInput, DType::kBFloat16, "auto", 1, 48, 48, 6, {3, 4, 5}, {2, 2, 2}, {1, 1, 1}, {1, 0, 0, 1, 1, 0}},
    {"dx_f16_in_f16_out", OpKind::kBackpropInput, DType::kFloat16, "auto", 1, 32, 16, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, true},
};

ConvGeometry geometry(const Case& c) {
  ConvGeometry g;
  g.n = c.n, g.cin = c.cin, g.cout = c.cout, g.groups = c.groups;
  g.in = c.in, g.kernel = c.k, g.stride = c.s, g.pads = c.pads;
  for (int i = 0; i < 3; ++i)
    g.out[i] = (c.in[i] + c.pads[2 * i] + c.pads[2 * i + 1] - c.k[i]) / c.s[i] + 1;
  return g;
}

Problem problem(const Case& c) {
  const ConvGeometry g = geometry(c);
  const Dims5 xd{g.n, g.cin, g.in[0], g.in[1], g.in[2]}, yd{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  const Dims5 wd{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  ParaDict para;
  para.pads = std::vector<int64_t>(c.pads.begin(), c.pads.end());
  para.groups = c.groups;
  if (c.op == OpKind::kBackpropFilter) {
    para.strides = std::vector<int64_t>{c.s[0], c.s[1], c.s[2]};
    return make_backprop_filter_problem(shape_6hd(xd), c.dtype, shape_6hd(yd), c.dtype,
                                        {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]}, para);
  }
  para.strides = std::vector<int64_t>{1, c.s[0], c.s[1], c.s[2], 1};
  if (!c.f16_result) para.res_dtype = "float32";
  return make_backprop_input_problem(shape_fz3d(wd, c.groups), c.dtype, shape_6hd(yd), c.dtype,
                                     {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                     {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para);
}

/** A scratch directory with the standalone Halide runtime object, shared by the tests of one
 * process and removed at its exit. */
struct WorkDir {
  fs::path path = fs::temp_directory_path() / ("tbex_cpp_source_" + std::to_string(getpid()));
  WorkDir() {
    fs::create_directories(path);
    Halide::compile_standalone_runtime((path / "halide_runtime.o").string(), lower::host_target());
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& work_dir() {
  static const WorkDir dir;
  return dir.path;
}

std::string run_command(const std::string& cmd) {
  const fs::path log = work_dir() / "cmd.log";
  const int rc = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  std::ifstream f(log);
  std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return rc == 0 ? "" : "`" + cmd + "` failed:\n" + out;
}

halide_type_t buffer_type(DType t) {
  return t == DType::kFloat32   ? halide_type_t(halide_type_float, 32)
         : t == DType::kFloat16 ? halide_type_t(halide_type_float, 16)
                                : halide_type_t(halide_type_uint, 16);
}

/** A dense halide_buffer_t over `data` with `shape` outermost first. */
struct Buffer {
  std::vector<halide_dimension_t> dims;
  halide_buffer_t buf{};
  Buffer(void* data, const std::vector<int64_t>& shape, DType t) {
    int32_t stride = 1;
    for (int i = (int)shape.size() - 1; i >= 0; --i) {
      dims.push_back(halide_dimension_t(0, (int32_t)shape[i], stride));
      stride *= (int32_t)shape[i];
    }
    buf.host = static_cast<uint8_t*>(data);
    buf.type = buffer_type(t);
    buf.dimensions = (int)dims.size();
    buf.dim = dims.data();
  }
};

/** Builds `src` into a shared object, loads it and runs its NAME_argv. */
void build_and_run(const Build& b, int index, const std::string& src, const std::string& name,
                   std::vector<halide_buffer_t*> args) {
  const std::string so = (work_dir() / (name + "_" + std::to_string(index) + ".so")).string();
  const std::string err = run_command(std::string(b.cxx) + " " + b.flags + " -fPIC -shared -Wl,-Bsymbolic " + src + " " + (work_dir() / "halide_runtime.o").string() + " -o " + so + " -lpthread");
  ASSERT_EQ(err, "");
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto fn = reinterpret_cast<int (*)(void**)>(dlsym(lib, (name + "_argv").c_str()));
  ASSERT_NE(fn, nullptr) << dlerror();
  EXPECT_EQ(fn(reinterpret_cast<void**>(args.data())), 0);
  dlclose(lib);
}

class CppSourceTest : public ::testing::TestWithParam<int> {};

TEST_P(CppSourceTest, BuildsWarningFreeAndMatchesReference) {
  const Case& c = kCases[GetParam()];
  const ConvGeometry g = geometry(c);
  const Problem p = problem(c);
  const Halide::Target t = codegen::cpp_source_target(lower::host_target());
  const lower::Lowered l = lower::lower(p, lower::select(p, {c.schedule, ""}, 2, t), 2, t);
  const std::string name = std::string("tbex_") + c.name;
  const auto files = codegen::emit_cpp_source(l, name, lower::host_target(), work_dir().string());
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) ASSERT_TRUE(fs::exists(f)) << f;

  const Dims5 xd{g.n, g.cin, g.in[0], g.in[1], g.in[2]}, yd{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  const Dims5 wd{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  const size_t es = dtype_size(c.dtype);
  const bool dw = c.op == OpKind::kBackpropFilter;
  auto a = random_eighths(count({(dw ? xd : wd).begin(), (dw ? xd : wd).end()}), 1 + GetParam());
  auto dy = random_eighths(count({yd.begin(), yd.end()}), 100 + GetParam());
  auto ab = encode(a, c.dtype), yb = encode(dy, c.dtype);
  std::vector<uint8_t> a_packed(count(p.input_shapes()[0]) * es), y6(count(shape_6hd(yd)) * es);
  if (dw) ncdhw_to_6hd(ab.data(), a_packed.data(), xd, es);
  else oidhw_to_fz3d(ab.data(), a_packed.data(), wd, c.groups, es);
  ncdhw_to_6hd(yb.data(), y6.data(), yd, es);
  // The kernel's output view: dW 7-D (real_g, Kd, cin1_g, Kh, Kw, cout_g, 16), dX 6HD.
  const std::vector<int64_t> out_shape =
      dw ? std::vector<int64_t>{p.group.real_g, g.kernel[0], p.group.cin1_g, g.kernel[1], g.kernel[2], p.group.cout_g, kC0}
         : p.x_shape();
  const size_t out_es = dtype_size(p.res_dtype);
  const auto ref = dw ? test::ref_dw(g, a, dy) : test::ref_dx(g, a, dy);

  std::vector<Build> builds(std::begin(kBuilds), std::end(kBuilds));
  if (c.dtype == DType::kFloat16) builds.push_back(kPortable);
  for (size_t bi = 0; bi < builds.size(); ++bi) {
    SCOPED_TRACE(std::string(builds[bi].cxx) + " " + builds[bi].flags);
    std::vector<uint8_t> out(count(out_shape) * out_es, 0xA5);
    Buffer b0(a_packed.data(), p.input_shapes()[0], c.dtype), b1(y6.data(), p.input_shapes()[1], c.dtype),
        bo(out.data(), out_shape, p.res_dtype);
    build_and_run(builds[bi], (int)bi, files[0], name, {&b0.buf, &b1.buf, &bo.buf});
    if (HasFatalFailure()) return;
    std::vector<uint8_t> unpacked(ref.size() * out_es);
    if (dw) oidhw_from_fz3d(out.data(), unpacked.data(), wd, c.groups, out_es);
    else ncdhw_from_6hd(out.data(), unpacked.data(), xd, out_es);
    const auto got = test::decode(unpacked, p.res_dtype);
    if (c.f16_result) {  // one rounding of the exact sum
      int mismatches = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        mismatches += float_to_half((float)ref[i]) != float_to_half((float)got[i]);
      EXPECT_EQ(mismatches, 0);
    } else {
      expect_close(got, ref, 1e-6);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CppSourceTest,
                         ::testing::Range(0, (int)(sizeof(kCases) / sizeof(kCases[0]))),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kCases[info.param].name);
                         });

}  // namespace
}  // namespace tbex
