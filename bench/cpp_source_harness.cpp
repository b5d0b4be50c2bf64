/** Times a C++-source kernel against the LLVM-compiled kernel of the same schedule, on the same
 * random inputs, and checks that their outputs are bit-identical.
 *
 * Built by bench_cpp_source.py with the compiler under test:
 *   CXX -O3 -march=native -DKERNEL=NAME cpp_source_harness.cpp NAME.cpp NAME_llvm.o
 *       halide_runtime.o -lpthread -ldl
 * Run: harness NAME.shapes [seconds]; prints one JSON line. Both kernels run on Halide's thread
 * pool (HL_NUM_THREADS). */
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <immintrin.h>

#include "HalideRuntime.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
extern "C" int CAT(KERNEL, _argv)(void** args);
extern "C" int CAT(KERNEL, _llvm_argv)(void** args);

namespace {

struct Operand {
  std::string dtype;
  std::vector<int64_t> shape;  // outermost first
  std::vector<uint8_t> data;
  std::vector<halide_dimension_t> dims;
  halide_buffer_t buf{};
};

/** Uniform values in [-1, 1) rounded to the operand's dtype (not exact sums: any difference in
 * how the two builds round or fuse a*b + c shows). */
void fill(Operand& o, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const size_t es = o.dtype == "f32" ? 4 : 2;
  for (size_t i = 0; i < o.data.size() / es; ++i) {
    const float f = d(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (es == 4) {
      std::memcpy(&o.data[i * 4], &u, 4);
      continue;
    }
    const uint16_t h = o.dtype == "f16" ? _cvtss_sh(f, 0) : (uint16_t)(u >> 16);  // bf16: truncated
    std::memcpy(&o.data[i * 2], &h, 2);
  }
}

void setup(Operand& o) {
  const size_t es = o.dtype == "f32" ? 4 : 2;
  int64_t n = 1, stride = 1;
  for (auto s : o.shape) n *= s;
  o.data.assign(n * es, 0);
  for (int i = (int)o.shape.size() - 1; i >= 0; --i) {
    o.dims.push_back(halide_dimension_t(0, (int32_t)o.shape[i], (int32_t)stride));
    stride *= o.shape[i];
  }
  o.buf.host = o.data.data();
  o.buf.type = o.dtype == "f32"   ? halide_type_t(halide_type_float, 32)
               : o.dtype == "f16" ? halide_type_t(halide_type_float, 16)
                                  : halide_type_t(halide_type_uint, 16);
  o.buf.dimensions = (int)o.dims.size();
  o.buf.dim = o.dims.data();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s NAME.shapes [seconds]\n", argv[0]);
    return 2;
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  std::vector<Operand> ops;
  std::ifstream in(argv[1]);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    Operand o;
    ls >> o.dtype;
    for (int64_t v; ls >> v;) o.shape.push_back(v);
    ops.push_back(std::move(o));
  }
  std::mt19937 rng(42);
  for (auto& o : ops) setup(o), fill(o, rng);
  Operand ref = ops.back();  // the LLVM kernel's output
  ref.buf.host = ref.data.data();
  ref.buf.dim = ref.dims.data();
  std::vector<void*> a_cpp, a_llvm;
  for (size_t i = 0; i + 1 < ops.size(); ++i) a_cpp.push_back(&ops[i].buf), a_llvm.push_back(&ops[i].buf);
  a_cpp.push_back(&ops.back().buf);
  a_llvm.push_back(&ref.buf);

  using Clock = std::chrono::steady_clock;
  auto time_one = [](int (*f)(void**), std::vector<void*>& args) {
    auto t0 = Clock::now();
    if (f(args.data()) != 0) std::exit(1);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  double t_cpp = time_one(CAT(KERNEL, _argv), a_cpp), t_llvm = time_one(CAT(KERNEL, _llvm_argv), a_llvm);
  const bool same = ops.back().data == ref.data;
  double max_diff = 0;
  if (!same && ref.dtype == "f32")
    for (size_t i = 0; i < ref.data.size() / 4; ++i) {
      float x, y;
      std::memcpy(&x, &ops.back().data[i * 4], 4);
      std::memcpy(&y, &ref.data[i * 4], 4);
      max_diff = std::max(max_diff, (double)std::fabs(x - y));
    }
  // Alternate the two so both see the same machine load.
  const int reps = std::max(3, std::min(200, (int)(seconds * 1e3 / std::max(t_cpp + t_llvm, 1e-3))));
  std::vector<double> cpp, llvm;
  for (int i = 0; i < reps; ++i) {
    cpp.push_back(time_one(CAT(KERNEL, _argv), a_cpp));
    llvm.push_back(time_one(CAT(KERNEL, _llvm_argv), a_llvm));
  }
  std::printf("{\"cpp_ms\": %.4f, \"llvm_ms\": %.4f, \"cpp_min_ms\": %.4f, \"llvm_min_ms\": %.4f, "
              "\"reps\": %d, \"bit_identical\": %s, \"max_abs_diff\": %g}\n",
              median(cpp), median(llvm), *std::min_element(cpp.begin(), cpp.end()),
              *std::min_element(llvm.begin(), llvm.end()), reps, same ? "true" : "false", max_diff);
  return 0;
}
