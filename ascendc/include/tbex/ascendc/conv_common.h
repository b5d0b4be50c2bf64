#pragma once
/** The enums Ascend C's conv APIs share between kernel and host code (CANN's
 * adv_api/conv/common/conv_common.h and matmul_tiling::TPosition), with the same values. */
#include <cstdint>

namespace matmul_tiling {
/** Host-side buffer positions (CANN: enum class TPosition : int32_t). */
enum class TPosition : int32_t {
  GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM,
  TSCM, MAX
};
}  // namespace matmul_tiling

namespace ConvCommonApi {
/** Plain (not scoped) enums, so both ConvFormat::NDC1HWC0 and ConvCommonApi::NDC1HWC0 compile. */
enum ConvFormat : uint32_t {
  ND = 0, NCHW, NHWC, HWCN, DHWNC, DHWCN, NDHWC, NCDHW, NC1HWC0, NDC1HWC0, FRACTAL_Z_3D,
  FORMAT_MAX
};
enum ConvDtype : uint32_t {
  FLOAT16 = 0, FLOAT32, BF16, INT4, INT8, UINT8, INT32, INT64, UINT64, CONVDTYPEMAX
};
/** Kernel code in CANN's documents writes ConvType<ConvCommonApi::TPosition::GM, ...> while the
 * real template takes AscendC::TPosition; ConvType takes either (its position is `auto`). */
using TPosition = matmul_tiling::TPosition;
}  // namespace ConvCommonApi
