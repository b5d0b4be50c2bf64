#pragma once
/** ConvBackpropApi::ConvType and the contexts both conv-backprop APIs share (CANN's
 * conv3d_bp_config_base.h). */
#include "kernel_operator.h"

namespace ConvBackpropApi {

/** POSITION is `auto`: AscendC::TPosition::GM (CANN's real template) and
 * ConvCommonApi::TPosition::GM (CANN's documents) both compile. Only GM is meaningful. */
template <auto POSITION, ConvCommonApi::ConvFormat FORMAT, class TYPE>
struct ConvType {
  constexpr static auto pos = POSITION;
  constexpr static ConvCommonApi::ConvFormat format = FORMAT;
  using Type = TYPE;
};

/** The accumulator type of an input type. */
template <class T> struct GetDstType;
template <> struct GetDstType<half> { using Type = float; };
template <> struct GetDstType<bfloat16_t> { using Type = float; };
template <> struct GetDstType<float> { using Type = float; };
template <> struct GetDstType<int8_t> { using Type = int32_t; };

template <class A, class B, class C, class D>
struct ConvBpContext {
  using xType = A;
  using cType = C;
  using dType = D;
  using SrcT = typename A::Type;
  using SrcAT = typename A::Type;
  using SrcBT = typename C::Type;
  using DstT = typename D::Type;
  using L0cT = typename GetDstType<SrcT>::Type;
  constexpr static auto formatA = A::format, formatB = B::format, formatC = C::format,
                        formatD = D::format;
  constexpr static auto posA = A::pos, posB = B::pos, posC = C::pos, posD = D::pos;
};

enum class B2Condition : uint8_t { BASEK_LT_HKWK = 0, BASEK_GE_HKWK, HKWK_EQ_ONE };
struct Conv3dConfig {
  B2Condition loadB2Condition = B2Condition::BASEK_LT_HKWK;
  bool enableKernelSplit = false;
};
constexpr Conv3dConfig CONV3D_CFG_DEFAULT = {B2Condition::BASEK_GE_HKWK, false};

}  // namespace ConvBackpropApi
