// dX kernel written as for the NPU (CANN's Conv3DBackpropInput high-level API): tasks (batch, din,
// M block of Hi rows, N block of Cin) round-robin over the cores; each single shape overwrites its
// NDC1HWC0 output (the host zeroes dx first when the tiling's initOutputFlag is 1).
#include "conv3d_bp_kernels.h"
#include "lib/conv_backprop/conv3d_bp_input_api.h"

using namespace AscendC;
using namespace ConvBackpropApi;

template <class T>
__aicore__ inline void conv3d_bp_input(GM_ADDR w, GM_ADDR dy, GM_ADDR dx, GM_ADDR workspace,
                                       GM_ADDR tiling) {
  (void)workspace;
  GET_TILING_DATA_WITH_STRUCT(Conv3DBackpropInputTilingData, td, tiling);
  if ASCEND_IS_AIV { return; }
  const TConv3DBackpropInputTiling& t = td.conv3DDxTiling;
  using WT = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::FRACTAL_Z_3D, T>;
  using IST = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::ND, int32_t>;
  using DYT = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::NDC1HWC0, T>;
  using DXT = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::NDC1HWC0, T>;

  GlobalTensor<T> wGm, dyGm, dxGm;
  wGm.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(w));
  dyGm.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(dy));
  dxGm.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(dx));

  Conv3DBackpropInput<WT, IST, DYT, DXT> op;
  op.Init(&t);
  const uint64_t c0 = t.c0, sHi = t.singleCoreM / t.wi, sM = sHi * t.wi,
                 sN = (uint64_t)t.singleCoreCin1 * c0;
  const uint64_t K = (uint64_t)t.dk * t.cout1 * t.hk * t.wk * c0;
  const uint64_t HW = (uint64_t)t.hi * t.wi;
  const uint64_t mC = DivCeil(HW, sM), nC = DivCeil((uint64_t)t.cin1 * c0, sN);
  const uint64_t tasks = (uint64_t)t.batch * t.di * mC * nC;
  for (uint64_t task = GetBlockIdx(); task < tasks; task += GetBlockNum()) {
    uint64_t r = task;
    const uint64_t ni = r % nC; r /= nC;
    const uint64_t d = r % t.di; r /= t.di;
    const uint64_t b = r % t.batch; r /= t.batch;
    const uint64_t mi = r;
    const uint64_t curM = mi == mC - 1 ? HW - mi * sM : sM;
    const uint64_t curN = ni == nC - 1 ? t.cin - ni * sN : sN;
    const int32_t hoStart = (int32_t)(mi * sHi) - (int32_t)t.backpropPadUp;
    const uint32_t aligned = hoStart < 0 ? 0 : DivCeil((uint32_t)hoStart, t.strideH);
    if (aligned >= t.ho) continue;  // no dy row reaches these pixels (dx was zeroed)
    const uint64_t offA = b * t.dout * t.cout1 * t.ho * t.wo * c0 + (uint64_t)aligned * t.wo * c0;
    const uint64_t offB = ni * t.singleCoreCin1 * t.hk * t.wk * t.cout1G * c0 * c0;
    const uint64_t offC = b * t.di * t.cin1 * HW * c0 + ni * t.singleCoreCin1 * HW * c0 + mi * sHi * t.wi * c0;
    op.SetSingleShape(curM, K, (uint32_t)curN);
    op.SetStartPosition((uint32_t)d, hoStart);
    op.SetGradOutput(dyGm[offA]);
    op.SetWeight(wGm[offB]);
    while (op.Iterate()) {
      op.GetTensorC(dxGm[offC]);  // enAtomic = 0: overwrite
    }
    op.ctx.isFirstIter_ = true;
  }
  op.End();
}

extern "C" __global__ __aicore__ void conv3d_bp_input_half(GM_ADDR w, GM_ADDR dy, GM_ADDR dx,
                                                           GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_1);
  conv3d_bp_input<half>(w, dy, dx, workspace, tiling);
}
extern "C" __global__ __aicore__ void conv3d_bp_input_bf16(GM_ADDR w, GM_ADDR dy, GM_ADDR dx,
                                                           GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_1);
  conv3d_bp_input<bfloat16_t>(w, dy, dx, workspace, tiling);
}
