#include "tbex/dtype.h"

#include <cstdint>
#include <cstring>

#include "tbex/errors.h"

namespace tbex {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
  }
  throw InternalError("unknown DType");
}

size_t dtype_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }

DType parse_dtype(const std::string& name, const char* param) {
  if (name == "float16" || name == "fp16" || name == "half") return DType::kFloat16;
  if (name == "bfloat16" || name == "bf16") return DType::kBFloat16;
  if (name == "float32" || name == "fp32" || name == "float") return DType::kFloat32;
  throw UserError("", param,
                  "dtype '" + name + "' is not supported; expected float16, bfloat16 or float32");
}

static uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float half_to_float(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return float_of(sign);
    float v = (float)man * (1.0f / 16777216.0f);  // man * 2^-24
    return (h & 0x8000) ? -v : v;
  }
  return float_of(sign | ((exp + 112) << 23) | (man << 13));
}

unsigned short float_to_half(float f) {
  uint32_t u = bits_of(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00);  // rounds to inf
  if (a < 0x38800000u) {                                          // subnormal or zero in half
    float v = float_of(a) * 16777216.0f;                          // scale by 2^24
    uint32_t m = (uint32_t)v;
    float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return (unsigned short)(sign | m);
  }
  uint32_t mant_odd = (a >> 13) & 1;
  a += 0xfff + mant_odd;  // round to nearest even on the 13 dropped bits
  return (unsigned short)(sign | ((a - 0x38000000u) >> 13));
}

float bf16_to_float(unsigned short b) { return float_of((uint32_t)b << 16); }

unsigned short float_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fff + ((u >> 16) & 1);
  return (unsigned short)(u >> 16);
}

}  // namespace tbex
