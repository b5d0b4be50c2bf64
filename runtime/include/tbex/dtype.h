#pragma once
/** Element types tbex kernels read and write. */
#include <cstddef>
#include <string>

namespace tbex {

enum class DType { kFloat16, kBFloat16, kFloat32 };

/** "float16" | "bfloat16" | "float32" (TBE spelling). */
const char* dtype_name(DType t);
size_t dtype_size(DType t);
/** Parses a TBE dtype string; throws UserError naming `param` for anything else. */
DType parse_dtype(const std::string& name, const char* param);

/** Scalar conversions used by layouts, references and tests (round to nearest even). */
float half_to_float(unsigned short h);
unsigned short float_to_half(float f);
float bf16_to_float(unsigned short b);
unsigned short float_to_bf16(float f);

}  // namespace tbex
