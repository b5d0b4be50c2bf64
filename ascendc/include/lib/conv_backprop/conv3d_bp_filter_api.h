#pragma once
/** ConvBackpropApi::Conv3DBackpropFilter: CANN's Ascend C high-level API for the gradient of a
 * 3-D convolution with respect to its weight, on the CPU (docs/ascendc.md).
 *
 *   Conv3DBackpropFilter<XT, WST, DYT, DWT> op;   // x, weight size, dy, dW ConvTypes
 *   op.Init(&tiling.dwTiling);
 *   op.SetGradOutput(dy[offA]); op.SetInput(x[offB]);
 *   op.SetSingleShape(M, N, K); op.SetStartPosition(hoStart);
 *   while (op.Iterate()) op.GetTensorC(dw[offC]);   // enAtomic = 1: fp32 atomic add
 *   op.ctx.isFirstIter_ = true;                     // before the next single shape
 *   op.End();
 *
 * M = Cout, N = Cin*Hk*Wk, K = Ho rows * Wo of one (batch, dout, kd) slice. */
#include <memory>

#include "lib/conv_backprop/conv3d_bp_config_base.h"
#include "tbex/ascendc/engine.h"

namespace ConvBackpropApi {

template <class INPUT_TYPE, class WEIGHT_TYPE, class GRAD_OUTPUT_TYPE, class GRAD_WEIGHT_TYPE>
struct Conv3DBpFilterCfg : ConvBpContext<INPUT_TYPE, WEIGHT_TYPE, GRAD_OUTPUT_TYPE, GRAD_WEIGHT_TYPE> {};

template <class Intf, class Config>
struct Conv3DBpFilterImpl {
  /** ctx: the members CANN's kernels touch. */
  struct ContextData : tbex::ascendc::IterCounters {
    AscendC::TPipe pipe_;
    const TConv3DBpFilterTiling* tiling_ = nullptr;
  };
};

template <class Config_, template <class, class> class Impl>
struct Conv3DBpFilterIntf {
  using Config = Config_;
  using Ext = Impl<Conv3DBpFilterIntf, Config>;
  using SrcT = typename Config::SrcT;
  using DstT = typename Config::DstT;
  using L0cT = typename Config::L0cT;
  using ContextData = typename Ext::ContextData;
  static_assert(std::is_same<SrcT, half>::value || std::is_same<SrcT, bfloat16_t>::value,
                "Conv3DBackpropFilter: input and gradOutput must be half or bfloat16_t");
  static_assert(std::is_same<typename Config::SrcBT, SrcT>::value,
                "Conv3DBackpropFilter: gradOutput must have the input's type");
  static_assert(std::is_same<DstT, float>::value, "Conv3DBackpropFilter: gradWeight must be float");
  static_assert(Config::formatD == ConvCommonApi::ConvFormat::FRACTAL_Z_3D,
                "Conv3DBackpropFilter: gradWeight must be FRACTAL_Z_3D (the NPU writes nothing "
                "for any other format)");

  ContextData ctx;

  Conv3DBpFilterIntf() : engine_(new tbex::ascendc::DwEngine(tbex::ascendc::ElemOf<SrcT>::value)) {}

  void Init(const TConv3DBpFilterTiling* __restrict tiling) {
    engine_->init(tiling);
    ctx.tiling_ = tiling;
    ctx.isFirstIter_ = 1;
  }
  void SetInput(const AscendC::GlobalTensor<SrcT>& input) { engine_->set_input(input.GetPhyAddr()); }
  void SetGradOutput(const AscendC::GlobalTensor<SrcT>& gradOutput) {
    engine_->set_grad_output(gradOutput.GetPhyAddr());
  }
  void SetSingleShape(uint64_t singleCoreM, uint64_t singleCoreN, uint64_t singleCoreK) {
    engine_->set_single_shape(singleCoreM, singleCoreN, singleCoreK);
  }
  void SetStartPosition(uint32_t hoStartIdx) { engine_->set_start_position(hoStartIdx); }
  template <bool sync = true>
  bool Iterate(bool enPartialSum = false) {
    (void)enPartialSum;
    return engine_->iterate(ctx);
  }
  template <bool sync = true>
  void GetTensorC(const AscendC::GlobalTensor<DstT>& output, uint8_t enAtomic = 1,
                  bool enSequentialWrite = false) {
    engine_->get_tensor_c(ctx, output.GetPhyAddr(), enAtomic, enSequentialWrite);
  }
  void End() { engine_->end(); }

 private:
  std::unique_ptr<tbex::ascendc::DwEngine> engine_;
};

template <class INPUT_TYPE, class WEIGHT_TYPE, class GRAD_OUTPUT_TYPE, class GRAD_WEIGHT_TYPE>
using Conv3DBackpropFilter =
    Conv3DBpFilterIntf<Conv3DBpFilterCfg<INPUT_TYPE, WEIGHT_TYPE, GRAD_OUTPUT_TYPE, GRAD_WEIGHT_TYPE>,
                       Conv3DBpFilterImpl>;

}  // namespace ConvBackpropApi
