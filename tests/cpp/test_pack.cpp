// Strided, converting packers (runtime/pack.h) against the dense bit-moving converters of
// layout.h, which test_layout.cpp checks element by element against docs/layouts.md.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tbex/dtype.h"
#include "tbex/group_dict.h"
#include "tbex/layout.h"
#include "tbex/pack.h"

namespace {

using tbex::Dims5;
using tbex::DType;
using tbex::View5;

int64_t numel(const Dims5& s) { return s[0] * s[1] * s[2] * s[3] * s[4]; }
int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/** A [s0, s1, s2, s3, s4] view inside a larger buffer: dims permuted in memory (W outermost)
 * and every dim padded by 1, so both the strides and the gaps are exercised. */
struct Strided {
  std::vector<float> buf;
  View5 view;
  Strided(const Dims5& s, uint32_t seed) {
    const Dims5 alloc{s[0] + 1, s[1] + 1, s[2] + 1, s[3] + 1, s[4] + 1};
    buf = random_floats(numel(alloc), seed);
    // memory order (outer to inner): W, N, C, D, H
    const int64_t sh = 1, sd = alloc[3], sc = sd * alloc[2], sn = sc * alloc[1],
                  sw = sn * alloc[0];
    view.data = buf.data() + sn + sc;  // offset: start at n=1, c=1
    view.shape = s;
    view.strides = {sn, sc, sd, sh, sw};
    view.dtype = DType::kFloat32;
  }
  float at(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) const {
    const auto& st = view.strides;
    return static_cast<const float*>(view.data)[n * st[0] + c * st[1] + d * st[2] + h * st[3] +
                                                 w * st[4]];
  }
  std::vector<float> dense() const {
    const auto& s = view.shape;
    std::vector<float> out;
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t c = 0; c < s[1]; ++c)
        for (int64_t d = 0; d < s[2]; ++d)
          for (int64_t h = 0; h < s[3]; ++h)
            for (int64_t w = 0; w < s[4]; ++w) out.push_back(at(n, c, d, h, w));
    return out;
  }
};

const std::vector<Dims5> kShapes = {{1, 1, 1, 1, 1}, {2, 20, 3, 4, 5}, {1, 33, 2, 7, 9},
                                    {3, 16, 1, 1, 7}};

TEST(Pack6hd, StridedViewMatchesDenseConverter) {
  uint32_t seed = 1;
  for (const auto& s : kShapes) {
    Strided src(s, seed++);
    const std::vector<float> dense = src.dense();
    const int64_t n6 = numel(tbex::shape_6hd(s));
    std::vector<float> want((size_t)n6), got((size_t)n6, 123.0f);
    tbex::ncdhw_to_6hd(dense.data(), want.data(), s, 4);
    tbex::pack_6hd(src.view, got.data(), DType::kFloat32);
    EXPECT_EQ(got, want) << "shape " << s[0] << "," << s[1] << "," << s[2] << "," << s[3] << "," << s[4];
  }
}

TEST(Pack6hd, ConvertsWithRoundToNearestEven) {
  const Dims5 s{2, 20, 3, 4, 5};
  Strided src(s, 7);
  const std::vector<float> dense = src.dense();
  const int64_t n6 = numel(tbex::shape_6hd(s));
  std::vector<float> packed32((size_t)n6);
  tbex::ncdhw_to_6hd(dense.data(), packed32.data(), s, 4);
  std::vector<uint16_t> h((size_t)n6), b((size_t)n6);
  tbex::pack_6hd(src.view, h.data(), DType::kFloat16);
  tbex::pack_6hd(src.view, b.data(), DType::kBFloat16);
  std::vector<float> hf((size_t)n6);
  tbex::pack_6hd(src.view, hf.data(), DType::kFloat32, tbex::PackRound::kHf32);
  for (int64_t i = 0; i < n6; ++i) {
    ASSERT_EQ(h[i], tbex::float_to_half(packed32[i])) << i;
    ASSERT_EQ(b[i], tbex::float_to_bf16(packed32[i])) << i;
    ASSERT_EQ(hf[i], tbex::round_to_hf32(packed32[i])) << i;
  }
}

TEST(Pack6hd, UnpackWritesOnlyTheView) {
  for (const auto& s : kShapes) {
    Strided dst(s, 11);
    const std::vector<float> before = dst.buf;
    const int64_t n6 = numel(tbex::shape_6hd(s));
    const std::vector<float> packed = random_floats(n6, 12);
    tbex::unpack_6hd(packed.data(), DType::kFloat32, dst.view);
    std::vector<float> want((size_t)numel(s));
    tbex::ncdhw_from_6hd(packed.data(), want.data(), s, 4);
    EXPECT_EQ(dst.dense(), want);
    // Everything outside the view keeps its old value.
    int64_t changed = 0;
    for (size_t i = 0; i < before.size(); ++i) changed += before[i] != dst.buf[i];
    EXPECT_EQ(changed, numel(s));
  }
}

TEST(Pack6hd, UnpackConvertsToTheViewsDtype) {
  const Dims5 s{1, 18, 2, 3, 4};
  const int64_t n6 = numel(tbex::shape_6hd(s));
  const std::vector<float> packed = random_floats(n6, 3);
  std::vector<uint16_t> out((size_t)numel(s));
  View5 v;
  v.data = out.data();
  v.shape = s;
  v.strides = {18 * 24, 24, 12, 4, 1};
  v.dtype = DType::kBFloat16;
  tbex::unpack_6hd(packed.data(), DType::kFloat32, v);
  std::vector<float> want((size_t)numel(s));
  tbex::ncdhw_from_6hd(packed.data(), want.data(), s, 4);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], tbex::float_to_bf16(want[i])) << i;
}

TEST(Round, Hf32KeepsElevenMantissaBitsTiesToEven) {
  const float ulp = 1.0f / 2048.0f;  // 2^-11: the last kept bit at 1.0
  EXPECT_EQ(tbex::round_to_hf32(1.0f + ulp / 2), 1.0f);               // tie, even stays
  EXPECT_EQ(tbex::round_to_hf32(1.0f + 1.5f * ulp), 1.0f + 2 * ulp);  // tie, odd rounds up
  EXPECT_EQ(tbex::round_to_hf32(1.0f + 0.75f * ulp), 1.0f + ulp);
  EXPECT_EQ(tbex::round_to_hf32(-3.0f), -3.0f);
}

struct FzCase {
  Dims5 oidhw;  // [Cout, Cin/groups, Kd, Kh, Kw]
  int64_t groups;
};
const std::vector<FzCase> kFz = {{{16, 16, 1, 1, 1}, 1}, {{20, 7, 2, 3, 1}, 1}, {{56, 5, 1, 2, 2}, 4},
                                 {{32, 1, 3, 1, 3}, 32}, {{12, 6, 1, 3, 2}, 2}};

TEST(PackFz3d, MatchesDenseConverterAndRoundTrips) {
  uint32_t seed = 20;
  for (const auto& c : kFz) {
    Strided src(c.oidhw, seed++);
    const std::vector<float> dense = src.dense();
    const int64_t nf = numel(tbex::shape_fz3d(c.oidhw, c.groups));
    std::vector<float> want((size_t)nf), got((size_t)nf, 5.0f);
    tbex::oidhw_to_fz3d(dense.data(), want.data(), c.oidhw, c.groups, 4);
    tbex::pack_fz3d(src.view, c.groups, false, got.data(), DType::kFloat32);
    EXPECT_EQ(got, want) << "groups " << c.groups;
    Strided back(c.oidhw, seed++);
    tbex::unpack_fz3d(got.data(), DType::kFloat32, c.groups, back.view);
    EXPECT_EQ(back.dense(), dense);
  }
}

TEST(PackFz3d, TransposedPacksThePerGroupTranspose) {
  uint32_t seed = 40;
  for (const auto& c : kFz) {
    const Dims5& o = c.oidhw;
    const int64_t g = c.groups, cout_pg = o[0] / g, cin_pg = o[1], k = o[2] * o[3] * o[4];
    Strided src(o, seed++);
    const std::vector<float> w = src.dense();
    // T [Cin, Cout/groups, k]: T[gg*cin_pg + i, j] = W[gg*cout_pg + j, i].
    const Dims5 t_dims{cin_pg * g, cout_pg, o[2], o[3], o[4]};
    std::vector<float> t((size_t)numel(t_dims));
    for (int64_t gg = 0; gg < g; ++gg)
      for (int64_t i = 0; i < cin_pg; ++i)
        for (int64_t j = 0; j < cout_pg; ++j)
          for (int64_t q = 0; q < k; ++q)
            t[((gg * cin_pg + i) * cout_pg + j) * k + q] = w[((gg * cout_pg + j) * cin_pg + i) * k + q];
    const int64_t nf = numel(tbex::shape_fz3d(t_dims, g));
    std::vector<float> want((size_t)nf), got((size_t)nf, 5.0f);
    tbex::oidhw_to_fz3d(t.data(), want.data(), t_dims, g, 4);
    tbex::pack_fz3d(src.view, g, true, got.data(), DType::kFloat32);
    EXPECT_EQ(got, want) << "groups " << g;
  }
}

}  // namespace
