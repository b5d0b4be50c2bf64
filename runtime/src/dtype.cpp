#include "tbex/dtype.h"

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
  throw UserError(code::kValue, param,
                  "dtype '" + name + "' is not supported; expected float16, bfloat16 or float32");
}

}  // namespace tbex
