/** Conv3DBackpropInput on tbex kernels. A single shape is one (batch, din) slice: M pixels of
 * rows [h0, h0 + ceil(M/Wi)) by N input channels, summed over K = Dk*Cout*Hk*Wk. It is exactly a
 * dX problem with N = 1 and D = 1 over the dy rows and planes that reach those pixels (the
 * windows of dx_axis), computed by one tbex kernel with CANN's one rounding to the output type. */
#include <algorithm>
#include <cstring>

#include "engine_common.h"
#include "tbex/ascendc/engine.h"
#include "tbex/ascendc/launch.h"

namespace tbex::ascendc {
using namespace detail;

struct DxEngine::Impl {
  Elem src, dst;
  OutFormat format;
  size_t dst_size() const { return dst == Elem::kFloat ? 4 : 2; }
  bool has_tiling = false;
  TConv3DBackpropInputTiling t;
  const uint8_t* w = nullptr;
  const uint8_t* dy = nullptr;
  uint64_t m = 0, k = 0;
  uint32_t n = 0;
  bool shape_set = false;
  uint32_t din = 0;
  int32_t ho_start = 0;

  // The current single shape's result: [cin1 planes][rows * Wi pixels][16] in the dst type.
  std::vector<uint8_t> result;
  std::vector<uint8_t> packed_w;  // weight rows gathered when the view is not one stride
  int64_t rows = 0, h0 = 0, cin1 = 0;
  DepthTaps wd;
  AxisWindow wh;
  BlockWalk walk;

  void compute();
  bool block_has_terms(uint32_t m_idx, uint32_t use_m) const;
};

DxEngine::DxEngine(Elem src, Elem dst, OutFormat format) : impl_(new Impl) {
  require(src == Elem::kHalf || src == Elem::kBFloat16, "Conv3DBackpropInput",
          "weight and gradOutput must be half or bfloat16_t");
  impl_->src = src;
  impl_->dst = dst;
  impl_->format = format;
}
DxEngine::~DxEngine() = default;

void DxEngine::init(const TConv3DBackpropInputTiling* tiling) {
  const char* who = "Conv3DBackpropInput::Init";
  require(tiling != nullptr, who, "tiling is null");
  const TConv3DBackpropInputTiling& t = *tiling;
  for (uint32_t v : {t.batch, t.cin, t.cout, t.cout1, t.cin1, t.cout1G, t.cin1G, t.dout, t.ho,
                     t.wo, t.di, t.hi, t.wi, t.dk, t.hk, t.wk, t.strideD, t.strideH, t.strideW,
                     t.dilationD, t.dilationH, t.dilationW, t.baseM, t.baseN})
    require(v > 0, who, "tiling: every size, stride, dilation, baseM and baseN must be > 0");
  require(t.c0 == 16, who, "tiling: c0 must be 16 (half / bfloat16_t), got " + std::to_string(t.c0));
  require(t.group == 1, who,
          "tiling: group must be 1 (the public dX API computes one group), got " +
              std::to_string(t.group));
  require(t.baseN % 16 == 0, who, "tiling: baseN must be a multiple of 16, got " + std::to_string(t.baseN));
  require(t.stepM <= 1 && t.stepN <= 1, who, "tiling: stepM and stepN must be 1 (CANN's dX kernel asserts it)");
  const int64_t bp_up = (int64_t)(t.hk - 1) * t.dilationH - (int64_t)t.padUp;
  require(bp_up >= 0 && (int64_t)t.backpropPadUp == bp_up, who,
          "tiling: backpropPadUp must be (hk-1)*dilationH - padUp = " + std::to_string(bp_up) +
              ", got " + std::to_string(t.backpropPadUp));
  impl_->t = t;
  impl_->has_tiling = true;
}

void DxEngine::set_weight(const void* w) { impl_->w = static_cast<const uint8_t*>(w); }
void DxEngine::set_grad_output(const void* dy) { impl_->dy = static_cast<const uint8_t*>(dy); }
void DxEngine::set_single_shape(uint64_t m, uint64_t k, uint32_t n) {
  impl_->m = m;
  impl_->k = k;
  impl_->n = n;
  impl_->shape_set = true;
}
void DxEngine::set_start_position(uint32_t din, int32_t ho_start) {
  impl_->din = din;
  impl_->ho_start = ho_start;
}

void DxEngine::Impl::compute() {
  const char* who = "Conv3DBackpropInput::Iterate";
  const char* shape_call = "Conv3DBackpropInput::SetSingleShape";
  const char* start_call = "Conv3DBackpropInput::SetStartPosition";
  require(shape_set, who, "Iterate before SetSingleShape");
  require(w != nullptr, who, "Iterate before SetWeight (weight is null)");
  require(dy != nullptr, who, "Iterate before SetGradOutput (gradOutput is null)");
  require(m > 0 && k > 0 && n > 0, shape_call,
          "M, K and N must be > 0, got " + list_str({(int64_t)m, (int64_t)k, (int64_t)n}));
  const int64_t taps16 = (int64_t)t.dk * t.hk * t.wk * 16;
  require((int64_t)k % taps16 == 0, shape_call,
          "K (" + std::to_string(k) + ") must be a multiple of Dk*Hk*Wk*16 = " + std::to_string(taps16));
  const int64_t cout1 = (int64_t)k / taps16;
  require(cout1 <= (int64_t)t.cout1G, shape_call,
          "K covers " + std::to_string(cout1) + " Cout blocks, the tiling has cout1G = " +
              std::to_string(t.cout1G));
  require(din < t.di, start_call,
          "din " + std::to_string(din) + " is not below Di = " + std::to_string(t.di));
  cin1 = ceil_div(n, 16);
  rows = ceil_div((int64_t)m, t.wi);
  h0 = (int64_t)ho_start + t.backpropPadUp;
  require(h0 >= 0 && h0 + rows <= (int64_t)t.hi, start_call,
          "the single shape's rows [" + std::to_string(h0) + ", " + std::to_string(h0 + rows) +
              ") (curHoStartIdx + backpropPadUp, M / Wi rows) are not inside Hi = " +
              std::to_string(t.hi));

  const int64_t n_aligned = cin1 * 16;
  walk.plan((int64_t)m, n_aligned, t.baseM, t.baseN);

  const int64_t rplane = rows * t.wi * 16;  // one channel block of the result
  // Reused across single shapes; the kernel writes rows [start, end) of every plane (all 16
  // lanes), the rest is zeroed here.
  result.resize((size_t)(cin1 * rplane) * dst_size());
  wd = dx_depth(din, t.dout, t.dk, t.strideD, t.dilationD, t.padFront);
  wh = dx_axis(h0, rows, t.ho, t.hk, t.strideH, t.dilationH, t.padUp);
  if (wd.count == 0 || wh.empty) {
    std::fill(result.begin(), result.end(), 0);
    return;
  }
  const size_t head = (size_t)((wh.start - h0) * t.wi * 16) * dst_size();
  const size_t tail = (size_t)((h0 + rows - wh.end) * t.wi * 16) * dst_size();
  for (int64_t c = 0; c < cin1; ++c) {
    uint8_t* pl = result.data() + (size_t)(c * rplane) * dst_size();
    std::memset(pl, 0, head);
    std::memset(pl + (size_t)rplane * dst_size() - tail, 0, tail);
  }

  ConvGeometry g;
  g.n = 1;
  // Real channel counts (no work on padding lanes): N is the Cin count; K spans every Cout block
  // only from co1 = 0, where the tiling's Cout is the real count.
  g.cin = n;
  g.cout = cout1 == (int64_t)t.cout1G ? (int64_t)t.cout : cout1 * 16;
  // Depth: the slice's taps only (dx_depth): local dy plane i is global do_min + i*q and pairs
  // with local tap count-1-i.
  g.in = {1, wh.end - wh.start, (int64_t)t.wi};
  g.out = {wd.count, wh.o1 - wh.o0 + 1, (int64_t)t.wo};
  g.kernel = {wd.count, (int64_t)t.hk, (int64_t)t.wk};
  g.stride = {1, (int64_t)t.strideH, (int64_t)t.strideW};
  g.dilation = {1, (int64_t)t.dilationH, (int64_t)t.dilationW};
  g.pads = {wd.count - 1, wd.count - 1, wh.pad_head, wh.pad_tail, (int64_t)t.padLeft,
            (int64_t)t.padRight};
  const DType st = to_dtype(src), dt = to_dtype(dst);
  const auto kernel = local_kernel(OpKind::kBackpropInput, g, st, dt);
  const Problem& p = kernel->problem();

  // Weight: FRACTAL_Z_3D rows (kd, ci1, kh, kw) of Cout1G*256 elements from the pointer's ci1;
  // the local taps are planes kd0 + j*step.
  const int64_t row = (int64_t)t.cout1G * 256, hkwk = (int64_t)t.hk * t.wk;
  const int64_t plane = (int64_t)t.cin1G * hkwk * row;  // elements between kd planes
  const uint8_t* wdata = w + wd.kd0 * plane * 2;
  std::vector<int64_t> wstrides{row, 256, 16, 1};
  if (wd.count > 1 && (wd.step != 1 || cin1 != (int64_t)t.cin1G)) {
    // The taps' planes of this Cin block are not one row stride apart: gather them.
    const int64_t chunk = cin1 * hkwk * row * 2;
    packed_w.resize((size_t)(wd.count * chunk));
    for (int64_t j = 0; j < wd.count; ++j)
      std::memcpy(packed_w.data() + j * chunk, wdata + j * wd.step * plane * 2, chunk);
    wdata = packed_w.data();
  }
  TensorArg wa{wdata, p.filter_shape(), wstrides, st};
  // dy: the pointer is at (do = 0, ho = ceil(curHoStartIdx / strideH) clamped at 0); tiling cout1
  // is the stride of a dy depth plane in C1 blocks.
  const int64_t aligned = ho_start < 0 ? 0 : ceil_div(ho_start, t.strideH);
  const int64_t hw_out = (int64_t)t.ho * t.wo * 16;
  internal_check(wh.o0 >= aligned, "ascendc dX: dy window starts above the gradOutput pointer");
  const uint8_t* dy0 = dy + (wd.do_min * (int64_t)t.cout1 * hw_out + (wh.o0 - aligned) * t.wo * 16) * 2;
  TensorArg dya{dy0, p.dy_shape(), {0, wd.q * (int64_t)t.cout1 * hw_out, hw_out, (int64_t)t.wo * 16, 16, 1}, st};
  // Output rows [start, end) of this slice's rows [h0, h0 + rows).
  uint8_t* out0 = result.data() + (size_t)((wh.start - h0) * t.wi * 16) * dst_size();
  TensorArg out{out0, p.output_shape(), {0, 0, rplane, 16, 1}, dt};
  kernel->run({wa, dya}, out);
}

bool DxEngine::Impl::block_has_terms(uint32_t m_idx, uint32_t use_m) const {
  if (wd.count == 0 || wh.empty) return false;
  if (t.initOutputFlag != 1) return true;  // CANN computes (and writes) every such block
  // CANN skips a block none of whose rows any dy row reaches (the output was zeroed first).
  const int64_t p0 = (int64_t)m_idx * t.baseM, p1 = p0 + use_m - 1;
  const int64_t r0 = h0 + p0 / t.wi, r1 = h0 + p1 / t.wi;
  return r0 < wh.end && r1 >= wh.start;
}

bool DxEngine::iterate(DxCounters& ctx) {
  Impl& s = *impl_;
  require(s.has_tiling, "Conv3DBackpropInput::Iterate", "Iterate before Init");
  const bool first = ctx.isFirstIter_;
  if (first) {
    s.compute();
    ctx.isFirstIter_ = 0;
  }
  if (!s.walk.iterate(ctx, first, 1, 1, s.t.iterateOrder)) return false;
  ctx.curDinIdx_ = s.din;
  ctx.singleShapeCin_ = s.n;
  ctx.needComputeFlag_ = s.block_has_terms(ctx.curML0Idx_, ctx.baseUseM_);
  return true;
}

namespace {
template <class T>
void put(T* d, const T* src, int64_t count, uint8_t atomic) {
  if (atomic != 1)
    std::memcpy(d, src, sizeof(T) * count);
  else
    atomic_add_run(d, src, count);
}

template <class T>
void copy_block(const TConv3DBackpropInputTiling& t, const DxCounters& ctx,
                const uint8_t* result, int64_t plane, OutFormat format, void* out, uint8_t atomic) {
  const T* res = reinterpret_cast<const T*>(result);
  const int64_t m0 = (int64_t)ctx.curML0Idx_ * t.baseM, n0 = (int64_t)ctx.curNL0Idx_ * t.baseN;
  const int64_t use_m = ctx.baseUseM_, planes = ctx.baseUseN_ / 16;
  T* o = static_cast<T*>(out);
  if (format == OutFormat::kNCDHW) {
    // NZ block [baseUseN/16][baseUseM][16] in this core's slot of the workspace.
    T* d = o + core_idx() * (int64_t)t.baseM * t.baseN;
    for (int64_t c = 0; c < planes; ++c)
      std::memcpy(d + c * use_m * 16, res + (n0 / 16 + c) * plane + m0 * 16, sizeof(T) * use_m * 16);
    return;
  }
  const int64_t hw = (int64_t)t.hi * t.wi * 16;
  T* d = o + (int64_t)ctx.curDinIdx_ * t.cin1 * hw + n0 * (int64_t)t.hi * t.wi + m0 * 16;
  for (int64_t c = 0; c < planes; ++c) put(d + c * hw, res + (n0 / 16 + c) * plane + m0 * 16, use_m * 16, atomic);
}
}  // namespace

void DxEngine::get_tensor_c(const DxCounters& ctx, void* out, uint8_t atomic, bool sequential) {
  const Impl& s = *impl_;
  require(s.has_tiling && !s.walk.done() && !ctx.isFirstIter_, "Conv3DBackpropInput::GetTensorC",
          "GetTensorC without a block: call it after an Iterate that returned true");
  require(out != nullptr, "Conv3DBackpropInput::GetTensorC", "output is null");
  if (!ctx.needComputeFlag_ || (sequential && s.format == OutFormat::kNDC1HWC0)) return;
  const int64_t plane = s.rows * s.t.wi * 16;
  switch (s.dst) {
    case Elem::kHalf: copy_block<half>(s.t, ctx, s.result.data(), plane, s.format, out, atomic); break;
    case Elem::kBFloat16: copy_block<bfloat16_t>(s.t, ctx, s.result.data(), plane, s.format, out, atomic); break;
    case Elem::kFloat: copy_block<float>(s.t, ctx, s.result.data(), plane, s.format, out, atomic); break;
  }
}

void DxEngine::end() {
  impl_->result.clear();
  impl_->result.shrink_to_fit();
  impl_->packed_w.clear();
}

}  // namespace tbex::ascendc
