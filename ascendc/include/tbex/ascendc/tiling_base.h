#pragma once
/** What both host tilers share (CANN's conv3d_bp_tiling_base.h): platform description, shapes,
 * types and attributes as set, and the last failure's message. */
#include <cstdint>
#include <string>

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

}  // namespace ConvBackpropApi
