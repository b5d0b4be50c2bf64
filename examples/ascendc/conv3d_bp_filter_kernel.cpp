// dW kernel written as for the NPU (CANN's Conv3DBackpropFilter high-level API): every core takes
// tasks (batch, dout, kd, M block, N block, K block) round-robin and adds its single shapes'
// blocks into the FRACTAL_Z_3D fp32 output (zeroed by the host), as CANN's Conv3dDw does.
#include "conv3d_bp_kernels.h"
#include "lib/conv_backprop/conv3d_bp_filter_api.h"

using namespace AscendC;
using namespace ConvBackpropApi;

template <class T>
__aicore__ inline void conv3d_bp_filter(GM_ADDR x, GM_ADDR dy, GM_ADDR dw, GM_ADDR workspace,
                                        GM_ADDR tiling) {
  (void)workspace;
  GET_TILING_DATA_WITH_STRUCT(Conv3DBackpropFilterTilingData, td, tiling);
  if ASCEND_IS_AIV { return; }
  const TConv3DBpFilterTiling& t = td.dwTiling;
  using XT = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::NDC1HWC0, T>;
  using WST = ConvType<ConvCommonApi::TPosition::GM, ConvCommonApi::ConvFormat::ND, int32_t>;
  using DYT = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::NDC1HWC0, T>;
  using DWT = ConvType<TPosition::GM, ConvCommonApi::ConvFormat::FRACTAL_Z_3D, float>;

  GlobalTensor<T> xGm, dyGm;
  GlobalTensor<float> dwGm;
  xGm.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(x));
  dyGm.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(dy));
  dwGm.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(dw));

  Conv3DBackpropFilter<XT, WST, DYT, DWT> op;
  op.Init(&t);
  const uint64_t c0 = t.channelSize, coutG = (uint64_t)t.cout1G * c0, cinG = (uint64_t)t.cin1G * c0;
  const uint64_t M = coutG, N = cinG * t.hk * t.wk, K = (uint64_t)t.ho * t.wo;
  const uint64_t sM = t.singleCoreCout, sN = t.singleCoreCin * t.hk * t.wk,
                 sK = (uint64_t)t.singleCoreHo * t.wo;
  const uint64_t mC = DivCeil(M, sM), nC = DivCeil(N, sN), kC = DivCeil(K, sK);
  const uint64_t tasks = (uint64_t)t.batch * t.dout * t.dk * mC * nC * kC;
  for (uint64_t task = GetBlockIdx(); task < tasks; task += GetBlockNum()) {
    uint64_t r = task;
    const uint64_t ki = r % kC; r /= kC;
    const uint64_t ni = r % nC; r /= nC;
    const uint64_t mi = r % mC; r /= mC;
    const uint64_t kd = r % t.dk; r /= t.dk;
    const uint64_t dout = r % t.dout; r /= t.dout;
    const uint64_t b = r;
    const int64_t di = (int64_t)dout * t.strideD - t.padFront + (int64_t)kd * t.dilationD;
    if (di < 0 || di >= (int64_t)t.di) continue;
    const uint32_t hoStart = ki * t.singleCoreHo;
    const uint64_t curM = (M - mi * sM) < sM ? M - mi * sM : sM;
    const uint64_t curN = (N - ni * sN) < sN ? N - ni * sN : sN;
    const uint64_t curK = (K - ki * sK) < sK ? K - ki * sK : sK;
    const int64_t hiStart = (int64_t)hoStart * t.strideH - t.padUp;
    const uint64_t offA = (b * t.dout + dout) * coutG * t.ho * t.wo + mi * sM * t.ho * t.wo +
                          (uint64_t)hoStart * t.wo * c0;
    const uint64_t offB = (b * t.di + di) * cinG * t.hi * t.wi + ni * t.singleCoreCin * t.hi * t.wi +
                          (uint64_t)(hiStart > 0 ? hiStart : 0) * t.wi * c0;
    const uint64_t offC = kd * cinG * t.hk * t.wk * coutG + ni * t.singleCoreCin * t.hk * t.wk * coutG +
                          mi * sM * c0;
    op.SetGradOutput(dyGm[offA]);
    op.SetInput(xGm[offB]);
    op.SetSingleShape(curM, curN, curK);
    op.SetStartPosition(hoStart);
    while (op.Iterate()) {
      op.GetTensorC(dwGm[offC]);  // enAtomic = 1: several cores add into the same dW blocks
    }
    op.ctx.isFirstIter_ = true;
  }
  op.End();
}

extern "C" __global__ __aicore__ void conv3d_bp_filter_half(GM_ADDR x, GM_ADDR dy, GM_ADDR dw,
                                                            GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_0);
  conv3d_bp_filter<half>(x, dy, dw, workspace, tiling);
}
extern "C" __global__ __aicore__ void conv3d_bp_filter_bf16(GM_ADDR x, GM_ADDR dy, GM_ADDR dw,
                                                            GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_0);
  conv3d_bp_filter<bfloat16_t>(x, dy, dw, workspace, tiling);
}
