/** The host tilers. Shapes are checked by building the tbex Problem the op is (one set of rules,
 * docs/validation.md), then the CANN-specific limits; the per-core split comes from tbex's cost
 * model: a single shape is made as large as keeps enough tasks for the cores, and no smaller
 * than a kernel call is worth. */
#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>

#include "engine_common.h"
#include "tbex/select.h"
#include "tbex/thread_pool.h"
#include "tiling/conv_backprop/conv3d_bp_filter_tiling.h"
#include "tiling/conv_backprop/conv3d_bp_input_tiling.h"

namespace ConvBackpropApi {
namespace {
using tbex::ceil_div;

struct Failure {
  std::string message;
};
[[noreturn]] void reject(const std::string& m) { throw Failure{m}; }

tbex::DType src_dtype(const ConvTypeDesc& t, const char* name) {
  if (t.dtype == ConvCommonApi::FLOAT16) return tbex::DType::kFloat16;
  if (t.dtype == ConvCommonApi::BF16) return tbex::DType::kBFloat16;
  reject(std::string(name) + " dtype must be FLOAT16 or BF16, got " + std::to_string((int)t.dtype));
}

void check_format(const ConvTypeDesc& t, ConvCommonApi::ConvFormat want, const char* name,
                  const char* want_name) {
  if (t.set && t.format != want)
    reject(std::string(name) + " format must be " + want_name + ", got " + std::to_string((int)t.format));
}

/** The forward convolution the setters describe (NCDHW), as tbex checks it. */
tbex::ConvGeometry geometry(const ConvBpTilingInput& in) {
  if (!in.weight_set || !in.input_set || !in.grad_out_set)
    reject("SetWeightShape, SetInputShape and SetGradOutputShape must all be called");
  for (int i = 0; i < 5; ++i)
    if (in.weight[i] <= 0 || in.input[i] <= 0 || in.grad_out[i] <= 0)
      reject("every shape value must be > 0");
  if (in.groups != 1)
    reject("groups must be 1 (the host tiling of this API takes one group), got " + std::to_string(in.groups));
  if (in.input[0] != in.grad_out[0]) reject("input and gradOutput batch differ");
  if (in.weight[1] != in.input[1]) reject("weight Cin and input C differ");
  if (in.weight[0] != in.grad_out[1]) reject("weight Cout and gradOutput C differ");
  tbex::ConvGeometry g;
  g.n = in.input[0];
  g.cin = in.input[1];
  g.cout = in.weight[0];
  for (int i = 0; i < 3; ++i) {
    g.in[i] = in.input[2 + i];
    g.out[i] = in.grad_out[2 + i];
    g.kernel[i] = in.weight[2 + i];
    g.stride[i] = in.strides[i];
    g.dilation[i] = in.dilations[i];
  }
  for (int i = 0; i < 6; ++i) g.pads[i] = in.pads[i];
  for (int64_t v : {g.n, g.cin, g.cout, g.in[0], g.in[1], g.in[2], g.out[0], g.out[1], g.out[2]})
    if (v > (int64_t)std::numeric_limits<uint32_t>::max()) reject("a size does not fit the tiling's uint32 fields");
  return g;
}

/** The fields both tilings spell alike: sizes, strides, pads, dilations of the convolution. */
template <class T>
void fill_geometry(T& t, const tbex::ConvGeometry& g) {
  t.batch = g.n; t.cin = g.cin; t.cout = g.cout;
  t.dout = g.out[0]; t.ho = g.out[1]; t.wo = g.out[2];
  t.di = g.in[0]; t.hi = g.in[1]; t.wi = g.in[2];
  t.dk = g.kernel[0]; t.hk = g.kernel[1]; t.wk = g.kernel[2];
  t.group = 1;
  t.strideD = g.stride[0]; t.strideH = g.stride[1]; t.strideW = g.stride[2];
  t.padFront = g.pads[0]; t.padBack = g.pads[1]; t.padUp = g.pads[2]; t.padDown = g.pads[3];
  t.padLeft = g.pads[4]; t.padRight = g.pads[5];
  t.dilationD = g.dilation[0]; t.dilationH = g.dilation[1]; t.dilationW = g.dilation[2];
}

/** Largest single shape (in rows of `rows_total`) whose task count `tasks(rows)` still gives every
 * core a few tasks, but not smaller than a kernel call is worth by the cost model. */
int64_t choose_rows(int64_t rows_total, const std::function<int64_t(int64_t)>& tasks,
                    const std::function<double(int64_t)>& predicted_ms) {
  const int64_t want_tasks = 4 * (int64_t)tbex::num_threads();
  constexpr double kMinTaskMs = 0.05;  // a task below this is mostly call overhead
  int64_t rows = rows_total;
  while (rows > 1 && tasks(rows) < want_tasks) {
    const int64_t next = ceil_div(rows, 2);
    if (predicted_ms(next) < kMinTaskMs) break;
    rows = next;
  }
  return rows;
}

double predict(const tbex::Problem& p) {
  const auto ranked = tbex::rank_schedules(p);
  return ranked.empty() ? 0.0 : ranked.front().ms;
}

template <class F>
int64_t guarded(std::string& error, const char* who, F&& body) {
  try {
    body();
    error.clear();
    return 0;
  } catch (const Failure& f) {
    error = f.message;
  } catch (const tbex::UserError& e) {
    error = e.what();
  }
  std::fprintf(stderr, "[tbex ascendc] %s::GetTiling: %s\n", who, error.c_str());
  return -1;
}

void fill_filter(const ConvBpTilingInput& in, TConv3DBpFilterTiling& t, Conv3DBpFilterParams& params,
                 TConv3DBpFilterBasicBlockTiling& bb) {
  check_format(in.input_type, ConvCommonApi::NDC1HWC0, "input", "NDC1HWC0");
  check_format(in.grad_out_type, ConvCommonApi::NDC1HWC0, "gradOutput", "NDC1HWC0");
  check_format(in.weight_type, ConvCommonApi::FRACTAL_Z_3D, "weight", "FRACTAL_Z_3D");
  const tbex::DType dt = src_dtype(in.input_type, "input");
  if (in.grad_out_type.set && src_dtype(in.grad_out_type, "gradOutput") != dt)
    reject("input and gradOutput dtypes differ");
  if (in.weight_type.set && in.weight_type.dtype != ConvCommonApi::FLOAT32)
    reject("weight (the dW output) dtype must be FLOAT32");
  const tbex::ConvGeometry g = geometry(in);
  tbex::make_problem(tbex::OpKind::kBackpropFilter, g, dt, tbex::DType::kFloat32);  // checks

  t = TConv3DBpFilterTiling{};
  fill_geometry(t, g);
  t.cin1G = ceil_div(g.cin, 16); t.cout1G = ceil_div(g.cout, 16);
  t.channelSize = 16;
  t.al0Pbuffer = t.bl0Pbuffer = t.cl0Pbuffer = t.al1Pbuffer = t.bl1Pbuffer = 1;
  t.m0 = 16; t.k0 = 16; t.n0 = 16;
  // One single shape: all of Cout (M) and Cin (N) of a (batch, dout, kd) slice, Ho split by the
  // cost model (K = rows * Wo).
  const int64_t m = (int64_t)t.cout1G * 16, n = (int64_t)t.cin1G * 16 * t.hk * t.wk;
  const int64_t slices = (int64_t)g.n * g.out[0] * g.kernel[0];
  const auto local = [&](int64_t rows) {
    tbex::ConvGeometry l = g;
    l.n = 1; l.in[0] = 1; l.out[0] = 1; l.kernel[0] = 1; l.stride[0] = 1; l.dilation[0] = 1;
    l.pads[0] = l.pads[1] = 0;
    const auto w = tbex::ascendc::detail::dw_axis(0, rows, g.in[1], g.kernel[1], g.stride[1],
                                                  g.dilation[1], g.pads[2]);
    l.out[1] = rows;
    l.in[1] = std::max<int64_t>(w.end - w.start, 1);
    l.pads[2] = w.pad_head;
    l.pads[3] = (rows - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1 - l.in[1] - w.pad_head;
    return predict(tbex::make_problem(tbex::OpKind::kBackpropFilter, l, dt, tbex::DType::kFloat32));
  };
  const int64_t rows = choose_rows(
      g.out[1], [&](int64_t r) { return slices * ceil_div(g.out[1], r); }, local);
  t.singleCoreCout = m;
  t.singleCoreCin = (uint64_t)t.cin1G * 16;
  t.singleCoreHo = rows;
  t.singleCoreBatch = 1;
  t.singleCoreDk = 1;
  t.singleCoreGroup = 1;
  // Blocks a few tens of KiB of fp32: cache-resident while GetTensorC adds them out.
  t.baseM = std::min<int64_t>(m, 64);
  t.baseN = std::min<int64_t>(n, 256);
  t.baseK = std::min<int64_t>(rows * g.out[2], 128);
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
  t.iterateOrder = m > n ? 1 : 0;
  t.bl1Bound = t.baseN * t.baseK;
  t.hf32Flag = 0;
  params.totalL1Size = (uint32_t)in.platform.l1Size;
  bb.singleCoreM = t.singleCoreCout;
  bb.singleCoreN = t.singleCoreCin * t.hk * t.wk;
  bb.singleCoreK = t.singleCoreHo * t.wo;
}

/** CANN's SetInitOutput rule, plus any row of x no dy row reaches (then some dX elements get no
 * write and the output must be zeroed first). */
int32_t init_output_flag(const tbex::ConvGeometry& g, int64_t bp_down, int64_t bp_head) {
  for (int i = 0; i < 3; ++i) {
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;
    const int64_t tail = g.pads[2 * i + 1];
    if ((g.in[i] + g.pads[2 * i] + tail - dk) % g.stride[i] > tail) return 1;
    std::vector<bool> hit((size_t)g.in[i], false);
    for (int64_t o = 0; o < g.out[i]; ++o)
      for (int64_t k = 0; k < g.kernel[i]; ++k) {
        const int64_t r = o * g.stride[i] - g.pads[2 * i] + k * g.dilation[i];
        if (r >= 0 && r < g.in[i]) hit[(size_t)r] = true;
      }
    if (std::find(hit.begin(), hit.end(), false) != hit.end()) return 1;
  }
  if (g.stride[1] > g.kernel[1] || g.dilation[0] > 1 || bp_down > 0 || bp_head > 0) return 1;
  return 0;
}

void fill_input(const ConvBpTilingInput& in, TConv3DBackpropInputTiling& t) {
  check_format(in.weight_type, ConvCommonApi::FRACTAL_Z_3D, "weight", "FRACTAL_Z_3D");
  check_format(in.grad_out_type, ConvCommonApi::NDC1HWC0, "gradOutput", "NDC1HWC0");
  const tbex::DType dt = src_dtype(in.weight_type, "weight");
  if (in.grad_out_type.set && src_dtype(in.grad_out_type, "gradOutput") != dt)
    reject("weight and gradOutput dtypes differ");
  tbex::DType res = dt;
  if (in.input_type.set) {
    if (in.input_type.dtype == ConvCommonApi::FLOAT32) res = tbex::DType::kFloat32;
    else res = src_dtype(in.input_type, "input (the dX output)");
  }
  const tbex::ConvGeometry g = geometry(in);
  tbex::make_problem(tbex::OpKind::kBackpropInput, g, dt, res);  // checks
  if (g.stride[0] > g.kernel[0])
    reject("strideD (" + std::to_string(g.stride[0]) + ") must not exceed kD (" + std::to_string(g.kernel[0]) + ")");
  int64_t bp_head[3];
  for (int i = 0; i < 3; ++i) {
    bp_head[i] = (g.kernel[i] - 1) * g.dilation[i] - g.pads[2 * i];
    if (bp_head[i] < 0)
      reject("pad " + std::to_string(g.pads[2 * i]) + " exceeds (k-1)*dilation = " +
             std::to_string((g.kernel[i] - 1) * g.dilation[i]) + " in dim " + std::to_string(i));
  }
  int64_t bp_tail[3];
  for (int i = 0; i < 3; ++i)
    bp_tail[i] = std::max<int64_t>(0, g.in[i] - ((g.out[i] - 1) * g.stride[i] + 1) +
                                          (g.kernel[i] - 1) * g.dilation[i] - bp_head[i]);

  t = TConv3DBackpropInputTiling{};
  fill_geometry(t, g);
  t.cout1 = ceil_div(g.cout, 16); t.cin1 = ceil_div(g.cin, 16);
  t.cout1G = t.cout1; t.cin1G = t.cin1;
  t.c0 = 16; t.c0Bits = 4;
  t.backpropPadTail = bp_tail[0]; t.backpropPadUp = bp_head[1]; t.backpropPadDown = bp_tail[1];
  t.backpropPadLeft = bp_head[2]; t.backpropPadRight = bp_tail[2];
  t.al0Pbuffer = t.bl0Pbuffer = t.cl0Pbuffer = t.al1Pbuffer = t.bl1Pbuffer = 1;
  t.singleCoreGroup = 1;
  t.singleCoreCout = t.cout1G * 16;
  t.singleCoreCout1 = t.cout1G;
  t.singleCoreCin1 = t.cin1;
  t.singleCoreCin = (uint64_t)t.cin1 * 16;
  t.singleCoreDin = 1;
  t.singleCoreHo = 1;
  t.singleCoreBatch = 1;
  // A single shape: rows of Hi (M = rows * Wi), all channels, split by the cost model.
  const int64_t slices = (int64_t)g.n * g.in[0];
  const auto local = [&](int64_t rows) {
    tbex::ConvGeometry l = g;
    l.n = 1;
    const auto wd = tbex::ascendc::detail::dx_depth(g.in[0] / 2, g.out[0], g.kernel[0], g.stride[0],
                                                    g.dilation[0], g.pads[0]);
    const auto wh = tbex::ascendc::detail::dx_axis(0, rows, g.out[1], g.kernel[1], g.stride[1],
                                                   g.dilation[1], g.pads[2]);
    if (wd.count == 0 || wh.empty) return 0.0;
    l.in = {1, wh.end - wh.start, g.in[2]};
    l.out = {wd.count, wh.o1 - wh.o0 + 1, g.out[2]};
    l.kernel[0] = wd.count;
    l.stride[0] = l.dilation[0] = 1;
    l.pads = {wd.count - 1, wd.count - 1, wh.pad_head, wh.pad_tail, g.pads[4], g.pads[5]};
    return predict(tbex::make_problem(tbex::OpKind::kBackpropInput, l, dt, res));
  };
  const int64_t rows = choose_rows(
      g.in[1], [&](int64_t r) { return slices * ceil_div(g.in[1], r); }, local);
  t.singleCoreM = (uint64_t)rows * g.in[2];
  t.baseM = (uint32_t)std::min<uint64_t>(t.singleCoreM, 256);
  t.baseN = std::min<int64_t>((int64_t)t.cin1 * 16, 128);
  t.baseK = (uint32_t)(g.kernel[1] * g.kernel[2] * 16);
  t.baseD = t.baseBatch = t.baseGroup = 1;
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
  t.stepBatch = t.stepGroup = 1;
  t.iterateOrder = 1;
  t.hf32Flag = 0;
  t.initOutputFlag = init_output_flag(g, bp_tail[1], bp_head[0]);
  t.reserved = 0;
}

}  // namespace

int64_t Conv3dBpFilterTiling::GetTiling(optiling::Conv3DBackpropFilterTilingData& tiling) {
  return guarded(error_, "Conv3dBpFilterTiling", [&] {
    fill_filter(in_, tiling.dwTiling, tiling.params, tiling.basicBlockTiling);
  });
}
int64_t Conv3dBpFilterTiling::GetTiling(AscendC::tiling::Conv3DBackpropFilterTilingData& tiling) {
  return guarded(error_, "Conv3dBpFilterTiling", [&] {
    fill_filter(in_, tiling.dwTiling, tiling.params, tiling.basicBlockTiling);
  });
}
int64_t Conv3DBpInputTiling::GetTiling(optiling::Conv3DBackpropInputTilingData& tiling) {
  return guarded(error_, "Conv3DBpInputTiling", [&] { fill_input(in_, tiling.conv3DDxTiling); });
}
int64_t Conv3DBpInputTiling::GetTiling(AscendC::tiling::Conv3DBackpropInputTilingData& tiling) {
  return guarded(error_, "Conv3DBpInputTiling", [&] { fill_input(in_, tiling.conv3DDxTiling); });
}

}  // namespace ConvBackpropApi
