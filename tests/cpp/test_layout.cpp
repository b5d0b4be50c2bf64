// Layout converters (docs/layouts.md): NCDHW <-> 6HD, OIDHW <-> FRACTAL_Z_3D (grouped packing).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tbex/errors.h"
#include "tbex/group_dict.h"
#include "tbex/layout.h"

namespace {

using tbex::Dims5;

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}
int64_t numel(const Dims5& s) { return s[0] * s[1] * s[2] * s[3] * s[4]; }

/** Random data that is never 0, so a zero in the output always means "not populated". */
template <typename T>
std::vector<T> random_nonzero(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> dist(1, std::numeric_limits<T>::max());
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

/** Output buffer pre-filled with a non-zero sentinel so we see that zeros were written. */
template <typename T>
std::vector<T> sentinel(int64_t n) {
  return std::vector<T>(static_cast<size_t>(n), static_cast<T>(0xABCD));
}

template <typename T>
class LayoutTyped : public ::testing::Test {};
using ElemTypes = ::testing::Types<uint16_t, uint32_t>;
TYPED_TEST_SUITE(LayoutTyped, ElemTypes);

// ------------------------------------------------------------------------------------------ 6HD

const std::vector<Dims5> k6hdShapes = {
    {1, 1, 1, 1, 1},   {2, 16, 3, 4, 5},  {2, 20, 3, 4, 5}, {1, 33, 2, 17, 19},
    {3, 5, 1, 1, 7},   {1, 48, 1, 20, 20}, {2, 31, 2, 3, 1}, {1, 17, 1, 600, 1},
};

TEST(Layout6hd, Shape) {
  EXPECT_EQ(tbex::shape_6hd({2, 20, 3, 4, 5}), (std::vector<int64_t>{2, 3, 2, 4, 5, 16}));
  EXPECT_EQ(tbex::shape_6hd({1, 16, 1, 1, 1}), (std::vector<int64_t>{1, 1, 1, 1, 1, 16}));
  EXPECT_EQ(tbex::shape_6hd({1, 17, 1, 1, 1}), (std::vector<int64_t>{1, 1, 2, 1, 1, 16}));
  EXPECT_EQ(tbex::shape_6hd({16, 1, 8, 72, 72}), (std::vector<int64_t>{16, 8, 1, 72, 72, 16}));
}

TYPED_TEST(LayoutTyped, Ncdhw6hdMatchesSpecAndRoundTrips) {
  using T = TypeParam;
  uint32_t seed = 1;
  for (const Dims5& s : k6hdShapes) {
    SCOPED_TRACE(::testing::PrintToString(s));
    const int64_t N = s[0], C = s[1], D = s[2], H = s[3], W = s[4], C1 = (C + 15) / 16;
    const auto shp6 = tbex::shape_6hd(s);
    ASSERT_EQ(shp6, (std::vector<int64_t>{N, D, C1, H, W, 16}));
    const auto src = random_nonzero<T>(numel(s), seed++);
    auto t6 = sentinel<T>(numel(shp6));
    tbex::ncdhw_to_6hd(src.data(), t6.data(), s, sizeof(T));

    // Every 6HD element against the formula of docs/layouts.md (padding lanes are 0).
    int64_t mismatches = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t c1 = 0; c1 < C1; ++c1)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w)
              for (int64_t c0 = 0; c0 < 16; ++c0) {
                const int64_t c = c1 * 16 + c0;
                const T want = c < C ? src[(((n * C + c) * D + d) * H + h) * W + w] : T{0};
                const T got = t6[((((n * D + d) * C1 + c1) * H + h) * W + w) * 16 + c0];
                mismatches += (got != want);
              }
    EXPECT_EQ(mismatches, 0);

    auto back = sentinel<T>(numel(s));
    tbex::ncdhw_from_6hd(t6.data(), back.data(), s, sizeof(T));
    EXPECT_EQ(back, src);

    // The inverse ignores whatever is in the padding lanes.
    if (C % 16 != 0) {
      for (size_t i = 0; i < t6.size(); ++i)
        if (t6[i] == 0) t6[i] = static_cast<T>(0x5A5A);
      auto back2 = sentinel<T>(numel(s));
      tbex::ncdhw_from_6hd(t6.data(), back2.data(), s, sizeof(T));
      EXPECT_EQ(back2, src);
    }
  }
}

TEST(Layout6hd, ExplicitElements) {
  const Dims5 s = {2, 20, 3, 4, 5};
  std::vector<uint32_t> src(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i + 1);
  std::vector<uint32_t> t6(static_cast<size_t>(numel(tbex::shape_6hd(s))), 0xFFFFFFFFu);
  tbex::ncdhw_to_6hd(src.data(), t6.data(), s, 4);
  auto at6 = [&](int64_t n, int64_t d, int64_t c1, int64_t h, int64_t w, int64_t c0) {
    return t6[((((n * 3 + d) * 2 + c1) * 4 + h) * 5 + w) * 16 + c0];
  };
  auto at = [&](int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
    return src[(((n * 20 + c) * 3 + d) * 4 + h) * 5 + w];
  };
  EXPECT_EQ(at6(0, 0, 0, 0, 0, 0), 1u);
  EXPECT_EQ(at6(0, 0, 0, 0, 0, 1), at(0, 1, 0, 0, 0));
  EXPECT_EQ(at6(0, 0, 0, 0, 1, 0), at(0, 0, 0, 0, 1));
  EXPECT_EQ(at6(1, 2, 1, 3, 4, 3), at(1, 19, 2, 3, 4));
  EXPECT_EQ(at6(1, 1, 0, 2, 3, 15), at(1, 15, 1, 2, 3));
  EXPECT_EQ(at6(0, 2, 1, 1, 2, 0), at(0, 16, 2, 1, 2));
  EXPECT_EQ(at6(1, 2, 1, 3, 4, 4), 0u);   // channel 20: padding
  EXPECT_EQ(at6(0, 0, 1, 0, 0, 15), 0u);  // channel 31: padding
}

TEST(Layout6hd, LargeRoundTrip2Byte) {
  const Dims5 s = {2, 37, 4, 33, 35};
  const auto src = random_nonzero<uint16_t>(numel(s), 77);
  std::vector<uint16_t> t6(static_cast<size_t>(numel(tbex::shape_6hd(s))));
  tbex::ncdhw_to_6hd(src.data(), t6.data(), s, 2);
  std::vector<uint16_t> back(src.size());
  tbex::ncdhw_from_6hd(t6.data(), back.data(), s, 2);
  EXPECT_EQ(back, src);
}

// -------------------------------------------------------------------------------- FRACTAL_Z_3D

struct FzCase {
  Dims5 oidhw;  // [Cout, Cin/groups, Kd, Kh, Kw]
  int64_t groups;
};

const std::vector<FzCase> kFzCases = {
    {{16, 16, 1, 1, 1}, 1},  {{33, 20, 2, 3, 3}, 1}, {{5, 7, 1, 2, 2}, 1},
    {{1, 1, 1, 1, 1}, 1},    {{32, 48, 1, 1, 3}, 1}, {{56, 5, 2, 3, 3}, 4},   // Cin=20, mag 4
    {{320, 1, 1, 2, 2}, 320},                                                // depthwise, mag 16
    {{48, 1, 1, 3, 3}, 24},  {{36, 12, 1, 2, 2}, 3}, {{128, 32, 1, 1, 1}, 2},
    {{18, 2, 3, 1, 2}, 6},   {{24, 8, 2, 2, 1}, 3},  {{256, 1, 3, 3, 3}, 256},
    {{40, 2, 1, 2, 1}, 20},
};

/** Expected FRACTAL_Z_3D by gathering: for every storage entry decide from the formulas of
 * docs/layouts.md which weight element (if any) lands there. */
template <typename T>
std::vector<T> fz_reference(const std::vector<T>& w, const Dims5& o, int64_t groups) {
  const int64_t Cout = o[0], cin_pg = o[1], Kd = o[2], Kh = o[3], Kw = o[4];
  const int64_t cout_pg = Cout / groups;
  const tbex::GroupDict gd = tbex::derive_group_dict(cin_pg * groups, Cout, groups);
  const int64_t rows = gd.real_g * Kd * gd.cin1_g * Kh * Kw, n1s = gd.cout_g / 16;
  std::vector<T> fz(static_cast<size_t>(rows * n1s * 256));
  for (int64_t g = 0; g < gd.real_g; ++g)
    for (int64_t kd = 0; kd < Kd; ++kd)
      for (int64_t c1 = 0; c1 < gd.cin1_g; ++c1)
        for (int64_t kh = 0; kh < Kh; ++kh)
          for (int64_t kw = 0; kw < Kw; ++kw)
            for (int64_t n = 0; n < gd.cout_g; ++n)
              for (int64_t c0 = 0; c0 < 16; ++c0) {
                const int64_t row = (((g * Kd + kd) * gd.cin1_g + c1) * Kh + kh) * Kw + kw;
                const int64_t p_in = c1 * 16 + c0, p_out = n;
                const int64_t e_in = p_in / cin_pg, e_out = p_out / cout_pg;
                const int64_t gg = g * gd.mag_factor + e_out;
                T v = 0;
                if (e_in == e_out && e_out < gd.mag_factor && gg < groups) {
                  const int64_t co = p_out % cout_pg, ci = p_in % cin_pg;
                  v = w[((((gg * cout_pg + co) * cin_pg + ci) * Kd + kd) * Kh + kh) * Kw + kw];
                }
                fz[((row * n1s + n / 16) * 16 + n % 16) * 16 + c0] = v;
              }
  return fz;
}

TYPED_TEST(LayoutTyped, Fz3dMatchesSpecAndRoundTrips) {
  using T = TypeParam;
  uint32_t seed = 100;
  for (const FzCase& fc : kFzCases) {
    const Dims5& o = fc.oidhw;
    SCOPED_TRACE(::testing::PrintToString(o) + " groups=" + std::to_string(fc.groups));
    const auto shp = tbex::shape_fz3d(o, fc.groups);
    const auto w = random_nonzero<T>(numel(o), seed++);
    auto fz = sentinel<T>(numel(shp));
    tbex::oidhw_to_fz3d(w.data(), fz.data(), o, fc.groups, sizeof(T));
    const auto want = fz_reference(w, o, fc.groups);
    ASSERT_EQ(fz.size(), want.size());
    EXPECT_TRUE(fz == want);

    // Every weight element appears exactly once: non-zero count == weight count.
    int64_t nonzero = 0;
    for (T v : fz) nonzero += (v != 0);
    EXPECT_EQ(nonzero, numel(o));

    auto back = sentinel<T>(numel(o));
    tbex::oidhw_from_fz3d(fz.data(), back.data(), o, fc.groups, sizeof(T));
    EXPECT_EQ(back, w);

    // The inverse ignores padded / cross-group entries.
    for (auto& v : fz)
      if (v == 0) v = static_cast<T>(0x7777);
    auto back2 = sentinel<T>(numel(o));
    tbex::oidhw_from_fz3d(fz.data(), back2.data(), o, fc.groups, sizeof(T));
    EXPECT_EQ(back2, w);
  }
}

TEST(LayoutFz3d, Groups1MatchesUngroupedFormula) {
  // fz[((kd*C1 + c1)*Kh + kh)*Kw + kw, n1, n0, c0] = W[n1*16+n0, c1*16+c0, kd, kh, kw]
  // (docs/layouts.md).
  const Dims5 o = {33, 20, 2, 3, 2};
  const int64_t Cout = 33, Cin = 20, Kd = 2, Kh = 3, Kw = 2, C1 = 2, N1 = 3;
  ASSERT_EQ(tbex::shape_fz3d(o, 1), (std::vector<int64_t>{Kd * C1 * Kh * Kw, N1, 16, 16}));
  const auto w = random_nonzero<uint32_t>(numel(o), 5);
  std::vector<uint32_t> fz(static_cast<size_t>(Kd * C1 * Kh * Kw * N1 * 256), 0xFFFFFFFFu);
  tbex::oidhw_to_fz3d(w.data(), fz.data(), o, 1, 4);
  int64_t mismatches = 0;
  for (int64_t kd = 0; kd < Kd; ++kd)
    for (int64_t c1 = 0; c1 < C1; ++c1)
      for (int64_t kh = 0; kh < Kh; ++kh)
        for (int64_t kw = 0; kw < Kw; ++kw)
          for (int64_t n1 = 0; n1 < N1; ++n1)
            for (int64_t n0 = 0; n0 < 16; ++n0)
              for (int64_t c0 = 0; c0 < 16; ++c0) {
                const int64_t co = n1 * 16 + n0, ci = c1 * 16 + c0;
                const int64_t row = ((kd * C1 + c1) * Kh + kh) * Kw + kw;
                const uint32_t want =
                    (co < Cout && ci < Cin)
                        ? w[(((co * Cin + ci) * Kd + kd) * Kh + kh) * Kw + kw]
                        : 0u;
                mismatches += fz[((row * N1 + n1) * 16 + n0) * 16 + c0] != want;
              }
  EXPECT_EQ(mismatches, 0);
}

TEST(LayoutFz3d, ShapesFromSpec) {
  EXPECT_EQ(tbex::shape_fz3d({512, 512, 3, 3, 3}, 1), (std::vector<int64_t>{864, 32, 16, 16}));
  EXPECT_EQ(tbex::shape_fz3d({320, 1, 1, 2, 2}, 320), (std::vector<int64_t>{80, 1, 16, 16}));
  // Cin=20, Cout=56, groups=4: real_g 1, cin1_g 2, cout_g 64.
  EXPECT_EQ(tbex::shape_fz3d({56, 5, 2, 3, 3}, 4), (std::vector<int64_t>{36, 4, 16, 16}));
  // Seed example filter: Cout=16, Cin=16, Kd=2, 3x3 -> (18, 1, 16, 16).
  EXPECT_EQ(tbex::shape_fz3d({16, 16, 2, 3, 3}, 1), (std::vector<int64_t>{18, 1, 16, 16}));
  // Depthwise 256: real_g 16, cin1_g 1, cout_g 16.
  EXPECT_EQ(tbex::shape_fz3d({256, 1, 3, 3, 3}, 256), (std::vector<int64_t>{432, 1, 16, 16}));
  // Cin=64, Cout=128, groups=2: mag 1, real_g 2, cin1_g 2, cout_g 64.
  EXPECT_EQ(tbex::shape_fz3d({128, 32, 1, 1, 1}, 2), (std::vector<int64_t>{4, 4, 16, 16}));
}

TEST(LayoutFz3d, ExplicitElementsGrouped) {
  // Cin=20, Cout=56, groups=4: cin_pg 5, cout_pg 14, mag 4, real_g 1, cin1_g 2, cout_g 64.
  const Dims5 o = {56, 5, 2, 3, 3};
  std::vector<uint32_t> w(static_cast<size_t>(numel(o)));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint32_t>(i + 1);
  std::vector<uint32_t> fz(static_cast<size_t>(36 * 4 * 256), 0xFFFFFFFFu);
  tbex::oidhw_to_fz3d(w.data(), fz.data(), o, 4, 4);
  auto W = [&](int64_t oc, int64_t ci, int64_t kd, int64_t kh, int64_t kw) {
    return w[(((oc * 5 + ci) * 2 + kd) * 3 + kh) * 3 + kw];
  };
  auto F = [&](int64_t row, int64_t n1, int64_t n0, int64_t c0) {
    return fz[((row * 4 + n1) * 16 + n0) * 16 + c0];
  };
  // gg=3, co=13, ci=4, kd=1, kh=2, kw=0: g 0, e 3, p_in 19, p_out 55,
  // row ((0*2+1)*2 + 19/16)*3+2)*3+0 = 33, n1 3, n0 7, c0 3.
  EXPECT_EQ(F(33, 3, 7, 3), W(3 * 14 + 13, 4, 1, 2, 0));
  // gg=0, co=0, ci=0, kd=0, kh=0, kw=0 -> row 0, p_out 0, p_in 0.
  EXPECT_EQ(F(0, 0, 0, 0), W(0, 0, 0, 0, 0));
  // gg=1, co=2, ci=3, kd=0, kh=1, kw=2: p_in 8, p_out 16 -> row (0*3+1)*3+2 = 5, n1 1, n0 0, c0 8.
  EXPECT_EQ(F(5, 1, 0, 8), W(14 + 2, 3, 0, 1, 2));
  // Same row, c0 0: p_in 16 = group 3, ci 1.
  EXPECT_EQ(F(33, 3, 7, 0), W(3 * 14 + 13, 1, 1, 2, 0));
  // Cross-group: p_out 55 (group 3) with p_in 0 (group 0; row of c1 0 = 24) is zero; so is
  // p_out 56.. (padding).
  EXPECT_EQ(F(24, 3, 7, 0), 0u);
  EXPECT_EQ(F(24, 3, 7, 15), W(3 * 14 + 13, 0, 1, 2, 0));  // p_in 15: group 3, ci 0
  EXPECT_EQ(F(24, 3, 7, 14), 0u);                           // p_in 14: group 2
  EXPECT_EQ(F(0, 3, 8, 0), 0u);
  // Padding input lanes p_in >= 20 (c1 1, c0 4..15) are zero.
  EXPECT_EQ(F(33, 3, 7, 4), 0u);
}

TEST(LayoutFz3d, ExplicitElementsDepthwise320) {
  const Dims5 o = {320, 1, 1, 2, 2};
  std::vector<uint16_t> w(static_cast<size_t>(numel(o)));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(i + 1);
  std::vector<uint16_t> fz(static_cast<size_t>(80 * 256), 0xFFFF);
  tbex::oidhw_to_fz3d(w.data(), fz.data(), o, 320, 2);
  auto F = [&](int64_t row, int64_t n0, int64_t c0) { return fz[(row * 16 + n0) * 16 + c0]; };
  // gg=317, kh=1, kw=0: g 19, e 13 -> row 19*4 + 1*2 + 0 = 78, entry (13, 13).
  EXPECT_EQ(F(78, 13, 13), w[317 * 4 + 2]);
  EXPECT_EQ(F(0, 0, 0), w[0]);
  EXPECT_EQ(F(3, 15, 15), w[15 * 4 + 3]);
  EXPECT_EQ(F(78, 13, 12), 0);
  EXPECT_EQ(F(78, 12, 13), 0);
  // Exactly one non-zero per (row, diagonal lane).
  int64_t nonzero = 0;
  for (uint16_t v : fz) nonzero += v != 0;
  EXPECT_EQ(nonzero, 320 * 4);
}

TEST(LayoutFz3d, Large512RoundTrip) {
  const Dims5 o = {512, 512, 3, 3, 3};
  ASSERT_EQ(tbex::shape_fz3d(o, 1), (std::vector<int64_t>{864, 32, 16, 16}));
  const auto w = random_nonzero<uint16_t>(numel(o), 9);
  std::vector<uint16_t> fz(static_cast<size_t>(864 * 32 * 256), 0);
  tbex::oidhw_to_fz3d(w.data(), fz.data(), o, 1, 2);
  // fz[((kd*32 + c1)*3 + kh)*3 + kw, n1, n0, c0] = W[n1*16+n0, c1*16+c0, kd, kh, kw]
  auto W = [&](int64_t co, int64_t ci, int64_t kd, int64_t kh, int64_t kw) {
    return w[(((co * 512 + ci) * 3 + kd) * 3 + kh) * 3 + kw];
  };
  auto F = [&](int64_t kd, int64_t c1, int64_t kh, int64_t kw, int64_t n1, int64_t n0,
               int64_t c0) {
    return fz[(((((kd * 32 + c1) * 3 + kh) * 3 + kw) * 32 + n1) * 16 + n0) * 16 + c0];
  };
  EXPECT_EQ(F(2, 31, 2, 2, 31, 15, 15), W(511, 511, 2, 2, 2));
  EXPECT_EQ(F(1, 5, 0, 2, 7, 3, 9), W(7 * 16 + 3, 5 * 16 + 9, 1, 0, 2));
  EXPECT_EQ(F(0, 0, 1, 0, 0, 0, 1), W(0, 1, 0, 1, 0));
  std::vector<uint16_t> back(w.size());
  tbex::oidhw_from_fz3d(fz.data(), back.data(), o, 1, 2);
  EXPECT_TRUE(back == w);
}

// -------------------------------------------------------------------------------------- errors

template <typename F>
tbex::UserError expect_user_error(F&& f) {
  try {
    f();
  } catch (const tbex::UserError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tbex::UserError, got " << e.what();
    return tbex::UserError("", "", "");
  }
  ADD_FAILURE() << "expected tbex::UserError, nothing thrown";
  return tbex::UserError("", "", "");
}

TEST(LayoutErrors, BadElemSize) {
  uint32_t a[4096] = {}, b[4096] = {};
  const Dims5 s = {1, 2, 1, 1, 1}, o = {2, 2, 1, 1, 1};
  for (size_t es : {size_t(0), size_t(1), size_t(3), size_t(8)}) {
    SCOPED_TRACE(es);
    for (auto e : {expect_user_error([&] { tbex::ncdhw_to_6hd(a, b, s, es); }),
                   expect_user_error([&] { tbex::ncdhw_from_6hd(a, b, s, es); }),
                   expect_user_error([&] { tbex::oidhw_to_fz3d(a, b, o, 1, es); }),
                   expect_user_error([&] { tbex::oidhw_from_fz3d(a, b, o, 1, es); })}) {
      EXPECT_EQ(e.param(), "elem_size");
      EXPECT_NE(std::string(e.what()).find(std::to_string(es)), std::string::npos) << e.what();
    }
  }
}

TEST(LayoutErrors, NonPositiveDims) {
  uint32_t a[16] = {}, b[16] = {};
  for (int i = 0; i < 5; ++i) {
    for (int64_t bad : {int64_t(0), int64_t(-3)}) {
      Dims5 s = {2, 3, 4, 5, 6};
      s[i] = bad;
      SCOPED_TRACE(::testing::PrintToString(s));
      auto e1 = expect_user_error([&] { tbex::shape_6hd(s); });
      EXPECT_EQ(e1.param(), "ncdhw");
      EXPECT_NE(std::string(e1.what()).find(std::to_string(bad)), std::string::npos) << e1.what();
      EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_to_6hd(a, b, s, 4); }).param(), "ncdhw");
      EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_from_6hd(a, b, s, 2); }).param(), "ncdhw");
      auto e2 = expect_user_error([&] { tbex::shape_fz3d(s, 1); });
      EXPECT_EQ(e2.param(), "oidhw");
      EXPECT_NE(std::string(e2.what()).find(std::to_string(bad)), std::string::npos) << e2.what();
      EXPECT_EQ(expect_user_error([&] { tbex::oidhw_to_fz3d(a, b, s, 1, 4); }).param(), "oidhw");
      EXPECT_EQ(expect_user_error([&] { tbex::oidhw_from_fz3d(a, b, s, 1, 2); }).param(),
                "oidhw");
    }
  }
}

TEST(LayoutErrors, NullPointers) {
  uint32_t a[64] = {};
  const Dims5 s = {1, 2, 1, 1, 1};
  EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_to_6hd(nullptr, a, s, 4); }).param(), "src");
  EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_to_6hd(a, nullptr, s, 4); }).param(), "dst");
  EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_from_6hd(nullptr, a, s, 4); }).param(), "src");
  EXPECT_EQ(expect_user_error([&] { tbex::oidhw_to_fz3d(a, nullptr, s, 1, 2); }).param(), "dst");
  EXPECT_EQ(expect_user_error([&] { tbex::oidhw_from_fz3d(nullptr, a, s, 1, 2); }).param(),
            "src");
}

TEST(LayoutErrors, Overflow) {
  uint32_t a[16] = {}, b[16] = {};
  const int64_t big = int64_t(1) << 40;
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (const Dims5& s : {Dims5{big, big, 1, 1, 1}, Dims5{1, max, 1, 1, 1},
                         Dims5{1, 1, big, big, 2}, Dims5{max, max, max, max, max},
                         Dims5{1, 16, 1, int64_t(1) << 30, int64_t(1) << 29}}) {
    SCOPED_TRACE(::testing::PrintToString(s));
    EXPECT_EQ(expect_user_error([&] { tbex::shape_6hd(s); }).param(), "ncdhw");
    EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_to_6hd(a, b, s, 4); }).param(), "ncdhw");
    EXPECT_EQ(expect_user_error([&] { tbex::shape_fz3d(s, 1); }).param(), "oidhw");
    EXPECT_EQ(expect_user_error([&] { tbex::oidhw_to_fz3d(a, b, s, 1, 2); }).param(), "oidhw");
  }
  // Element count fits int64 but the byte size does not.
  const Dims5 s = {1, 16, 1, int64_t(1) << 29, int64_t(1) << 29};  // 2^62 elements
  EXPECT_NO_THROW(tbex::shape_6hd(s));
  EXPECT_EQ(expect_user_error([&] { tbex::ncdhw_to_6hd(a, b, s, 2); }).param(), "ncdhw");
  // Cin = (Cin/groups) * groups overflows.
  EXPECT_EQ(expect_user_error([&] { tbex::shape_fz3d({big, big, 1, 1, 1}, big); }).param(),
            "oidhw");
  EXPECT_EQ(expect_user_error([&] { tbex::shape_fz3d({1, int64_t(1) << 60, 1, 1, 1}, 1); })
                .param(),
            "oidhw");
}

TEST(LayoutErrors, BadGroups) {
  uint32_t a[16] = {}, b[16] = {};
  // W [56, 5, ...]: Cout 56 not divisible by 3.
  for (int64_t g : {int64_t(0), int64_t(-1), int64_t(3), int64_t(57)}) {
    SCOPED_TRACE(g);
    auto e = expect_user_error([&] { tbex::shape_fz3d({56, 5, 1, 1, 1}, g); });
    EXPECT_EQ(e.code(), "E60038");
    EXPECT_EQ(e.param(), "groups");
    auto e2 = expect_user_error([&] { tbex::oidhw_to_fz3d(a, b, {56, 5, 1, 1, 1}, g, 4); });
    EXPECT_EQ(e2.code(), "E60038");
  }
}

}  // namespace
