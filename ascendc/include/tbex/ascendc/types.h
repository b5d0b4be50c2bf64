#pragma once
/** The 2-byte float types Ascend C kernels use: `half` (IEEE binary16) and `bfloat16_t`. Storage
 * is the raw bits; arithmetic goes through float (conversions round to nearest even), as on
 * Ascend's CPU debug mode. */
#include <cstdint>
#include <cstring>

namespace tbex::ascendc::detail {
inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float v = (float)man * (1.0f / 16777216.0f);
    return (h & 0x8000) ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}
inline uint16_t float_to_half_bits(float f) {
  uint32_t u = f2u(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
  if (a < 0x38800000u) {
    const float v = u2f(a) * 16777216.0f;
    uint32_t m = (uint32_t)v;
    const float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return (uint16_t)(sign | m);
  }
  a += 0xfff + ((a >> 13) & 1);
  return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
}
inline float bf16_bits_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
}  // namespace tbex::ascendc::detail

/** IEEE binary16. */
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(tbex::ascendc::detail::float_to_half_bits(f)) {}
  half(double d) : half((float)d) {}
  half(int i) : half((float)i) {}
  operator float() const { return tbex::ascendc::detail::half_bits_to_float(bits); }
  static half from_bits(uint16_t b) { half h; h.bits = b; return h; }
};

/** bfloat16 (the upper half of an fp32). */
struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(tbex::ascendc::detail::float_to_bf16_bits(f)) {}
  bfloat16_t(double d) : bfloat16_t((float)d) {}
  bfloat16_t(int i) : bfloat16_t((float)i) {}
  operator float() const { return tbex::ascendc::detail::bf16_bits_to_float(bits); }
  static bfloat16_t from_bits(uint16_t b) { bfloat16_t h; h.bits = b; return h; }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "2-byte float types");

namespace tbex::ascendc {
/** Element types the engines take (kernel element type -> this tag). */
enum class Elem : uint8_t { kHalf, kBFloat16, kFloat };
template <class T> struct ElemOf;
template <> struct ElemOf<half> { static constexpr Elem value = Elem::kHalf; };
template <> struct ElemOf<bfloat16_t> { static constexpr Elem value = Elem::kBFloat16; };
template <> struct ElemOf<float> { static constexpr Elem value = Elem::kFloat; };
}  // namespace tbex::ascendc
