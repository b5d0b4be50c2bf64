#pragma once
/** Element types tbex kernels read and write. */
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tbex {

enum class DType { kFloat16, kBFloat16, kFloat32 };

/** "float16" | "bfloat16" | "float32" (TBE spelling). */
const char* dtype_name(DType t);
size_t dtype_size(DType t);
/** Parses a TBE dtype string; throws UserError naming `param` for anything else. */
DType parse_dtype(const std::string& name, const char* param);

/** Scalar conversions (round to nearest even), inline: packers convert millions of elements. */
namespace detail {
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

inline float half_to_float(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return detail::float_of(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return detail::float_of(sign);
    float v = (float)man * (1.0f / 16777216.0f);  // man * 2^-24
    return (h & 0x8000) ? -v : v;
  }
  return detail::float_of(sign | ((exp + 112) << 23) | (man << 13));
}

inline unsigned short float_to_half(float f) {
  uint32_t u = detail::bits_of(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00);  // rounds to inf
  if (a < 0x38800000u) {                                          // subnormal or zero in half
    float v = detail::float_of(a) * 16777216.0f;                          // scale by 2^24
    uint32_t m = (uint32_t)v;
    float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return (unsigned short)(sign | m);
  }
  uint32_t mant_odd = (a >> 13) & 1;
  a += 0xfff + mant_odd;  // round to nearest even on the 13 dropped bits
  return (unsigned short)(sign | ((a - 0x38000000u) >> 13));
}

inline float bf16_to_float(unsigned short b) { return detail::float_of((uint32_t)b << 16); }

inline unsigned short float_to_bf16(float f) {
  uint32_t u = detail::bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fff + ((u >> 16) & 1);
  return (unsigned short)(u >> 16);
}

/** Ascend's HF32 (1 sign, 8 exponent, 11 mantissa bits): fp32 rounded to nearest even on the 12
 * dropped mantissa bits; the value stays an fp32. */
inline float round_to_hf32(float f) {
  uint32_t u = detail::bits_of(f);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return f;  // inf, NaN
  u += 0x7ffu + ((u >> 12) & 1);
  return detail::float_of(u & ~0xfffu);
}

}  // namespace tbex
