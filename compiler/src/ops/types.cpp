/** Element types and conversions shared by the op definitions. */
#include "ops/define.h"

#include <cstdint>

#include "tbex/errors.h"

namespace tbex::ops {

using namespace Halide;

Type halide_type(DType t) {
  switch (t) {
    case DType::kFloat16: return Float(16);
    case DType::kBFloat16: return UInt(16);  // raw bits: see to_f32
    case DType::kFloat32: return Float(32);
  }
  throw InternalError("unknown DType");
}

Expr to_f32(Expr v) {
  if (v.type() == UInt(16)) {
    // bf16 bits are the top half of an fp32. Halide's own bfloat16 type is emulated, and its
    // scalar loads ran far slower than this shift.
    return reinterpret<float>(cast<uint32_t>(v) << 16);
  }
  return cast<float>(v);
}

Expr as_bf16(Expr bits) { return reinterpret(BFloat(16), bits); }

Expr from_f32(Expr v, Type t) {
  if (t == UInt(16)) {
    // bf16 bits, round to nearest even on the 16 dropped bits; NaN stays NaN (quiet bit set).
    Expr u = reinterpret<uint32_t>(v);
    Expr rounded = (u + (((u >> 16) & 1) + 0x7fff)) >> 16;
    Expr nan = (u & 0x7fffffff) > 0x7f800000;
    return cast<uint16_t>(select(nan, (u >> 16) | 0x40, rounded));
  }
  return cast(t, v);
}

void constrain_shape(OutputImageParam ip, const std::vector<int64_t>& shape) {
  const int dims = (int)shape.size();
  internal_check(ip.dimensions() == dims, "constrain_shape: rank mismatch");
  for (int i = 0; i < dims; ++i) ip.dim(i).set_bounds(0, (int)shape[dims - 1 - i]);
  ip.dim(0).set_stride(1);
}

ImageParam input_param(DType t, int dims, const char* name, const std::vector<int64_t>& shape) {
  ImageParam ip(halide_type(t), dims, name);
  constrain_shape(ip, shape);
  // Inputs are dense (every entry point hands the kernel C-contiguous memory; the JIT copies a
  // strided view first): with constant strides a stage reading across dims loads vectors where
  // it gathered elements (bf16 dW on Sapphire Rapids: d 1.27 -> 1.05 ms, e1 0.99 -> 0.80).
  int64_t stride = 1;
  for (int i = 0; i < dims && stride <= INT32_MAX; ++i) {  // larger: rejected at the call
    ip.dim(i).set_stride((int)stride);
    stride *= shape[dims - 1 - i];
  }
  return ip;
}

Expr same_group(Expr out_group, Expr in_group, Expr row, int mag, int groups, Expr g) {
  return out_group == in_group && row < mag && g * mag + row < groups;
}

}  // namespace tbex::ops
