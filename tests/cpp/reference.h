#pragma once
// Naive float64 conv3d (forward and both backprops) in NCDHW, straight from the definition
// (docs/layouts.md, "What dW and dX compute"), used as the oracle of the C++ correctness tests.
#include <array>
#include <cstdint>
#include <vector>

#include "tbex/problem.h"

namespace tbex::test {

inline size_t idx5(const std::array<int64_t, 5>& s, int64_t a, int64_t b, int64_t c, int64_t d,
                   int64_t e) {
  return (size_t)((((a * s[1] + b) * s[2] + c) * s[3] + d) * s[4] + e);
}

/** Calls f(b, co, ci_in_group_index, od, oh, ow, kd, kh, kw, id, ih, iw) for every in-range term. */
template <class F>
void for_each_term(const ConvGeometry& g, F&& f) {
  const int64_t cin_pg = g.cin_pg(), cout_pg = g.cout_pg();
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t co = 0; co < g.cout; ++co)
      for (int64_t ci = 0; ci < cin_pg; ++ci)
        for (int64_t od = 0; od < g.out[0]; ++od)
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            int64_t id = od * g.stride[0] + kd * g.dilation[0] - g.pads[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                int64_t ih = oh * g.stride[1] + kh * g.dilation[1] - g.pads[2];
                if (ih < 0 || ih >= g.in[1]) continue;
                for (int64_t ow = 0; ow < g.out[2]; ++ow)
                  for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                    int64_t iw = ow * g.stride[2] + kw * g.dilation[2] - g.pads[4];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    int64_t cin_abs = (co / cout_pg) * cin_pg + ci;
                    f(b, co, ci, cin_abs, od, oh, ow, kd, kh, kw, id, ih, iw);
                  }
              }
          }
}

/** dW [Cout, Cin/groups, Kd, Kh, Kw] from x [N, Cin, D, H, W] and dy [N, Cout, Do, Ho, Wo]. */
inline std::vector<double> ref_dw(const ConvGeometry& g, const std::vector<double>& x,
                                  const std::vector<double>& dy) {
  std::array<int64_t, 5> xs{g.n, g.cin, g.in[0], g.in[1], g.in[2]};
  std::array<int64_t, 5> ys{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  std::array<int64_t, 5> ws{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  std::vector<double> dw(ws[0] * ws[1] * ws[2] * ws[3] * ws[4], 0.0);
  for_each_term(g, [&](int64_t b, int64_t co, int64_t ci, int64_t cia, int64_t od, int64_t oh,
                       int64_t ow, int64_t kd, int64_t kh, int64_t kw, int64_t id, int64_t ih,
                       int64_t iw) {
    dw[idx5(ws, co, ci, kd, kh, kw)] += dy[idx5(ys, b, co, od, oh, ow)] * x[idx5(xs, b, cia, id, ih, iw)];
  });
  return dw;
}

/** dX [N, Cin, D, H, W] from w [Cout, Cin/groups, Kd, Kh, Kw] and dy. */
inline std::vector<double> ref_dx(const ConvGeometry& g, const std::vector<double>& w,
                                  const std::vector<double>& dy) {
  std::array<int64_t, 5> xs{g.n, g.cin, g.in[0], g.in[1], g.in[2]};
  std::array<int64_t, 5> ys{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  std::array<int64_t, 5> ws{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  std::vector<double> dx(xs[0] * xs[1] * xs[2] * xs[3] * xs[4], 0.0);
  for_each_term(g, [&](int64_t b, int64_t co, int64_t ci, int64_t cia, int64_t od, int64_t oh,
                       int64_t ow, int64_t kd, int64_t kh, int64_t kw, int64_t id, int64_t ih,
                       int64_t iw) {
    dx[idx5(xs, b, cia, id, ih, iw)] += dy[idx5(ys, b, co, od, oh, ow)] * w[idx5(ws, co, ci, kd, kh, kw)];
  });
  return dx;
}

/** Forward y [N, Cout, Do, Ho, Wo] from x [N, Cin, D, H, W] and w [Cout, Cin/groups, Kd, Kh, Kw]. */
inline std::vector<double> ref_fwd(const ConvGeometry& g, const std::vector<double>& x,
                                   const std::vector<double>& w) {
  std::array<int64_t, 5> xs{g.n, g.cin, g.in[0], g.in[1], g.in[2]};
  std::array<int64_t, 5> ys{g.n, g.cout, g.out[0], g.out[1], g.out[2]};
  std::array<int64_t, 5> ws{g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
  std::vector<double> y(ys[0] * ys[1] * ys[2] * ys[3] * ys[4], 0.0);
  for_each_term(g, [&](int64_t b, int64_t co, int64_t ci, int64_t cia, int64_t od, int64_t oh,
                       int64_t ow, int64_t kd, int64_t kh, int64_t kw, int64_t id, int64_t ih,
                       int64_t iw) {
    y[idx5(ys, b, co, od, oh, ow)] += x[idx5(xs, b, cia, id, ih, iw)] * w[idx5(ws, co, ci, kd, kh, kw)];
  });
  return y;
}

}  // namespace tbex::test
