// Runs the two kernels tbex_add_kernel generated (example_dw.h, example_dx.h) on NCDHW data
// converted with tbex's runtime layouts, and checks them against plain loops.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "example_dw.h"
#include "example_dx.h"
#include "tbex/dtype.h"
#include "tbex/layout.h"

namespace {

struct Conv {
  int64_t n, cin, cout, groups;
  int64_t in[3], out[3], k[3], s[3], pads[6];
};

int64_t count(const Conv& c, bool input) {
  return c.n * (input ? c.cin * c.in[0] * c.in[1] * c.in[2] : c.cout * c.out[0] * c.out[1] * c.out[2]);
}

/** Calls f(n, co, ci, od, oh, ow, kd, kh, kw, id, ih, iw) for every multiply-add of the conv. */
template <class F>
void for_each_tap(const Conv& c, F f) {
  const int64_t cin_pg = c.cin / c.groups, cout_pg = c.cout / c.groups;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t ci = 0; ci < cin_pg; ++ci)
        for (int64_t od = 0; od < c.out[0]; ++od)
          for (int64_t oh = 0; oh < c.out[1]; ++oh)
            for (int64_t ow = 0; ow < c.out[2]; ++ow)
              for (int64_t kd = 0; kd < c.k[0]; ++kd)
                for (int64_t kh = 0; kh < c.k[1]; ++kh)
                  for (int64_t kw = 0; kw < c.k[2]; ++kw) {
                    const int64_t id = od * c.s[0] + kd - c.pads[0];
                    const int64_t ih = oh * c.s[1] + kh - c.pads[2];
                    const int64_t iw = ow * c.s[2] + kw - c.pads[4];
                    if (id < 0 || id >= c.in[0] || ih < 0 || ih >= c.in[1] || iw < 0 || iw >= c.in[2])
                      continue;
                    f(n, co, (co / cout_pg) * cin_pg + ci, ci, od, oh, ow, kd, kh, kw, id, ih, iw);
                  }
}

std::vector<float> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-16, 16);
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = d(rng) / 8.0f;  // exact in fp16
  return v;
}

double max_rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::fmax(err, std::fabs(got[i] - want[i]));
    scale = std::fmax(scale, std::fabs(want[i]));
  }
  return err / (scale > 0 ? scale : 1);
}

bool check_dw() {
  const Conv c{2, 20, 24, 1, {6, 10, 12}, {3, 5, 6}, {2, 3, 3}, {2, 2, 2}, {0, 0, 0, 1, 0, 1}};
  const std::vector<float> x = random_values(count(c, true), 1), dy = random_values(count(c, false), 2);
  const tbex::Dims5 xd{c.n, c.cin, c.in[0], c.in[1], c.in[2]}, dyd{c.n, c.cout, c.out[0], c.out[1], c.out[2]};
  std::vector<uint16_t> xh(x.size()), dyh(dy.size());
  for (size_t i = 0; i < x.size(); ++i) xh[i] = tbex::float_to_half(x[i]);
  for (size_t i = 0; i < dy.size(); ++i) dyh[i] = tbex::float_to_half(dy[i]);
  std::vector<uint16_t> x6(example_dw_IN0_COUNT), dy6(example_dw_IN1_COUNT);
  tbex::ncdhw_to_6hd(xh.data(), x6.data(), xd, 2);
  tbex::ncdhw_to_6hd(dyh.data(), dy6.data(), dyd, 2);
  std::vector<float> fz(example_dw_OUT_COUNT);
  if (example_dw(x6.data(), dy6.data(), fz.data()) != 0) return false;
  const tbex::Dims5 wd{c.cout, c.cin / c.groups, c.k[0], c.k[1], c.k[2]};
  std::vector<float> dw((size_t)(wd[0] * wd[1] * wd[2] * wd[3] * wd[4]));
  tbex::oidhw_from_fz3d(fz.data(), dw.data(), wd, c.groups, 4);

  std::vector<double> want(dw.size(), 0.0);
  for_each_tap(c, [&](int64_t n, int64_t co, int64_t cig, int64_t ci, int64_t od, int64_t oh,
                      int64_t ow, int64_t kd, int64_t kh, int64_t kw, int64_t id, int64_t ih,
                      int64_t iw) {
    const double g = dy[(size_t)((((n * c.cout + co) * c.out[0] + od) * c.out[1] + oh) * c.out[2] + ow)];
    const double v = x[(size_t)((((n * c.cin + cig) * c.in[0] + id) * c.in[1] + ih) * c.in[2] + iw)];
    want[(size_t)((((co * wd[1] + ci) * c.k[0] + kd) * c.k[1] + kh) * c.k[2] + kw)] += g * v;
  });
  const double err = max_rel_err(dw, want);
  std::printf("example_dw (fp16 dW): max rel err %.2e\n", err);
  return err <= 1e-6;
}

bool check_dx() {
  const Conv c{1, 16, 32, 2, {4, 6, 7}, {4, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}};
  const tbex::Dims5 wd{c.cout, c.cin / c.groups, c.k[0], c.k[1], c.k[2]};
  const std::vector<float> w = random_values(wd[0] * wd[1] * wd[2] * wd[3] * wd[4], 3);
  const std::vector<float> dy = random_values(count(c, false), 4);
  std::vector<float> fz(example_dx_IN0_COUNT), dy6(example_dx_IN1_COUNT), dx6(example_dx_OUT_COUNT);
  tbex::oidhw_to_fz3d(w.data(), fz.data(), wd, c.groups, 4);
  tbex::ncdhw_to_6hd(dy.data(), dy6.data(), {c.n, c.cout, c.out[0], c.out[1], c.out[2]}, 4);
  if (example_dx(fz.data(), dy6.data(), dx6.data()) != 0) return false;
  std::vector<float> dx((size_t)count(c, true));
  tbex::ncdhw_from_6hd(dx6.data(), dx.data(), {c.n, c.cin, c.in[0], c.in[1], c.in[2]}, 4);

  std::vector<double> want(dx.size(), 0.0);
  for_each_tap(c, [&](int64_t n, int64_t co, int64_t cig, int64_t ci, int64_t od, int64_t oh,
                      int64_t ow, int64_t kd, int64_t kh, int64_t kw, int64_t id, int64_t ih,
                      int64_t iw) {
    const double g = dy[(size_t)((((n * c.cout + co) * c.out[0] + od) * c.out[1] + oh) * c.out[2] + ow)];
    const double v = w[(size_t)((((co * wd[1] + ci) * c.k[0] + kd) * c.k[1] + kh) * c.k[2] + kw)];
    want[(size_t)((((n * c.cin + cig) * c.in[0] + id) * c.in[1] + ih) * c.in[2] + iw)] += g * v;
  });
  const double err = max_rel_err(dx, want);
  std::printf("example_dx (fp32 grouped dX): max rel err %.2e\n", err);
  return err <= 1e-6;
}

}  // namespace

int main() {
  const bool ok = check_dw() & check_dx();
  std::printf(ok ? "aot_cmake_example: OK\n" : "aot_cmake_example: FAILED\n");
  return ok ? 0 : 1;
}
