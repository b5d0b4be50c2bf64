// Times the two example Ascend C kernels (examples/ascendc, launched with ICPU_RUN_KF on
// block_dim = threads logical cores) next to tbex's own dW / dX kernel for the same problem at the
// same thread count (TBEX_NUM_THREADS). One JSON line on stdout. Driven by bench/bench_ascendc.py.
//
// usage: tbex_ascendc_bench dw|dx float16|bfloat16 N Cin Cout D H W Kd Kh Kw sd sh sw
//        pf pb pt pbo pl pr dd dh dw threads reps
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "conv3d_bp_kernels.h"
#include "tbex/kernel.h"
#include "tbex/layout.h"
#include "tikicpulib.h"
#include "tiling/conv_backprop/conv3d_bp_filter_tiling.h"
#include "tiling/conv_backprop/conv3d_bp_input_tiling.h"

namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
template <class F>
double median_ms(int reps, F&& f) {
  f();  // warm-up: compiles (or loads from the disk cache)
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double a = now_ms();
    f();
    t.push_back(now_ms() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
size_t count(const std::vector<int64_t>& s) {
  size_t c = 1;
  for (auto v : s) c *= (size_t)v;
  return c;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 26) {
    std::fprintf(stderr, "usage: %s dw|dx float16|bfloat16 N Cin Cout D H W Kd Kh Kw sd sh sw pf pb pt pbo pl pr dd dh dw threads reps\n", argv[0]);
    return 2;
  }
  const bool dw_pass = std::string(argv[1]) == "dw";
  const bool bf16 = std::string(argv[2]) == "bfloat16";
  int64_t v[23];
  for (int i = 0; i < 23; ++i) v[i] = std::atoll(argv[3 + i]);
  tbex::ConvGeometry g;
  g.n = v[0]; g.cin = v[1]; g.cout = v[2];
  g.in = {v[3], v[4], v[5]};
  g.kernel = {v[6], v[7], v[8]};
  g.stride = {v[9], v[10], v[11]};
  g.pads = {v[12], v[13], v[14], v[15], v[16], v[17]};
  g.dilation = {v[18], v[19], v[20]};
  for (int i = 0; i < 3; ++i)
    g.out[i] = (g.in[i] + g.pads[2 * i] + g.pads[2 * i + 1] - (g.kernel[i] - 1) * g.dilation[i] - 1) / g.stride[i] + 1;
  const int64_t threads = v[21];
  const int reps = (int)v[22];
  const tbex::DType dt = bf16 ? tbex::DType::kBFloat16 : tbex::DType::kFloat16;
  const auto cdt = bf16 ? ConvCommonApi::BF16 : ConvCommonApi::FLOAT16;
  const tbex::Dims5 xd{g.n, g.cin, g.in[0], g.in[1], g.in[2]}, dyd{g.n, g.cout, g.out[0], g.out[1], g.out[2]},
      wd{g.cout, g.cin, g.kernel[0], g.kernel[1], g.kernel[2]};
  const size_t x_n = count(tbex::shape_6hd(xd)), dy_n = count(tbex::shape_6hd(dyd)), w_n = count(tbex::shape_fz3d(wd, 1));
  // Inputs: small values in every lane that holds a channel; 0 in padding lanes.
  auto fill = [&](size_t n, const tbex::Dims5& d, bool six_hd) {
    auto* p = (uint8_t*)AscendC::GmAlloc(n * 2);
    std::vector<uint16_t> src((size_t)(d[0] * d[1] * d[2] * d[3] * d[4]));
    for (size_t i = 0; i < src.size(); ++i) src[i] = bf16 ? bfloat16_t(0.01f * (float)(i % 97)).bits : half(0.01f * (float)(i % 97)).bits;
    if (six_hd) tbex::ncdhw_to_6hd(src.data(), p, d, 2);
    else tbex::oidhw_to_fz3d(src.data(), p, d, 1, 2);
    return p;
  };
  auto* x = fill(x_n, xd, true);
  auto* dy = fill(dy_n, dyd, true);
  auto* w = fill(w_n, wd, false);
  auto* ws = (uint8_t*)AscendC::GmAlloc(64);
  double api_ms = 0, own_ms = 0;
  std::string own_schedule;
  auto set = [&](auto& t, ConvCommonApi::ConvDtype weight_dtype) {
    using ConvCommonApi::TPosition;
    t.SetWeightShape(g.cout, g.cin, g.kernel[0], g.kernel[1], g.kernel[2]);
    t.SetInputShape(g.n, g.cin, g.in[0], g.in[1], g.in[2]);
    t.SetGradOutputShape(g.n, g.cout, g.out[0], g.out[1], g.out[2]);
    t.SetWeightType(TPosition::GM, ConvCommonApi::FRACTAL_Z_3D, weight_dtype);
    t.SetInputType(TPosition::GM, ConvCommonApi::NDC1HWC0, cdt);
    t.SetGradOutputType(TPosition::GM, ConvCommonApi::NDC1HWC0, cdt);
    t.SetPadding(g.pads[0], g.pads[1], g.pads[2], g.pads[3], g.pads[4], g.pads[5]);
    t.SetStride(g.stride[0], g.stride[1], g.stride[2]);
    t.SetDilation(g.dilation[0], g.dilation[1], g.dilation[2]);
  };
  std::string tiling_note;
  if (dw_pass) {
    ConvBackpropApi::Conv3dBpFilterTiling tiler;
    set(tiler, ConvCommonApi::FLOAT32);
    AscendC::tiling::Conv3DBackpropFilterTilingData td;
    if (tiler.GetTiling(td) != 0) return 3;
    auto* out = (uint8_t*)AscendC::GmAlloc(w_n * 4);
    api_ms = median_ms(reps, [&] {
      std::memset(out, 0, w_n * 4);  // CANN's operator zeroes dW before the cores add into it
      ICPU_RUN_KF(bf16 ? conv3d_bp_filter_bf16 : conv3d_bp_filter_half, threads, x, dy, out, ws, (uint8_t*)&td);
    });
    tiling_note = "singleCoreHo=" + std::to_string(td.dwTiling.singleCoreHo);
    const auto k = tbex::compile(tbex::make_problem(tbex::OpKind::kBackpropFilter, g, dt, tbex::DType::kFloat32));
    own_schedule = k->schedule_name();
    own_ms = median_ms(reps, [&] { k->run_dense({x, dy}, out); });
    AscendC::GmFree(out);
  } else {
    ConvBackpropApi::Conv3DBpInputTiling tiler;
    set(tiler, cdt);
    AscendC::tiling::Conv3DBackpropInputTilingData td;
    if (tiler.GetTiling(td) != 0) return 3;
    auto* out = (uint8_t*)AscendC::GmAlloc(x_n * 2);
    api_ms = median_ms(reps, [&] {
      if (td.conv3DDxTiling.initOutputFlag == 1) std::memset(out, 0, x_n * 2);
      ICPU_RUN_KF(bf16 ? conv3d_bp_input_bf16 : conv3d_bp_input_half, threads, w, dy, out, ws, (uint8_t*)&td);
    });
    tiling_note = "singleCoreM=" + std::to_string(td.conv3DDxTiling.singleCoreM / td.conv3DDxTiling.wi) + " rows";
    const auto k = tbex::compile(tbex::make_problem(tbex::OpKind::kBackpropInput, g, dt, dt));
    own_schedule = k->schedule_name();
    own_ms = median_ms(reps, [&] { k->run_dense({w, dy}, out); });
    AscendC::GmFree(out);
  }
  std::printf("{\"api_ms\": %.4f, \"tbex_ms\": %.4f, \"gflop\": %.6f, \"tbex_schedule\": \"%s\", \"tiling\": \"%s\"}\n",
              api_ms, own_ms, g.flops() * 1e-9, own_schedule.c_str(), tiling_note.c_str());
  return 0;
}
