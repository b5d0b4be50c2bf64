#pragma once
/** Host tiling for Conv3DBackpropFilter (CANN's conv3d_bp_filter_tiling.h): a single-core tiler.
 * On the CPU it sizes each single shape (singleCoreCout / Cin / Ho) from tbex's cost model so a
 * kernel's tasks are worth a tbex kernel call each, and blocks (baseM / baseN) that stay in cache;
 * every field keeps CANN's meaning (docs/ascendc.md). GetTiling returns 0, or -1 with the reason
 * in GetErrorMessage() (and on stderr) for input it cannot tile, e.g. groups != 1. */
#include <string>

#include "tbex/ascendc/tiling_base.h"
#include "tbex/ascendc/tiling_data.h"

namespace ConvBackpropApi {

class TBEX_ASCENDC_API Conv3dBpFilterTilingBase {
 public:
  Conv3dBpFilterTilingBase() = default;
  explicit Conv3dBpFilterTilingBase(const platform_ascendc::PlatformAscendC&) {}
  explicit Conv3dBpFilterTilingBase(const PlatformInfo& info) { in_.platform = info; }
  virtual ~Conv3dBpFilterTilingBase() = default;

  void SetWeightShape(int64_t cout, int64_t cin, int64_t d, int64_t h, int64_t w);
  void SetInputShape(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w);
  void SetGradOutputShape(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w);
  void SetWeightType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                     ConvCommonApi::ConvDtype dtype);
  void SetInputType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                    ConvCommonApi::ConvDtype dtype);
  void SetGradOutputType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                         ConvCommonApi::ConvDtype dtype);
  void SetPadding(int64_t front, int64_t back, int64_t up, int64_t down, int64_t left, int64_t right);
  void SetStride(int64_t d, int64_t h, int64_t w);
  void SetDilation(int64_t d, int64_t h, int64_t w);
  void SetGroups(int64_t groups);

  const std::string& GetErrorMessage() const { return error_; }

 protected:
  ConvBpTilingInput in_;
  std::string error_;
};

class TBEX_ASCENDC_API Conv3dBpFilterTiling : public Conv3dBpFilterTilingBase {
 public:
  using Conv3dBpFilterTilingBase::Conv3dBpFilterTilingBase;
  int64_t GetTiling(optiling::Conv3DBackpropFilterTilingData& tiling);
  int64_t GetTiling(AscendC::tiling::Conv3DBackpropFilterTilingData& tiling);
};

}  // namespace ConvBackpropApi
