#pragma once
// Runs the example kernels through the host tiling and the launcher, and the float64 oracle.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "conv3d_bp_kernels.h"
#include "tbex/layout.h"
#include "tiling/conv_backprop/conv3d_bp_filter_tiling.h"
#include "tiling/conv_backprop/conv3d_bp_input_tiling.h"

namespace ascendc_test {

struct Geo {
  std::string name;
  int64_t n = 1, cin = 1, cout = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  int64_t p[6] = {0, 0, 0, 0, 0, 0};
  /** What the dX API's host tiling accepts: strideD <= kD, pads <= (k-1)*dilation. */
  bool fits_dx() const {
    if (s[0] > k[0]) return false;
    for (int i = 0; i < 3; ++i)
      if (p[2 * i] > (k[i] - 1) * d[i]) return false;
    return true;
  }
  double flops() const {
    return 2.0 * n * cout * out[0] * out[1] * out[2] * cin * k[0] * k[1] * k[2];
  }
};

/** Changes to the host tiling a test forces (0 = keep). */
struct Tweak {
  int iterate_order = -1;
  uint32_t base_m = 0, base_n = 0, base_k = 0, single_ho = 0, single_m_rows = 0;
};

/** NCDHW / OIDHW operands of one geometry, values already rounded to T. */
struct Operands {
  std::vector<float> x, dy, w;  // NCDHW, NCDHW, OIDHW
};

template <class T>
Operands make_operands(const Geo& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](size_t count) {
    std::vector<float> v(count);
    for (auto& e : v) e = (float)T(u(rng));
    return v;
  };
  Operands o;
  o.x = fill((size_t)(g.n * g.cin * g.in[0] * g.in[1] * g.in[2]));
  o.dy = fill((size_t)(g.n * g.cout * g.out[0] * g.out[1] * g.out[2]));
  o.w = fill((size_t)(g.cout * g.cin * g.k[0] * g.k[1] * g.k[2]));
  return o;
}

/** float64 dW (OIDHW) and dX (NCDHW) from the defining sums. */
void oracle(const Geo& g, const Operands& o, std::vector<double>* dw, std::vector<double>* dx);

template <class T>
std::vector<uint16_t> to_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = T(v[i]).bits;
  return b;
}

/** dW through conv3d_bp_filter_{half,bf16}: OIDHW fp32. */
template <class T>
std::vector<float> run_dw(const Geo& g, const Operands& o, int64_t block_dim, const Tweak& tw = {},
                          TConv3DBpFilterTiling* used = nullptr);
/** dX through conv3d_bp_input_{half,bf16}: NCDHW (as float). prefill: what dx holds before the
 * launch when the tiling does not ask for zeroing (checks every element is written). */
template <class T>
std::vector<float> run_dx(const Geo& g, const Operands& o, int64_t block_dim, const Tweak& tw = {},
                          TConv3DBackpropInputTiling* used = nullptr);

/** max|a - ref| / max|ref|. */
double rel_err(const std::vector<float>& a, const std::vector<double>& ref);
/** max|a - round_T(ref)| in units of T's spacing at max|ref|. */
template <class T>
double ulp_err(const std::vector<float>& a, const std::vector<double>& ref);

std::vector<Geo> public_cases();
std::vector<Geo> random_geometries(int count, uint32_t seed);

}  // namespace ascendc_test
