// A program built against one tbexc kernel only (NAME.h + NAME.a + a Halide runtime + tbex's
// runtime), with no compiler, Halide or LLVM: runs the kernel on exact data and compares it with
// the float64 reference. Built by aot_case.cmake with g++ and with clang++.
//   -DTBEX_AOT_NAME=<name> -DTBEX_AOT_HEADER='"<name>.h"'
// `aot_consumer`            correctness (exit 0 and "AOT OK" when the kernel matches)
// `aot_consumer threads`    parallel loops run on tbex's pool: 1 thread -> one OS thread,
//                           2 -> two; prints the time per call at 1 and 2 threads
#include TBEX_AOT_HEADER

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "reference.h"
#include "tbex/aot_runtime.h"
#include "tbex/dtype.h"
#include "tbex/layout.h"
#include "tbex/scratch.h"

#define TBEX_CAT2(a, b) a##b
#define TBEX_CAT(a, b) TBEX_CAT2(a, b)
#define K(suffix) TBEX_CAT(TBEX_AOT_NAME, suffix)

extern "C" {
typedef int (*task_t)(void*, int, uint8_t*);
typedef int (*par_for_t)(void*, task_t, int, int, uint8_t*);
par_for_t halide_set_custom_do_par_for(par_for_t);
void* halide_malloc(void* user_context, size_t bytes);
void halide_free(void* user_context, void* ptr);
}

namespace {

using tbex::DType;

int g_failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++g_failures;
  }
}

DType dtype_of(const char* s) { return tbex::parse_dtype(s, "dtype"); }

std::vector<double> eighths(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng) / 8.0;
  return v;
}

std::vector<uint8_t> encode(const std::vector<double>& v, DType t) {
  std::vector<uint8_t> out(v.size() * tbex::dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) {
      float f = (float)v[i];
      std::memcpy(&out[i * 4], &f, 4);
    } else {
      uint16_t h = t == DType::kFloat16 ? tbex::float_to_half((float)v[i]) : tbex::float_to_bf16((float)v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

std::vector<double> decode(const std::vector<uint8_t>& b, DType t) {
  std::vector<double> v(b.size() / tbex::dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) {
      float f;
      std::memcpy(&f, &b[i * 4], 4);
      v[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      v[i] = t == DType::kFloat16 ? tbex::half_to_float(h) : tbex::bf16_to_float(h);
    }
  }
  return v;
}

tbex::ConvGeometry geometry() {
  tbex::ConvGeometry g;
  g.n = K(_N);
  g.cin = K(_CIN);
  g.cout = K(_COUT);
  g.groups = K(_GROUPS);
  const int64_t in[] = K(_IN_DHW), out[] = K(_OUT_DHW), k[] = K(_KERNEL_DHW), s[] = K(_STRIDES_DHW),
                dil[] = K(_DILATIONS_DHW), pads[] = K(_PADS);
  for (int i = 0; i < 3; ++i) {
    g.in[i] = in[i], g.out[i] = out[i], g.kernel[i] = k[i], g.stride[i] = s[i], g.dilation[i] = dil[i];
    g.pads[2 * i] = pads[2 * i], g.pads[2 * i + 1] = pads[2 * i + 1];
  }
  return g;
}

struct Inputs {
  std::vector<std::vector<uint8_t>> packed;  // in call order
  std::vector<double> ref;                   // expected output, NCDHW / OIDHW
};

/** Exact data for the kernel's operands and the float64 expected result. */
Inputs make_inputs(const tbex::ConvGeometry& g) {
  const bool dw = std::strcmp(K(_IN0_NAME), "x") == 0;
  const DType in_t = dtype_of(K(_IN0_DTYPE));
  const size_t es = tbex::dtype_size(in_t);
  const tbex::Dims5 xd{g.n, g.cin, g.in[0], g.in[1], g.in[2]}, yd{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  const tbex::Dims5 wd{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  auto numel = [](const tbex::Dims5& d) { return (size_t)(d[0] * d[1] * d[2] * d[3] * d[4]); };
  Inputs r;
  auto dy = eighths(numel(yd), 2);
  std::vector<uint8_t> y6((size_t)K(_IN1_COUNT) * es);
  tbex::ncdhw_to_6hd(encode(dy, in_t).data(), y6.data(), yd, es);
  if (dw) {
    auto x = eighths(numel(xd), 1);
    std::vector<uint8_t> x6((size_t)K(_IN0_COUNT) * es);
    tbex::ncdhw_to_6hd(encode(x, in_t).data(), x6.data(), xd, es);
    r.packed = {x6, y6};
    r.ref = tbex::test::ref_dw(g, x, dy);
  } else {
    auto w = eighths(numel(wd), 3);
    std::vector<uint8_t> fz((size_t)K(_IN0_COUNT) * es);
    tbex::oidhw_to_fz3d(encode(w, in_t).data(), fz.data(), wd, g.groups, es);
    r.packed = {fz, y6};
    r.ref = tbex::test::ref_dx(g, w, dy);
#if K(_NUM_INPUTS) == 3
    auto bias = eighths((size_t)g.cin, 4);
    r.packed.push_back(encode(bias, dtype_of(K(_IN2_DTYPE))));
    const size_t plane = (size_t)(g.in[0] * g.in[1] * g.in[2]);
    for (size_t i = 0; i < r.ref.size(); ++i) r.ref[i] += bias[(i / plane) % g.cin];
#endif
  }
  return r;
}

/** Calls the dense entry; null_first passes a null first input. */
int call(Inputs& in, std::vector<uint8_t>& out, bool null_first = false) {
  const void* first = null_first ? nullptr : in.packed[0].data();
#if K(_NUM_INPUTS) == 3
  return TBEX_AOT_NAME(first, in.packed[1].data(), in.packed[2].data(), out.data());
#else
  return TBEX_AOT_NAME(first, in.packed[1].data(), out.data());
#endif
}

/** The kernel's output unpacked to NCDHW (dX) / OIDHW (dW), as float64. */
std::vector<double> unpack(const tbex::ConvGeometry& g, const std::vector<uint8_t>& out) {
  const DType t = dtype_of(K(_OUT_DTYPE));
  const size_t es = tbex::dtype_size(t);
  const bool dw = std::strcmp(K(_IN0_NAME), "x") == 0;
  const tbex::Dims5 d = dw ? tbex::Dims5{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]}
                           : tbex::Dims5{g.n, g.cin, g.in[0], g.in[1], g.in[2]};
  std::vector<uint8_t> plain((size_t)(d[0] * d[1] * d[2] * d[3] * d[4]) * es);
  if (dw) tbex::oidhw_from_fz3d(out.data(), plain.data(), d, g.groups, es);
  else tbex::ncdhw_from_6hd(out.data(), plain.data(), d, es);
  return decode(plain, t);
}

int correctness() {
  const tbex::ConvGeometry g = geometry();
  Inputs in = make_inputs(g);
  std::vector<uint8_t> out((size_t)K(_OUT_COUNT) * K(_OUT_ELEM_SIZE), 0xA5);
  // A block of the Halide runtime's own allocator, made before the first kernel call installs
  // tbex's: freed after it, it goes back to that allocator.
  const size_t big = size_t(256) << 10;  // past tbex::kScratchMinCached: kept after free
  void* foreign = halide_malloc(nullptr, big);
  check(foreign != nullptr, "halide_malloc before the first call");
  check(call(in, out) == 0, "kernel returned an error");
  // The kernel's first call routed the runtime's allocations to tbex's scratch cache: a large
  // block freed is handed out again, not returned to the OS.
  void* a = halide_malloc(nullptr, big);
  halide_free(nullptr, a);
  const tbex::ScratchStats s0 = tbex::scratch_stats();
  void* b = halide_malloc(nullptr, big);
  check(a != nullptr && b == a, "halide_malloc must reuse the scratch block just freed");
  check(tbex::scratch_stats().reuses == s0.reuses + 1, "the reuse must come from tbex's cache");
  halide_free(nullptr, b);
  halide_free(nullptr, foreign);
  const std::vector<double> got = unpack(g, out);
  // Inputs are multiples of 1/8: every sum here is exact in fp32; an fp16 result rounds once.
  const double tol = std::strcmp(K(_OUT_DTYPE), "float32") == 0 ? 1e-6 : 1e-3;
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_ref = std::fmax(max_ref, std::fabs(in.ref[i]));
    max_err = std::fmax(max_err, std::fabs(got[i] - in.ref[i]));
  }
  check(got.size() == in.ref.size(), "output size");
  check(max_ref > 0, "reference is all zeros (test data)");
  check(max_err <= tol * max_ref, "max abs error " + std::to_string(max_err) + " > " +
                                      std::to_string(tol) + " * max |ref| " + std::to_string(max_ref));
  // A null pointer is refused without touching memory.
  std::vector<uint8_t> untouched = out;
  check(call(in, out, true) == -1, "null input pointer must return -1");
  check(out == untouched, "output written despite a null input");
  std::printf("%s: max abs error %g (max |ref| %g)\n", g_failures ? "AOT FAILED" : "AOT OK", max_err, max_ref);
  return g_failures ? 1 : 0;
}

// The pool check: tasks record the OS thread they run on.
std::mutex g_mu;
std::set<std::thread::id> g_threads;
par_for_t g_tbex_par_for = nullptr;
struct Wrapped {
  void* ctx;
  task_t task;
};
int recording_task(void* c, int idx, uint8_t* closure) {
  auto* w = static_cast<Wrapped*>(c);
  {
    std::lock_guard<std::mutex> l(g_mu);
    g_threads.insert(std::this_thread::get_id());
  }
  return w->task(w->ctx, idx, closure);
}
int recording_par_for(void* ctx, task_t task, int min, int extent, uint8_t* closure) {
  Wrapped w{ctx, task};
  return g_tbex_par_for(&w, recording_task, min, extent, closure);
}

int threads() {
  const tbex::ConvGeometry g = geometry();
  Inputs in = make_inputs(g);
  std::vector<uint8_t> out((size_t)K(_OUT_COUNT) * K(_OUT_ELEM_SIZE));
  const par_for_t halide_default = halide_set_custom_do_par_for(nullptr);
  halide_set_custom_do_par_for(halide_default);
  check(call(in, out) == 0, "kernel returned an error");  // installs tbex's pool
  g_tbex_par_for = halide_set_custom_do_par_for(recording_par_for);
  check(g_tbex_par_for != nullptr && g_tbex_par_for != halide_default,
        "the kernel's first call must install tbex's do_par_for");
  // Rounds alternate 1 and 2 threads and keep each count's best round: on a shared machine the
  // other load then affects both counts alike.
  double ms[3] = {1e30, 1e30, 1e30};
  size_t seen[3] = {0, 0, 0};
  for (int round = 0; round < 5; ++round) {
    for (int n : {1, 2}) {
      tbex_aot_set_num_threads(n);
      check(tbex_aot_num_threads() == n, "tbex_aot_set_num_threads");
      g_threads.clear();
      call(in, out);  // warm the pool
      const int reps = 10;
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) check(call(in, out) == 0, "kernel returned an error");
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ms[n] = std::min(ms[n], t / reps);
      seen[n] = std::max(seen[n], g_threads.size());
    }
  }
  check(seen[1] == 1, "1 thread: tasks ran on " + std::to_string(seen[1]) + " OS threads");
  check(seen[2] == 2, "2 threads: tasks ran on " + std::to_string(seen[2]) + " OS threads");
  std::printf("%s: %.3f ms/call at 1 thread, %.3f ms at 2 threads (speed-up %.2fx)\n",
              g_failures ? "AOT FAILED" : "AOT OK", ms[1], ms[2], ms[1] / ms[2]);
  return g_failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "threads") return threads();
  return correctness();
}
