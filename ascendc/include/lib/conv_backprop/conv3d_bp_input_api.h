#pragma once
/** ConvBackpropApi::Conv3DBackpropInput: CANN's Ascend C high-level API for the gradient of a
 * 3-D convolution with respect to its input, on the CPU (docs/ascendc.md).
 *
 *   Conv3DBackpropInput<WT, IST, DYT, DXT> op;       // weight, input size, dy, dX ConvTypes
 *   op.Init(&tiling.conv3DDxTiling);
 *   op.SetSingleShape(M, K, N);                      // note the order: M, K, N
 *   op.SetStartPosition(din, hoStart);
 *   op.SetGradOutput(dy[offA]); op.SetWeight(w[offB]);
 *   while (op.Iterate()) op.GetTensorC(dx[offC]);    // enAtomic = 0: overwrite
 *   op.ctx.isFirstIter_ = true;
 *   op.End();
 *
 * M = Hi*Wi pixels of one (batch, din) slice, K = Dk*Cout1*Hk*Wk*C0, N = Cin. */
#include <memory>

#include "lib/conv_backprop/conv3d_bp_config_base.h"
#include "tbex/ascendc/engine.h"

namespace ConvBackpropApi {

template <class WEIGHT_TYPE, class INPUT_SIZE_TYPE, class GRAD_OUTPUT_TYPE, class GRAD_INPUT_TYPE,
          const Conv3dConfig& CFG = CONV3D_CFG_DEFAULT>
struct Conv3DBpInputCfg : ConvBpContext<WEIGHT_TYPE, INPUT_SIZE_TYPE, GRAD_OUTPUT_TYPE, GRAD_INPUT_TYPE> {
  constexpr static Conv3dConfig conv3dConfig_ = CFG;
};

template <class Intf, class Config>
struct Conv3DBpInputImpl {
  struct ContextData : tbex::ascendc::DxCounters {
    AscendC::TPipe pipe_;
    const TConv3DBackpropInputTiling* tiling_ = nullptr;
  };
};

template <class Config_, template <class, class> class Impl>
struct Conv3DBpInputIntf {
  using Config = Config_;
  using Ext = Impl<Conv3DBpInputIntf, Config>;
  using SrcT = typename Config::SrcT;
  using DstT = typename Config::DstT;
  using L0cT = typename Config::L0cT;
  using ContextData = typename Ext::ContextData;
  constexpr static Conv3dConfig conv3dConfig = Config::conv3dConfig_;
  static_assert(std::is_same<SrcT, half>::value || std::is_same<SrcT, bfloat16_t>::value,
                "Conv3DBackpropInput: weight and gradOutput must be half or bfloat16_t");
  static_assert(std::is_same<typename Config::SrcBT, SrcT>::value,
                "Conv3DBackpropInput: gradOutput must have the weight's type");
  static_assert(std::is_same<DstT, half>::value || std::is_same<DstT, bfloat16_t>::value ||
                    std::is_same<DstT, float>::value,
                "Conv3DBackpropInput: gradInput must be half, bfloat16_t or float");
  static_assert(Config::formatD == ConvCommonApi::ConvFormat::NDC1HWC0 ||
                    Config::formatD == ConvCommonApi::ConvFormat::NCDHW,
                "Conv3DBackpropInput: gradInput must be NDC1HWC0 or NCDHW (workspace blocks)");
  static_assert(!conv3dConfig.enableKernelSplit,
                "Conv3DBackpropInput: enableKernelSplit (CANN's stride-split algorithm) is not "
                "part of the public API");

  ContextData ctx;

  Conv3DBpInputIntf()
      : engine_(new tbex::ascendc::DxEngine(
            tbex::ascendc::ElemOf<SrcT>::value, tbex::ascendc::ElemOf<DstT>::value,
            Config::formatD == ConvCommonApi::ConvFormat::NCDHW ? tbex::ascendc::OutFormat::kNCDHW
                                                                : tbex::ascendc::OutFormat::kNDC1HWC0)) {}

  void Init(const TConv3DBackpropInputTiling* __restrict tiling) {
    engine_->init(tiling);
    ctx.tiling_ = tiling;
    ctx.isFirstIter_ = 1;
  }
  void SetWeight(const AscendC::GlobalTensor<SrcT>& weight) { engine_->set_weight(weight.GetPhyAddr()); }
  void SetGradOutput(const AscendC::GlobalTensor<SrcT>& gradOutput) {
    engine_->set_grad_output(gradOutput.GetPhyAddr());
  }
  void SetSingleShape(uint64_t singleShapeM, uint64_t singleShapeK, uint32_t singleShapeN) {
    engine_->set_single_shape(singleShapeM, singleShapeK, singleShapeN);
  }
  void SetStartPosition(uint32_t curDinStartIdx, int32_t curHoStartIdx) {
    engine_->set_start_position(curDinStartIdx, curHoStartIdx);
  }
  template <bool sync = true>
  bool Iterate(bool enPartialSum = false) {
    (void)enPartialSum;
    return engine_->iterate(ctx);
  }
  template <bool sync = true>
  void GetTensorC(const AscendC::GlobalTensor<DstT>& output, uint8_t enAtomic = 0,
                  bool enSequentialWrite = false) {
    engine_->get_tensor_c(ctx, output.GetPhyAddr(), enAtomic, enSequentialWrite);
  }
  void End() { engine_->end(); }

 private:
  std::unique_ptr<tbex::ascendc::DxEngine> engine_;
};

template <class WEIGHT_TYPE, class INPUT_SIZE_TYPE, class GRAD_OUTPUT_TYPE, class GRAD_INPUT_TYPE>
using Conv3DBackpropInput =
    Conv3DBpInputIntf<Conv3DBpInputCfg<WEIGHT_TYPE, INPUT_SIZE_TYPE, GRAD_OUTPUT_TYPE, GRAD_INPUT_TYPE,
                                       CONV3D_CFG_DEFAULT>,
                      Conv3DBpInputImpl>;

}  // namespace ConvBackpropApi
