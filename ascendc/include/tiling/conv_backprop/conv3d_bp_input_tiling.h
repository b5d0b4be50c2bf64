#pragma once
/** Host tiling for Conv3DBackpropInput (CANN's conv3d_bp_input_tiling.h): a single-core tiler.
 * On the CPU it sizes each single shape (singleCoreM rows of Wi) from tbex's cost model and picks
 * cache-sized blocks; every field keeps CANN's meaning, initOutputFlag included (docs/ascendc.md).
 * GetTiling returns 0, or -1 with the reason in GetErrorMessage() (and on stderr). */
#include <string>

#include "tbex/ascendc/tiling_base.h"
#include "tbex/ascendc/tiling_data.h"

namespace ConvBackpropApi {

class TBEX_ASCENDC_API Conv3DBpInputTilingBase {
 public:
  Conv3DBpInputTilingBase() = default;
  explicit Conv3DBpInputTilingBase(const platform_ascendc::PlatformAscendC&) {}
  explicit Conv3DBpInputTilingBase(const PlatformInfo& info) { in_.platform = info; }
  virtual ~Conv3DBpInputTilingBase() = default;

  bool SetWeightShape(int64_t cout, int64_t cin, int64_t d, int64_t h, int64_t w);
  bool SetInputShape(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w);
  bool SetGradOutputShape(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w);
  void SetWeightType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                     ConvCommonApi::ConvDtype dtype);
  void SetInputType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                    ConvCommonApi::ConvDtype dtype);
  void SetGradOutputType(ConvCommonApi::TPosition pos, ConvCommonApi::ConvFormat format,
                         ConvCommonApi::ConvDtype dtype);
  void SetPadding(int64_t front, int64_t back, int64_t up, int64_t down, int64_t left, int64_t right);
  void SetStride(int64_t d, int64_t h, int64_t w);
  void SetDilation(int64_t d, int64_t h, int64_t w);
  bool SetOutputPadding(int64_t d, int64_t h, int64_t w);
  void SetGroups(int64_t groups);

  const std::string& GetErrorMessage() const { return error_; }

 protected:
  ConvBpTilingInput in_;
  std::string error_;
};

class TBEX_ASCENDC_API Conv3DBpInputTiling : public Conv3DBpInputTilingBase {
 public:
  using Conv3DBpInputTilingBase::Conv3DBpInputTilingBase;
  int64_t GetTiling(optiling::Conv3DBackpropInputTilingData& tiling);
  int64_t GetTiling(AscendC::tiling::Conv3DBackpropInputTilingData& tiling);
};

}  // namespace ConvBackpropApi
