#pragma once
/** The 2-byte float types Ascend C kernels use: `half` (IEEE binary16) and `bfloat16_t`. Storage
 * is the raw bits; arithmetic goes through float with tbex's own conversions (round to nearest
 * even, tbex/dtype.h), as on Ascend's CPU debug mode. */
#include <cstdint>

#include "tbex/dtype.h"

/** IEEE binary16. */
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(tbex::float_to_half(f)) {}
  half(double d) : half((float)d) {}
  half(int i) : half((float)i) {}
  operator float() const { return tbex::half_to_float(bits); }
  static half from_bits(uint16_t b) { half h; h.bits = b; return h; }
};

/** bfloat16 (the upper half of an fp32). */
struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(tbex::float_to_bf16(f)) {}
  bfloat16_t(double d) : bfloat16_t((float)d) {}
  bfloat16_t(int i) : bfloat16_t((float)i) {}
  operator float() const { return tbex::bf16_to_float(bits); }
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
