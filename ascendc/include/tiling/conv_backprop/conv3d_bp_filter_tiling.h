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

class Conv3dBpFilterTilingBase : public ConvBpTilingSetters<void> {
 public:
  using ConvBpTilingSetters<void>::ConvBpTilingSetters;
};

class TBEX_ASCENDC_API Conv3dBpFilterTiling : public Conv3dBpFilterTilingBase {
 public:
  using Conv3dBpFilterTilingBase::Conv3dBpFilterTilingBase;
  int64_t GetTiling(optiling::Conv3DBackpropFilterTilingData& tiling);
  int64_t GetTiling(AscendC::tiling::Conv3DBackpropFilterTilingData& tiling);
};

}  // namespace ConvBackpropApi
