// Host side of the two Ascend C example kernels, as an Ascend C user writes it: describe the
// problem to the host tiler, get the tiling struct, allocate global memory, launch the kernel on
// logical cores with ICPU_RUN_KF (Ascend's CPU debug-mode launch) and read the result back.
// The program checks both gradients against a float64 reference and prints "ascendc_example: OK".
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "conv3d_bp_kernels.h"
#include "tbex/layout.h"
#include "tikicpulib.h"
#include "tiling/conv_backprop/conv3d_bp_filter_tiling.h"
#include "tiling/conv_backprop/conv3d_bp_input_tiling.h"

namespace {
// The convolution: N=2, Cin=32, Cout=48, 6x14x14 input, 3x3x3 kernel, stride (1, 2, 2), pad 1.
constexpr int64_t N = 2, CIN = 32, COUT = 48, DI = 6, HI = 14, WI = 14, K = 3;
constexpr int64_t SD = 1, SH = 2, SW = 2, PAD = 1;
constexpr int64_t DO = (DI + 2 * PAD - K) / SD + 1, HO = (HI + 2 * PAD - K) / SH + 1,
                  WO = (WI + 2 * PAD - K) / SW + 1;
constexpr int64_t BLOCK_DIM = 8;

template <class Tiler>
void describe(Tiler& t, ConvCommonApi::ConvDtype weight_dtype) {
  using ConvCommonApi::TPosition;
  t.SetWeightShape(COUT, CIN, K, K, K);
  t.SetInputShape(N, CIN, DI, HI, WI);
  t.SetGradOutputShape(N, COUT, DO, HO, WO);
  t.SetWeightType(TPosition::GM, ConvCommonApi::FRACTAL_Z_3D, weight_dtype);
  t.SetInputType(TPosition::GM, ConvCommonApi::NDC1HWC0, ConvCommonApi::FLOAT16);
  t.SetGradOutputType(TPosition::GM, ConvCommonApi::NDC1HWC0, ConvCommonApi::FLOAT16);
  t.SetPadding(PAD, PAD, PAD, PAD, PAD, PAD);
  t.SetStride(SD, SH, SW);
  t.SetDilation(1, 1, 1);
}

size_t count(const std::vector<int64_t>& shape) {
  size_t c = 1;
  for (int64_t v : shape) c *= (size_t)v;
  return c;
}
}  // namespace

int main() {
  // Operands in NCDHW / OIDHW, rounded to half.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto make = [&](size_t n) {
    std::vector<half> v(n);
    for (auto& e : v) e = half(u(rng));
    return v;
  };
  const tbex::Dims5 xd{N, CIN, DI, HI, WI}, dyd{N, COUT, DO, HO, WO}, wd{COUT, CIN, K, K, K};
  const auto x = make((size_t)(N * CIN * DI * HI * WI)), dy = make((size_t)(N * COUT * DO * HO * WO)),
             w = make((size_t)(COUT * CIN * K * K * K));

  // float64 references: dW[co, ci, k] and dX[n, ci, i] from the defining sums.
  std::vector<double> ref_dw(w.size(), 0.0), ref_dx(x.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < COUT; ++co)
      for (int64_t od = 0; od < DO; ++od)
        for (int64_t oh = 0; oh < HO; ++oh)
          for (int64_t ow = 0; ow < WO; ++ow) {
            const double g = (float)dy[(size_t)((((n * COUT + co) * DO + od) * HO + oh) * WO + ow)];
            for (int64_t kd = 0; kd < K; ++kd)
              for (int64_t kh = 0; kh < K; ++kh)
                for (int64_t kw = 0; kw < K; ++kw) {
                  const int64_t id = od * SD - PAD + kd, ih = oh * SH - PAD + kh, iw = ow * SW - PAD + kw;
                  if (id < 0 || id >= DI || ih < 0 || ih >= HI || iw < 0 || iw >= WI) continue;
                  for (int64_t ci = 0; ci < CIN; ++ci) {
                    const size_t xi = (size_t)((((n * CIN + ci) * DI + id) * HI + ih) * WI + iw);
                    const size_t wi = (size_t)((((co * CIN + ci) * K + kd) * K + kh) * K + kw);
                    ref_dw[wi] += g * (float)x[xi];
                    ref_dx[xi] += g * (float)w[wi];
                  }
                }
          }

  // ---- dW: tiling, global memory, launch.
  ConvBackpropApi::Conv3dBpFilterTiling dw_tiler;
  describe(dw_tiler, ConvCommonApi::FLOAT32);
  AscendC::tiling::Conv3DBackpropFilterTilingData dw_td;
  if (dw_tiler.GetTiling(dw_td) != 0) return 1;
  const size_t x_bytes = count(tbex::shape_6hd(xd)) * 2, dy_bytes = count(tbex::shape_6hd(dyd)) * 2;
  const size_t dw_bytes = count(tbex::shape_fz3d(wd, 1)) * 4;
  auto* xg = (uint8_t*)AscendC::GmAlloc(x_bytes);
  auto* dyg = (uint8_t*)AscendC::GmAlloc(dy_bytes);
  auto* dwg = (uint8_t*)AscendC::GmAlloc(dw_bytes);  // zeroed: the kernel adds into it
  auto* ws = (uint8_t*)AscendC::GmAlloc(16 * 1024 * 1024);
  auto* dw_tiling = (uint8_t*)AscendC::GmAlloc(sizeof(dw_td));
  tbex::ncdhw_to_6hd(x.data(), xg, xd, 2);
  tbex::ncdhw_to_6hd(dy.data(), dyg, dyd, 2);
  std::memcpy(dw_tiling, &dw_td, sizeof(dw_td));
  ICPU_RUN_KF(conv3d_bp_filter_half, BLOCK_DIM, xg, dyg, dwg, ws, dw_tiling);
  std::vector<float> dw(w.size());
  tbex::oidhw_from_fz3d(dwg, dw.data(), wd, 1, 4);

  // ---- dX.
  ConvBackpropApi::Conv3DBpInputTiling dx_tiler;
  describe(dx_tiler, ConvCommonApi::FLOAT16);
  AscendC::tiling::Conv3DBackpropInputTilingData dx_td;
  if (dx_tiler.GetTiling(dx_td) != 0) return 1;
  const size_t w_bytes = count(tbex::shape_fz3d(wd, 1)) * 2;
  auto* wg = (uint8_t*)AscendC::GmAlloc(w_bytes);
  auto* dxg = (uint8_t*)AscendC::GmAlloc(x_bytes);  // zeroed, as initOutputFlag asks
  auto* dx_tiling = (uint8_t*)AscendC::GmAlloc(sizeof(dx_td));
  tbex::oidhw_to_fz3d(w.data(), wg, wd, 1, 2);
  std::memcpy(dx_tiling, &dx_td, sizeof(dx_td));
  ICPU_RUN_KF(conv3d_bp_input_half, BLOCK_DIM, wg, dyg, dxg, ws, dx_tiling);
  std::vector<half> dx(x.size());
  tbex::ncdhw_from_6hd(dxg, dx.data(), xd, 2);

  // ---- Check: dW within 1e-5 of max|ref|; dX within one half ulp of the rounded reference.
  double dw_err = 0, dw_max = 0, dx_err = 0, dx_max = 0;
  for (size_t i = 0; i < dw.size(); ++i) {
    dw_err = std::fmax(dw_err, std::fabs(dw[i] - ref_dw[i]));
    dw_max = std::fmax(dw_max, std::fabs(ref_dw[i]));
  }
  for (size_t i = 0; i < dx.size(); ++i) {
    dx_err = std::fmax(dx_err, std::fabs((float)dx[i] - (float)half((float)ref_dx[i])));
    dx_max = std::fmax(dx_max, std::fabs(ref_dx[i]));
  }
  half top((float)dx_max);
  const double ulp = (float)half::from_bits((uint16_t)(top.bits + 1)) - (float)top;
  std::printf("dW: max|err| / max|ref| = %.3g (tiling singleCoreHo %u, baseM %u, baseN %u)\n",
              dw_err / dw_max, dw_td.dwTiling.singleCoreHo, dw_td.dwTiling.baseM, dw_td.dwTiling.baseN);
  std::printf("dX: max|err| = %.3g half ulps (tiling singleCoreM %lu, initOutputFlag %d)\n", dx_err / ulp,
              (unsigned long)dx_td.conv3DDxTiling.singleCoreM, dx_td.conv3DDxTiling.initOutputFlag);
  const bool ok = dw_err <= 1e-5 * dw_max && dx_err <= ulp;
  for (void* p : {(void*)xg, (void*)dyg, (void*)dwg, (void*)ws, (void*)dw_tiling, (void*)wg, (void*)dxg,
                  (void*)dx_tiling})
    AscendC::GmFree(p);
  std::printf("ascendc_example: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
