// tbex C++ JIT example: the TBE DSL documentation's example (tbe_doc_example.py) via the C++ API.
// Builds the problem from TBE arguments, JIT-compiles it, runs it on random fp16 data in 6HD and
// checks the FRACTAL_Z_3D result against a direct loop over the definition.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tbex/tbex.h"

int main() {
  using namespace tbex;
  ParaDict para;
  para.strides = {2, 2, 2};
  para.pads = {0, 0, 0, 1, 0, 1};
  para.dilations = {1, 1, 1, 1, 1};
  para.res_dtype = "float32";
  para.kernel_name = "conv3d_backprop_filter_seed";
  para.group_dict = {{"real_g", 1}, {"mag_factor", 1}, {"cin1_g", 1},
                     {"cout_g", 16}, {"cin_ori", 16},   {"cout_ori", 16}};
  const std::vector<int64_t> x_shape{16, 8, 1, 72, 72, 16}, dy_shape{16, 4, 1, 36, 36, 16};
  Problem p = make_backprop_filter_problem(x_shape, DType::kFloat16, dy_shape, DType::kFloat16,
                                           {16, 2, 16, 3, 3}, para);

  auto t0 = std::chrono::steady_clock::now();
  auto kernel = compile(p);
  auto t1 = std::chrono::steady_clock::now();

  auto count = [](const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> x(count(x_shape)), dy(count(dy_shape));
  for (auto& v : x) v = float_to_half(dist(rng));
  for (auto& v : dy) v = float_to_half(dist(rng));
  std::vector<float> dw(count(p.dw_shape()));

  kernel->run_dense({x.data(), dy.data()}, dw.data());
  auto t2 = std::chrono::steady_clock::now();
  kernel->run_dense({x.data(), dy.data()}, dw.data());
  auto t3 = std::chrono::steady_clock::now();

  // Reference: dw[((kd*C1 + c1)*Kh + kh)*Kw + kw, n, c0] over the 6HD definition (C1 = 1 here).
  const auto& g = p.geo;
  double max_err = 0, max_ref = 0;
  for (int kd = 0; kd < 2; ++kd)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw)
        for (int n = 0; n < 16; ++n)
          for (int c0 = 0; c0 < 16; ++c0) {
            double s = 0;
            for (int b = 0; b < 16; ++b)
              for (int od = 0; od < 4; ++od)
                for (int oh = 0; oh < 36; ++oh)
                  for (int ow = 0; ow < 36; ++ow) {
                    int d = od * 2 + kd - (int)g.pads[0], h = oh * 2 + kh - (int)g.pads[2],
                        w = ow * 2 + kw - (int)g.pads[4];
                    if (d < 0 || d >= 8 || h < 0 || h >= 72 || w < 0 || w >= 72) continue;
                    s += (double)half_to_float(dy[((((b * 4 + od) * 36 + oh) * 36 + ow) * 16) + n]) *
                         half_to_float(x[((((b * 8 + d) * 72 + h) * 72 + w) * 16) + c0]);
                  }
            double got = dw[(((kd * 3 + kh) * 3 + kw) * 16 + n) * 16 + c0];
            max_err = std::fmax(max_err, std::fabs(got - s));
            max_ref = std::fmax(max_ref, std::fabs(s));
          }
  const double rel = max_err / max_ref;
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("dedw shape (%lld, %lld, %lld, %lld) float32, schedule %s\n", (long long)p.dw_shape()[0],
              (long long)p.dw_shape()[1], (long long)p.dw_shape()[2], (long long)p.dw_shape()[3],
              kernel->schedule_name().c_str());
  std::printf("compile %.1f ms, first run %.2f ms, run %.2f ms, max rel error %.3g\n", ms(t0, t1),
              ms(t1, t2), ms(t2, t3), rel);
  if (!(rel <= 1e-5)) {
    std::printf("cpp_jit_example: FAILED\n");
    return 1;
  }
  std::printf("cpp_jit_example: OK\n");
  return 0;
}
