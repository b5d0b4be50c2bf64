#pragma once
/** The tiling structures of Conv3DBackpropFilter / Conv3DBackpropInput, field by field as CANN
 * defines them (asc-devkit conv3d_bp_{filter,input}_tilingdata.h), in the three spellings code
 * uses: the plain kernel structs at global scope (what CANN's generated kernel_tiling.h gives),
 * AscendC::tiling:: (the host's plain-struct twin) and optiling:: (set_x / get_x accessors,
 * SaveToBuffer). Sizes: 216 and 280 bytes. */
#include <cstddef>
#include <cstdint>
#include <cstring>

// X(type, name) per field, in declaration order.
#define TBEX_ASCENDC_DW_TILING_FIELDS(X)                                                         \
  X(uint32_t, batch) X(uint32_t, cin) X(uint32_t, cout) X(uint32_t, cin1G) X(uint32_t, cout1G)  \
  X(uint32_t, dout) X(uint32_t, ho) X(uint32_t, wo) X(uint32_t, di) X(uint32_t, hi)             \
  X(uint32_t, wi) X(uint32_t, dk) X(uint32_t, hk) X(uint32_t, wk) X(uint32_t, group)            \
  X(uint32_t, strideD) X(uint32_t, strideH) X(uint32_t, strideW) X(uint32_t, padFront)          \
  X(uint32_t, padBack) X(uint32_t, padUp) X(uint32_t, padDown) X(uint32_t, padLeft)             \
  X(uint32_t, padRight) X(uint32_t, dilationD) X(uint32_t, dilationH) X(uint32_t, dilationW)    \
  X(uint32_t, channelSize) X(uint32_t, al0Pbuffer) X(uint32_t, bl0Pbuffer)                      \
  X(uint32_t, cl0Pbuffer) X(uint32_t, al1Pbuffer) X(uint32_t, bl1Pbuffer) X(uint32_t, baseM)    \
  X(uint32_t, baseK) X(uint32_t, baseN) X(uint32_t, m0) X(uint32_t, k0) X(uint32_t, n0)         \
  X(uint32_t, stepM) X(uint32_t, stepN) X(uint32_t, stepKa) X(uint32_t, stepKb)                 \
  X(uint32_t, iterateOrder) X(uint32_t, bl1Bound) X(uint32_t, hf32Flag)                         \
  X(uint32_t, singleCoreDk) X(uint32_t, singleCoreGroup) X(uint32_t, singleCoreCout)            \
  X(uint32_t, singleCoreHo) X(uint64_t, singleCoreBatch) X(uint64_t, singleCoreCin)

#define TBEX_ASCENDC_DX_TILING_FIELDS(X)                                                         \
  X(uint32_t, batch) X(uint32_t, cin) X(uint32_t, cout) X(uint32_t, cout1) X(uint32_t, cin1)    \
  X(uint32_t, cout1G) X(uint32_t, cin1G) X(uint32_t, c0) X(uint32_t, c0Bits) X(uint32_t, dout)  \
  X(uint32_t, ho) X(uint32_t, wo) X(uint32_t, di) X(uint32_t, hi) X(uint32_t, wi)               \
  X(uint32_t, dk) X(uint32_t, hk) X(uint32_t, wk) X(uint32_t, group) X(uint32_t, strideD)       \
  X(uint32_t, strideH) X(uint32_t, strideW) X(uint32_t, padFront) X(uint32_t, padBack)          \
  X(uint32_t, padUp) X(uint32_t, padDown) X(uint32_t, padLeft) X(uint32_t, padRight)            \
  X(uint32_t, backpropPadTail) X(uint32_t, backpropPadUp) X(uint32_t, backpropPadDown)          \
  X(uint32_t, backpropPadLeft) X(uint32_t, backpropPadRight) X(uint32_t, dilationD)             \
  X(uint32_t, dilationH) X(uint32_t, dilationW) X(uint32_t, al0Pbuffer) X(uint32_t, bl0Pbuffer) \
  X(uint32_t, cl0Pbuffer) X(uint32_t, al1Pbuffer) X(uint32_t, bl1Pbuffer)                       \
  X(uint32_t, singleCoreGroup) X(uint32_t, singleCoreCout) X(uint32_t, singleCoreCout1)         \
  X(uint32_t, singleCoreCin1) X(uint32_t, singleCoreDin) X(uint32_t, singleCoreHo)              \
  X(uint32_t, baseM) X(uint32_t, baseK) X(uint32_t, baseN) X(uint32_t, baseD)                   \
  X(uint32_t, baseBatch) X(uint32_t, baseGroup) X(uint32_t, stepM) X(uint32_t, stepN)           \
  X(uint32_t, stepKa) X(uint32_t, stepKb) X(uint32_t, stepBatch) X(uint32_t, stepGroup)         \
  X(uint32_t, iterateOrder) X(int32_t, hf32Flag) X(int32_t, initOutputFlag)                     \
  X(int32_t, reserved) X(uint64_t, singleCoreBatch) X(uint64_t, singleCoreM)                    \
  X(uint64_t, singleCoreCin)

#define TBEX_ASCENDC_FIELD(type, name) type name = 0;

/** dW tiling (kernel side: Init(&tilingData.dwTiling)). */
struct TConv3DBpFilterTiling {
  TBEX_ASCENDC_DW_TILING_FIELDS(TBEX_ASCENDC_FIELD)
};
struct Conv3DBpFilterParams {
  uint32_t totalL1Size = 0;
};
struct TConv3DBpFilterBasicBlockTiling {
  uint32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
};
struct Conv3DBackpropFilterTilingData {
  Conv3DBpFilterParams params;
  TConv3DBpFilterTiling dwTiling;
  TConv3DBpFilterBasicBlockTiling basicBlockTiling;
};

/** dX tiling (kernel side: Init(&tilingData.conv3DDxTiling)). 4 bytes of padding sit before
 * singleCoreBatch, as in CANN's natural layout. */
struct TConv3DBackpropInputTiling {
  TBEX_ASCENDC_DX_TILING_FIELDS(TBEX_ASCENDC_FIELD)
};
struct Conv3DBackpropInputTilingData {
  TConv3DBackpropInputTiling conv3DDxTiling;
};

static_assert(sizeof(TConv3DBpFilterTiling) == 216, "TConv3DBpFilterTiling is 216 bytes in CANN");
static_assert(sizeof(TConv3DBackpropInputTiling) == 280,
              "TConv3DBackpropInputTiling is 280 bytes in CANN");

namespace AscendC::tiling {
using ::Conv3DBackpropFilterTilingData;
using ::Conv3DBackpropInputTilingData;
using ::Conv3DBpFilterParams;
using ::TConv3DBackpropInputTiling;
using ::TConv3DBpFilterBasicBlockTiling;
using ::TConv3DBpFilterTiling;
}  // namespace AscendC::tiling

#define TBEX_ASCENDC_ACCESSORS(type, name)          \
  void set_##name(type v) { this->name = v; }     \
  type get_##name() const { return this->name; }

/** optiling: TILING_DATA_DEF-style classes over the same layout. */
namespace optiling {
struct TConv3DBpFilterTiling : ::TConv3DBpFilterTiling {
  TBEX_ASCENDC_DW_TILING_FIELDS(TBEX_ASCENDC_ACCESSORS)
};
struct Conv3DBpFilterParams : ::Conv3DBpFilterParams {
  TBEX_ASCENDC_ACCESSORS(uint32_t, totalL1Size)
};
struct TConv3DBpFilterBasicBlockTiling : ::TConv3DBpFilterBasicBlockTiling {
  TBEX_ASCENDC_ACCESSORS(uint32_t, singleCoreM)
  TBEX_ASCENDC_ACCESSORS(uint32_t, singleCoreN)
  TBEX_ASCENDC_ACCESSORS(uint32_t, singleCoreK)
};
struct TConv3DBackpropInputTiling : ::TConv3DBackpropInputTiling {
  TBEX_ASCENDC_DX_TILING_FIELDS(TBEX_ASCENDC_ACCESSORS)
};

/** Copies the plain struct of `t` into buf (capacity bytes); false when it does not fit. */
template <class T>
bool save_plain(const T& t, void* buf, size_t capacity) {
  const auto p = t.plain();
  if (buf == nullptr || capacity < sizeof(p)) return false;
  std::memcpy(buf, &p, sizeof(p));
  return true;
}

struct Conv3DBackpropFilterTilingData {
  Conv3DBpFilterParams params;
  TConv3DBpFilterTiling dwTiling;
  TConv3DBpFilterBasicBlockTiling basicBlockTiling;

  ::Conv3DBackpropFilterTilingData plain() const {
    ::Conv3DBackpropFilterTilingData p;
    p.params = params;
    p.dwTiling = dwTiling;
    p.basicBlockTiling = basicBlockTiling;
    return p;
  }
  size_t GetDataSize() const { return sizeof(::Conv3DBackpropFilterTilingData); }
  bool SaveToBuffer(void* buf, size_t capacity) const { return save_plain(*this, buf, capacity); }
};

struct Conv3DBackpropInputTilingData {
  TConv3DBackpropInputTiling conv3DDxTiling;

  ::Conv3DBackpropInputTilingData plain() const {
    ::Conv3DBackpropInputTilingData p;
    p.conv3DDxTiling = conv3DDxTiling;
    return p;
  }
  size_t GetDataSize() const { return sizeof(::Conv3DBackpropInputTilingData); }
  bool SaveToBuffer(void* buf, size_t capacity) const { return save_plain(*this, buf, capacity); }
};
}  // namespace optiling
