// Scalar fp16 / bf16 conversions and dtype parsing (runtime/src/dtype.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "tbex/dtype.h"
#include "tbex/errors.h"

namespace {

float f_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t u_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool half_is_nan(unsigned short h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(unsigned short b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

constexpr float kInf = std::numeric_limits<float>::infinity();

// ------------------------------------------------------------------------------------- float16

TEST(Half, ExactValues) {
  struct {
    float f;
    unsigned short h;
  } cases[] = {
      {0.0f, 0x0000},          {-0.0f, 0x8000},           {1.0f, 0x3c00},
      {-1.0f, 0xbc00},         {-2.5f, 0xc100},           {0.5f, 0x3800},
      {65504.0f, 0x7bff},      {-65504.0f, 0xfbff},       {std::ldexp(1.0f, -24), 0x0001},
      {std::ldexp(1.0f, -14), 0x0400},                    {std::ldexp(1023.0f, -24), 0x03ff},
      {std::ldexp(1.0f, 15), 0x7800},                     {0.333251953125f, 0x3555},
      {kInf, 0x7c00},          {-kInf, 0xfc00},           {1.0009765625f, 0x3c01},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.f);
    EXPECT_EQ(tbex::float_to_half(c.f), c.h);
    const float back = tbex::half_to_float(c.h);
    EXPECT_EQ(u_of(back), u_of(c.f));  // bit-exact, keeps the sign of zero
  }
}

TEST(Half, RoundsToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -10);  // half ulp in [1, 2)
  // Ties go to the even mantissa.
  EXPECT_EQ(tbex::float_to_half(1.0f + ulp1 / 2), 0x3c00);
  EXPECT_EQ(tbex::float_to_half(1.0f + 3 * ulp1 / 2), 0x3c02);
  EXPECT_EQ(tbex::float_to_half(-(1.0f + ulp1 / 2)), 0xbc00);
  // Just off the tie goes to the nearest.
  EXPECT_EQ(tbex::float_to_half(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(tbex::float_to_half(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3c00);
  // Carry into the exponent: 2047.5 is a tie between 2047 (odd) and 2048.
  EXPECT_EQ(tbex::float_to_half(2047.5f), 0x6800);
  EXPECT_EQ(tbex::float_to_half(2046.5f), 0x67fe);
  // Overflow: 65520 is the tie between 65504 (odd) and 65536 -> inf.
  EXPECT_EQ(tbex::float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(tbex::float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(tbex::float_to_half(1e6f), 0x7c00);
  EXPECT_EQ(tbex::float_to_half(-1e6f), 0xfc00);
  EXPECT_EQ(tbex::float_to_half(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(Half, SubnormalRounding) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest half subnormal
  EXPECT_EQ(tbex::float_to_half(tiny / 2), 0x0000);  // tie -> even (0)
  EXPECT_EQ(tbex::float_to_half(-tiny / 2), 0x8000);
  EXPECT_EQ(tbex::float_to_half(tiny / 2 * 1.0001f), 0x0001);
  EXPECT_EQ(tbex::float_to_half(tiny / 2 * 0.9999f), 0x0000);
  EXPECT_EQ(tbex::float_to_half(3 * tiny / 2), 0x0002);  // tie between 1 and 2 -> 2
  EXPECT_EQ(tbex::float_to_half(5 * tiny / 2), 0x0002);  // tie between 2 and 3 -> 2
  EXPECT_EQ(tbex::float_to_half(1023.5f * tiny), 0x0400);  // rounds up into the normals
  EXPECT_EQ(tbex::float_to_half(1022.5f * tiny), 0x03fe);
  EXPECT_EQ(tbex::float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(tbex::float_to_half(std::ldexp(1.0f, -30)), 0x0000);
}

TEST(Half, NaNStaysNaN) {
  EXPECT_TRUE(half_is_nan(tbex::float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(tbex::float_to_half(-std::numeric_limits<float>::quiet_NaN())));
  // Payload only in the low 13 bits (would truncate to inf if done naively).
  EXPECT_TRUE(half_is_nan(tbex::float_to_half(f_of(0x7f800001u))));
  EXPECT_TRUE(half_is_nan(tbex::float_to_half(f_of(0xff800fffu))));
  EXPECT_TRUE(std::isnan(tbex::half_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(tbex::half_to_float(0x7c01)));
  EXPECT_TRUE(std::isnan(tbex::half_to_float(0xfe00)));
  EXPECT_TRUE(std::isinf(tbex::half_to_float(0x7c00)));
}

TEST(Half, AllHalvesRoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const unsigned short hs = static_cast<unsigned short>(h);
    const float f = tbex::half_to_float(hs);
    if (half_is_nan(hs)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(half_is_nan(tbex::float_to_half(f))) << h;
    } else {
      EXPECT_EQ(tbex::float_to_half(f), hs) << h;
    }
  }
}

TEST(Half, MonotoneAndNearest) {
  // For random floats in the half range, the result is one of the two neighbouring halves and
  // the nearer one (exact comparison in double).
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> dist(0, 0x477fefffu);
  for (int i = 0; i < 200000; ++i) {
    const float f = f_of(dist(rng));
    const unsigned short h = tbex::float_to_half(f);
    const double got = tbex::half_to_float(h);
    const double err = std::fabs(got - static_cast<double>(f));
    if (h < 0x7bff) {
      EXPECT_LE(err, std::fabs(double(tbex::half_to_float(h + 1)) - f)) << f;
    }
    if (h > 0) {
      EXPECT_LE(err, std::fabs(double(tbex::half_to_float(h - 1)) - f)) << f;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Half, MatchesCompilerFloat16) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> dist;
  for (int i = 0; i < 1000000; ++i) {
    const float f = f_of(dist(rng));
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    unsigned short rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(tbex::float_to_half(f), rb) << std::hexfloat << f;
  }
}
#endif

// ------------------------------------------------------------------------------------ bfloat16

TEST(BFloat16, ExactValues) {
  struct {
    float f;
    unsigned short b;
  } cases[] = {
      {0.0f, 0x0000},  {-0.0f, 0x8000},   {1.0f, 0x3f80},   {-2.5f, 0xc020},
      {0.5f, 0x3f00},  {65536.0f, 0x4780}, {kInf, 0x7f80},  {-kInf, 0xff80},
      {std::ldexp(1.0f, -126), 0x0080},   {std::ldexp(1.0f, -133), 0x0001},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.f);
    EXPECT_EQ(tbex::float_to_bf16(c.f), c.b);
    EXPECT_EQ(u_of(tbex::bf16_to_float(c.b)), u_of(c.f));
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -7);  // bf16 ulp in [1, 2)
  EXPECT_EQ(tbex::float_to_bf16(1.0f + ulp1 / 2), 0x3f80);      // tie -> even
  EXPECT_EQ(tbex::float_to_bf16(1.0f + 3 * ulp1 / 2), 0x3f82);  // tie -> even
  EXPECT_EQ(tbex::float_to_bf16(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(tbex::float_to_bf16(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3f80);
  EXPECT_EQ(tbex::float_to_bf16(-(1.0f + 3 * ulp1 / 2)), 0xbf82);
  EXPECT_EQ(tbex::float_to_bf16(f_of(0x3fffffffu)), 0x4000);  // carry into the exponent
  EXPECT_EQ(tbex::float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // -> inf
  EXPECT_EQ(tbex::float_to_bf16(f_of(0x7f7f7fffu)), 0x7f7f);  // just below the tie: max bf16
  EXPECT_EQ(tbex::float_to_bf16(f_of(0x00008000u)), 0x0000);  // subnormal tie -> even
  EXPECT_EQ(tbex::float_to_bf16(f_of(0x00018000u)), 0x0002);
}

TEST(BFloat16, NaNStaysNaN) {
  EXPECT_TRUE(bf16_is_nan(tbex::float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16_is_nan(tbex::float_to_bf16(f_of(0x7f800001u))));  // low-bit payload
  EXPECT_TRUE(bf16_is_nan(tbex::float_to_bf16(f_of(0x7fffffffu))));  // would carry to 0x8000
  EXPECT_TRUE(bf16_is_nan(tbex::float_to_bf16(f_of(0xff80ffffu))));
  EXPECT_TRUE(std::isnan(tbex::bf16_to_float(0x7fc0)));
  EXPECT_TRUE(std::isnan(tbex::bf16_to_float(0x7f81)));
}

TEST(BFloat16, AllRoundTrip) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const unsigned short bs = static_cast<unsigned short>(b);
    const float f = tbex::bf16_to_float(bs);
    EXPECT_EQ(u_of(f), b << 16) << b;
    if (bf16_is_nan(bs)) {
      EXPECT_TRUE(bf16_is_nan(tbex::float_to_bf16(f))) << b;
    } else {
      EXPECT_EQ(tbex::float_to_bf16(f), bs) << b;
    }
  }
}

TEST(BFloat16, NearestForRandomFloats) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> dist;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = dist(rng);
    const float f = f_of(u);
    if (std::isnan(f) || std::isinf(f)) continue;
    // Reference: truncate, then round up if the dropped 16 bits exceed half, or tie and odd.
    const uint32_t lo = u & 0xffffu;
    uint32_t r = u >> 16;
    if (lo > 0x8000u || (lo == 0x8000u && (r & 1))) ++r;
    ASSERT_EQ(tbex::float_to_bf16(f), static_cast<unsigned short>(r)) << std::hex << u;
  }
}

// --------------------------------------------------------------------------------- dtype names

TEST(DType, NamesAndSizes) {
  EXPECT_STREQ(tbex::dtype_name(tbex::DType::kFloat16), "float16");
  EXPECT_STREQ(tbex::dtype_name(tbex::DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(tbex::dtype_name(tbex::DType::kFloat32), "float32");
  EXPECT_EQ(tbex::dtype_size(tbex::DType::kFloat16), 2u);
  EXPECT_EQ(tbex::dtype_size(tbex::DType::kBFloat16), 2u);
  EXPECT_EQ(tbex::dtype_size(tbex::DType::kFloat32), 4u);
}

TEST(DType, Parse) {
  EXPECT_EQ(tbex::parse_dtype("float16", "x"), tbex::DType::kFloat16);
  EXPECT_EQ(tbex::parse_dtype("fp16", "x"), tbex::DType::kFloat16);
  EXPECT_EQ(tbex::parse_dtype("bfloat16", "x"), tbex::DType::kBFloat16);
  EXPECT_EQ(tbex::parse_dtype("bf16", "x"), tbex::DType::kBFloat16);
  EXPECT_EQ(tbex::parse_dtype("float32", "x"), tbex::DType::kFloat32);
  EXPECT_EQ(tbex::parse_dtype("fp32", "x"), tbex::DType::kFloat32);
  for (const tbex::DType t :
       {tbex::DType::kFloat16, tbex::DType::kBFloat16, tbex::DType::kFloat32}) {
    EXPECT_EQ(tbex::parse_dtype(tbex::dtype_name(t), "x"), t);
  }
}

TEST(DType, ParseErrors) {
  for (const char* bad : {"int8", "float64", "", "Float16", "float16 ", "int32"}) {
    SCOPED_TRACE(bad);
    try {
      tbex::parse_dtype(bad, "res_dtype");
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const tbex::UserError& e) {
      EXPECT_EQ(e.param(), "res_dtype");
      const std::string msg = e.what();
      EXPECT_NE(msg.find("res_dtype"), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + std::string(bad) + "'"), std::string::npos) << msg;
    }
  }
}

}  // namespace
