#pragma once
/** Host tiling for Conv3DBackpropInput (CANN's conv3d_bp_input_tiling.h): a single-core tiler.
 * On the CPU it sizes each single shape (singleCoreM rows of Wi) from tbex's cost model and picks
 * cache-sized blocks; every field keeps CANN's meaning, initOutputFlag included (docs/ascendc.md).
 * GetTiling returns 0, or -1 with the reason in GetErrorMessage() (and on stderr). */
#include <string>

#include "tbex/ascendc/tiling_base.h"
#include "tbex/ascendc/tiling_data.h"

namespace ConvBackpropApi {

class Conv3DBpInputTilingBase : public ConvBpTilingSetters<bool> {
 public:
  using ConvBpTilingSetters<bool>::ConvBpTilingSetters;
  /** Stored; the tiler takes the input shape as given and checks it as one convolution. */
  bool SetOutputPadding(int64_t d, int64_t h, int64_t w) {
    set3(in_.output_padding, d, h, w);
    return d >= 0 && h >= 0 && w >= 0;
  }
};

class TBEX_ASCENDC_API Conv3DBpInputTiling : public Conv3DBpInputTilingBase {
 public:
  using Conv3DBpInputTilingBase::Conv3DBpInputTilingBase;
  int64_t GetTiling(optiling::Conv3DBackpropInputTilingData& tiling);
  int64_t GetTiling(AscendC::tiling::Conv3DBackpropInputTilingData& tiling);
};

}  // namespace ConvBackpropApi
