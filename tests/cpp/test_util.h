#pragma once
// Helpers shared by the kernel correctness tests: exact test data, dtype encoding, comparison.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tbex/tbex.h"

namespace tbex::test {

/** One convolution geometry of the kernel tests (NCDHW terms; pads front, back, top, bottom,
 * left, right). */
struct Case {
  const char* name;
  int64_t n, cin, cout, groups;
  std::array<int64_t, 3> in, k, s, dil;
  std::array<int64_t, 6> pads;
};

/** Output size per dim (D, H, W) of case `c`. */
inline std::array<int64_t, 3> out_dims(const Case& c) {
  std::array<int64_t, 3> o{};
  for (int i = 0; i < 3; ++i)
    o[i] = (c.in[i] + c.pads[2 * i] + c.pads[2 * i + 1] - ((c.k[i] - 1) * c.dil[i] + 1)) / c.s[i] + 1;
  return o;
}

inline ConvGeometry geometry(const Case& c) {
  ConvGeometry g;
  g.n = c.n, g.cin = c.cin, g.cout = c.cout, g.groups = c.groups;
  g.in = c.in, g.out = out_dims(c), g.kernel = c.k, g.stride = c.s, g.dilation = c.dil;
  g.pads = c.pads;
  return g;
}

/** TBE para_dict of case `c`: dW's (strides D, H, W; dilations N, D, C, H, W) or dX's
 * (strides and dilations N, D, H, W, C; res_dtype float32). */
inline ParaDict para_for(const Case& c, bool dx) {
  ParaDict p;
  if (dx) {
    p.strides = std::vector<int64_t>{1, c.s[0], c.s[1], c.s[2], 1};
    p.dilations = std::vector<int64_t>{1, c.dil[0], c.dil[1], c.dil[2], 1};
    p.res_dtype = "float32";
  } else {
    p.strides = std::vector<int64_t>{c.s[0], c.s[1], c.s[2]};
    p.dilations = std::vector<int64_t>{1, c.dil[0], 1, c.dil[1], c.dil[2]};
  }
  p.pads = std::vector<int64_t>(c.pads.begin(), c.pads.end());
  p.groups = c.groups;
  return p;
}

/** NCDHW x / dy and OIDHW weight dims of a geometry. */
inline Dims5 x_dims(const ConvGeometry& g) { return {g.n, g.cin, g.in[0], g.in[1], g.in[2]}; }
inline Dims5 y_dims(const ConvGeometry& g) { return {g.n, g.cout, g.out[0], g.out[1], g.out[2]}; }
inline Dims5 w_dims(const ConvGeometry& g) {
  return {g.cout, g.cin_pg(), g.kernel[0], g.kernel[1], g.kernel[2]};
}
inline int64_t numel(const Dims5& d) { return d[0] * d[1] * d[2] * d[3] * d[4]; }

/** Multiples of 1/8 in [-1, 1]: exact in fp16, bf16 and fp32, with exact fp32 partial sums in
 * the tests' small problems. */
inline std::vector<double> random_eighths(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<double> v(count);
  for (auto& x : v) x = d(rng) / 8.0;
  return v;
}

/** Values stored as `t`: 2-byte words for fp16/bf16, floats for fp32. */
inline std::vector<uint8_t> encode(const std::vector<double>& v, DType t) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) {
      float f = (float)v[i];
      std::memcpy(&out[i * 4], &f, 4);
    } else {
      uint16_t h = t == DType::kFloat16 ? float_to_half((float)v[i]) : float_to_bf16((float)v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

inline std::vector<double> decode(const std::vector<uint8_t>& b, DType t) {
  std::vector<double> v(b.size() / dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) {
      float f;
      std::memcpy(&f, &b[i * 4], 4);
      v[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      v[i] = t == DType::kFloat16 ? half_to_float(h) : bf16_to_float(h);
    }
  }
  return v;
}

inline int64_t count(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

/** max |got - ref| <= tol * max |ref|. */
inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(got.size(), ref.size());
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::fmax(max_ref, std::fabs(ref[i]));
    max_err = std::fmax(max_err, std::fabs(got[i] - ref[i]));
  }
  EXPECT_LE(max_err, tol * std::fmax(max_ref, 1e-30)) << "max abs error " << max_err << ", max |ref| " << max_ref;
}

}  // namespace tbex::test
