#pragma once
/** What both host tilers share (CANN's conv3d_bp_tiling_base.h): platform description, shapes,
 * types and attributes as set, and the last failure's message. */
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "tbex/ascendc/conv_common.h"
#include "tbex/ascendc/export.h"

namespace platform_ascendc {
enum class SocVersion : int32_t { ASCEND910B = 0, ASCEND910_93, RESERVED_VERSION };
/** Stands in for the device query object; on the CPU the tilers take the host's caches. */
class PlatformAscendC {};
}  // namespace platform_ascendc

namespace ConvBackpropApi {

struct PlatformInfo {
  platform_ascendc::SocVersion socVersion = platform_ascendc::SocVersion::ASCEND910B;
  uint64_t l1Size = 512 * 1024, l0CSize = 128 * 1024, ubSize = 256 * 1024, l0ASize = 64 * 1024,
           l0BSize = 64 * 1024, btSize = 1024, fbSize = 2048;
};

struct ConvTypeDesc {
  ConvCommonApi::TPosition pos = ConvCommonApi::TPosition::GM;
  ConvCommonApi::ConvFormat format = ConvCommonApi::ConvFormat::ND;
  ConvCommonApi::ConvDtype dtype = ConvCommonApi::ConvDtype::FLOAT16;
  bool set = false;
};

/** Shapes and attributes as the setters received them (NCDHW sizes). */
struct TBEX_ASCENDC_API ConvBpTilingInput {
  PlatformInfo platform;
  int64_t weight[5] = {0, 0, 0, 0, 0};    ///< cout, cin, kd, kh, kw
  int64_t input[5] = {0, 0, 0, 0, 0};     ///< n, c, d, h, w
  int64_t grad_out[5] = {0, 0, 0, 0, 0};  ///< n, c, d, h, w
  bool weight_set = false, input_set = false, grad_out_set = false;
  ConvTypeDesc weight_type, input_type, grad_out_type;
  int64_t pads[6] = {0, 0, 0, 0, 0, 0};  ///< front, back, up, down, left, right
  int64_t strides[3] = {1, 1, 1};
  int64_t dilations[3] = {1, 1, 1};
  int64_t output_padding[3] = {0, 0, 0};
  int64_t groups = 1;
};

/** The setters both host tilers share (CANN's Conv3dBpTilingBase); ShapeRet is void for the
 * filter tiler and bool (all sizes > 0) for the input tiler, as in CANN. */
template <class ShapeRet>
class ConvBpTilingSetters {
 public:
  ConvBpTilingSetters() = default;
  explicit ConvBpTilingSetters(const platform_ascendc::PlatformAscendC&) {}
  explicit ConvBpTilingSetters(const PlatformInfo& info) { in_.platform = info; }
  virtual ~ConvBpTilingSetters() = default;

  ShapeRet SetWeightShape(int64_t cout, int64_t cin, int64_t d, int64_t h, int64_t w) {
    return shape(in_.weight, in_.weight_set, {cout, cin, d, h, w});
  }
  ShapeRet SetInputShape(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
    return shape(in_.input, in_.input_set, {n, c, d, h, w});
  }
  ShapeRet SetGradOutputShape(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
    return shape(in_.grad_out, in_.grad_out_set, {n, c, d, h, w});
  }
  void SetWeightType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                     ConvCommonApi::ConvDtype dtype) { in_.weight_type = {pos, format, dtype, true}; }
  void SetInputType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                    ConvCommonApi::ConvDtype dtype) { in_.input_type = {pos, format, dtype, true}; }
  void SetGradOutputType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                         ConvCommonApi::ConvDtype dtype) { in_.grad_out_type = {pos, format, dtype, true}; }
  void SetPadding(int64_t front, int64_t back, int64_t up, int64_t down, int64_t left, int64_t right) {
    const int64_t v[6] = {front, back, up, down, left, right};
    for (int i = 0; i < 6; ++i) in_.pads[i] = v[i];
  }
  void SetStride(int64_t d, int64_t h, int64_t w) { set3(in_.strides, d, h, w); }
  void SetDilation(int64_t d, int64_t h, int64_t w) { set3(in_.dilations, d, h, w); }
  void SetGroups(int64_t groups) { in_.groups = groups; }

  const std::string& GetErrorMessage() const { return error_; }

 protected:
  static void set3(int64_t (&dst)[3], int64_t a, int64_t b, int64_t c) {
    dst[0] = a;
    dst[1] = b;
    dst[2] = c;
  }
  static ShapeRet shape(int64_t (&dst)[5], bool& flag, std::initializer_list<int64_t> v) {
    bool ok = true;
    int i = 0;
    for (int64_t x : v) {
      dst[i++] = x;
      ok = ok && x > 0;
    }
    flag = true;
    if constexpr (!std::is_void<ShapeRet>::value) return ok;
  }

  ConvBpTilingInput in_;
  std::string error_;
};

}  // namespace ConvBackpropApi
