/** Conv3DBackpropFilter on tbex kernels. A single shape is one (batch, dout, kd) slice: dW rows
 * Cout (M) by columns Cin*Hk*Wk (N) summed over K = Ho rows * Wo; it is exactly a dW problem
 * with N = D = Kd = 1 over the window of x those dy rows read, computed by one tbex kernel. */
#include <algorithm>
#include <cstring>

#include "engine_common.h"
#include "tbex/ascendc/engine.h"
#include "tbex/thread_pool.h"

namespace tbex::ascendc {
using namespace detail;

struct DwEngine::Impl {
  Elem src;
  bool has_tiling = false;
  TConv3DBpFilterTiling t;
  const uint8_t* x = nullptr;
  const uint8_t* dy = nullptr;
  uint64_t m = 0, n = 0, k = 0;
  bool shape_set = false;
  uint32_t ho_start = 0;

  // The current single shape's result: [cin1*Hk*Wk rows][cout16][16] fp32 (FRACTAL_Z_3D).
  std::vector<float> result;
  int64_t cout16 = 0;
  BlockWalk walk;

  void compute();
};

DwEngine::DwEngine(Elem src) : impl_(new Impl) {
  require(src == Elem::kHalf || src == Elem::kBFloat16, "Conv3DBackpropFilter",
          "input and gradOutput must be half or bfloat16_t");
  impl_->src = src;
}
DwEngine::~DwEngine() = default;

void DwEngine::init(const TConv3DBpFilterTiling* tiling) {
  require(tiling != nullptr, "Conv3DBackpropFilter::Init", "tiling is null");
  const TConv3DBpFilterTiling& t = *tiling;
  const char* who = "Conv3DBackpropFilter::Init";
  for (uint32_t v : {t.batch, t.cin, t.cout, t.dout, t.ho, t.wo, t.di, t.hi, t.wi, t.dk, t.hk,
                     t.wk, t.strideD, t.strideH, t.strideW, t.dilationD, t.dilationH,
                     t.dilationW, t.baseM, t.baseN, t.cout1G, t.cin1G})
    require(v > 0, who,
            "tiling: every size, stride, dilation, baseM, baseN, cin1G and cout1G must be > 0");
  require(t.channelSize == 16, who,
          "tiling: channelSize must be 16 (C0 of half / bfloat16_t), got " +
              std::to_string(t.channelSize));
  require(t.group == 1, who,
          "tiling: group must be 1 (the filter API's host tiling takes groups = 1), got " +
              std::to_string(t.group));
  require(t.baseN % 16 == 0, who,
          "tiling: baseN must be a multiple of 16, got " + std::to_string(t.baseN));
  require(t.iterateOrder <= 1, who,
          "tiling: iterateOrder must be 0 or 1, got " + std::to_string(t.iterateOrder));
  impl_->t = t;
  impl_->has_tiling = true;
}

void DwEngine::set_input(const void* x) { impl_->x = static_cast<const uint8_t*>(x); }
void DwEngine::set_grad_output(const void* dy) { impl_->dy = static_cast<const uint8_t*>(dy); }
void DwEngine::set_single_shape(uint64_t m, uint64_t n, uint64_t k) {
  impl_->m = m;
  impl_->n = n;
  impl_->k = k;
  impl_->shape_set = true;
}
void DwEngine::set_start_position(uint32_t ho_start) { impl_->ho_start = ho_start; }

void DwEngine::Impl::compute() {
  const char* who = "Conv3DBackpropFilter::Iterate";
  require(shape_set, who, "Iterate before SetSingleShape");
  require(x != nullptr, who, "Iterate before SetInput (input is null)");
  require(dy != nullptr, who, "Iterate before SetGradOutput (gradOutput is null)");
  require(m > 0 && n > 0 && k > 0, "Conv3DBackpropFilter::SetSingleShape",
          "M, N and K must be > 0, got " + list_str({(int64_t)m, (int64_t)n, (int64_t)k}));
  require(k % t.wo == 0, "Conv3DBackpropFilter::SetSingleShape",
          "K (" + std::to_string(k) + ") must be a multiple of Wo (" + std::to_string(t.wo) +
              "): K counts whole dy rows");
  const int64_t rows = (int64_t)(k / t.wo);
  require((int64_t)ho_start + rows <= (int64_t)t.ho, "Conv3DBackpropFilter::SetStartPosition",
          "dy rows [" + std::to_string(ho_start) + ", " + std::to_string(ho_start + rows) +
              ") run past Ho = " + std::to_string(t.ho));
  const int64_t hkwk = (int64_t)t.hk * t.wk;
  const int64_t cin1 = ceil_div(ceil_div((int64_t)n, hkwk), 16);
  const int64_t cout1 = ceil_div((int64_t)m, 16);
  cout16 = cout1 * 16;

  // Blocks: M by baseM, the 16-aligned N (cin1*16*Hk*Wk) by baseN.
  const int64_t n_aligned = cin1 * 16 * hkwk;
  walk.plan((int64_t)m, n_aligned, t.baseM, t.baseN);

  // Reused across single shapes: the kernel writes all of it (padding lanes included).
  result.resize((size_t)(cin1 * hkwk * cout16 * 16));
  const FwdWindow h = dw_axis(ho_start, rows, t.hi, t.hk, t.strideH, t.dilationH, t.padUp);
  if (h.end <= h.start) {  // every tap of these rows reads padding: the sums are 0
    std::fill(result.begin(), result.end(), 0.0f);
    return;
  }

  ConvGeometry g;
  g.n = 1;
  // A single shape over every C1 block starts at ci1 = 0, so the tiling's Cin is its real channel
  // count (lanes past it are zero in x): no work on padding lanes (Cin = 3 is 3, not 16).
  g.cin = cin1 == (int64_t)t.cin1G ? (int64_t)t.cin : cin1 * 16;
  g.cout = (int64_t)m;
  g.in = {1, h.end - h.start, (int64_t)t.wi};
  g.out = {1, rows, (int64_t)t.wo};
  g.kernel = {1, (int64_t)t.hk, (int64_t)t.wk};
  g.stride = {1, (int64_t)t.strideH, (int64_t)t.strideW};
  g.dilation = {1, (int64_t)t.dilationH, (int64_t)t.dilationW};
  g.pads = {0, 0, h.pad_head, h.pad_tail, (int64_t)t.padLeft, (int64_t)t.padRight};
  const DType dt = to_dtype(src);
  const auto kernel = local_kernel(OpKind::kBackpropFilter, g, dt, DType::kFloat32);
  const Problem& p = kernel->problem();

  const int64_t hw_in = (int64_t)t.hi * t.wi * 16, hw_out = (int64_t)t.ho * t.wo * 16;
  TensorArg xa{x, p.x_shape(), {0, 0, hw_in, (int64_t)t.wi * 16, 16, 1}, dt};
  TensorArg dya{dy, p.dy_shape(), {0, 0, hw_out, (int64_t)t.wo * 16, 16, 1}, dt};
  const auto out_shape = p.output_shape();
  internal_check(out_shape[2] == cout16 && out_shape[1] == cin1 * hkwk,
                 "ascendc dW: unexpected local output shape " + list_str(out_shape));
  TensorArg out{result.data(), out_shape, {}, DType::kFloat32};
  kernel->run({xa, dya}, out);
}

bool DwEngine::iterate(IterCounters& ctx) {
  Impl& s = *impl_;
  require(s.has_tiling, "Conv3DBackpropFilter::Iterate", "Iterate before Init");
  const bool first = ctx.isFirstIter_;
  if (first) {
    s.compute();
    ctx.isFirstIter_ = 0;
  }
  if (!s.walk.iterate(ctx, first, s.t.stepM, s.t.stepN, s.t.iterateOrder)) return false;
  return true;
}

void DwEngine::get_tensor_c(const IterCounters& ctx, float* out, uint8_t atomic, bool sequential) {
  const Impl& s = *impl_;
  require(s.has_tiling && !s.walk.done() && !ctx.isFirstIter_, "Conv3DBackpropFilter::GetTensorC",
          "GetTensorC without a block: call it after an Iterate that returned true");
  require(out != nullptr, "Conv3DBackpropFilter::GetTensorC", "output is null");
  const int64_t m0 = (int64_t)ctx.curML0Idx_ * s.t.baseM, n0 = (int64_t)ctx.curNL0Idx_ * s.t.baseN;
  const int64_t use_m = ctx.baseUseM_, rows16 = ctx.baseUseN_ / 16;
  // FRACTAL_Z_3D of the whole dW: a row of Cout1G*16 x 16 per (ci1, kh, kw); compact: baseM x 16.
  const int64_t row_stride = sequential ? (int64_t)s.t.baseM * 16 : (int64_t)s.t.cout1G * 256;
  float* dst = sequential ? out : out + (int64_t)ctx.curNL0Idx_ * s.t.baseN * s.t.cout1G * 16 + m0 * 16;
  for (int64_t r = 0; r < rows16; ++r) {
    const float* src = s.result.data() + ((n0 / 16 + r) * s.cout16 + m0) * 16;
    float* d = dst + r * row_stride;
    if (atomic == 1) {
      atomic_add_run(d, src, use_m * 16);
    } else {
      std::memcpy(d, src, sizeof(float) * use_m * 16);
    }
  }
}

void DwEngine::end() {
  impl_->result.clear();
  impl_->result.shrink_to_fit();
}

}  // namespace tbex::ascendc
