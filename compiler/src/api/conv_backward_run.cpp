/** One convolution_backward run on caller memory: pack the operands into the workspace (6HD /
 * FRACTAL_Z_3D, converted to the compute dtype), run the kernels, unpack into the outputs'
 * strided views, sum grad_bias. TBEX_LOG=conv prints the time of each step. */
#include <chrono>
#include <cstring>

#include "conv_backward_impl.h"
#include "tbex/log.h"

namespace tbex::conv_bwd {
namespace {

void zero_fill(const View5& v) {
  const size_t es = dtype_size(v.dtype);
  const auto& s = v.shape;
  for (int64_t i0 = 0; i0 < s[0]; ++i0)
    for (int64_t i1 = 0; i1 < s[1]; ++i1)
      for (int64_t i2 = 0; i2 < s[2]; ++i2)
        for (int64_t i3 = 0; i3 < s[3]; ++i3)
          for (int64_t i4 = 0; i4 < s[4]; ++i4) {
            const int64_t off = i0 * v.strides[0] + i1 * v.strides[1] + i2 * v.strides[2] +
                                i3 * v.strides[3] + i4 * v.strides[4];
            std::memset(static_cast<char*>(v.data) + off * (int64_t)es, 0, es);
          }
}

/** grad_bias[c] = sum of dy[n, c, ...] (fp64 accumulation, rounded once). */
void bias_sum(const View5& dy, const View5& gb) {
  const auto& s = dy.shape;
  parallel_range(s[1], [&](int64_t c) {
    double acc = 0.0;
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t d = 0; d < s[2]; ++d)
        for (int64_t h = 0; h < s[3]; ++h) {
          const int64_t row = n * dy.strides[0] + c * dy.strides[1] + d * dy.strides[2] +
                              h * dy.strides[3];
          float part = 0.0f;  // fp32 within a row keeps the inner loop vectorizable
          for (int64_t w = 0; w < s[4]; ++w) part += load_f32(dy.data, row + w * dy.strides[4], dy.dtype);
          acc += part;
        }
    store_f32(gb.data, c * gb.strides[0], gb.dtype, (float)acc);
  });
}

/** TBEX_LOG=conv: the time of each step (how much the layout conversion costs next to the
 * kernels), printed as one line per run. */
class StepTimer {
 public:
  StepTimer() : on_(log::enabled("conv")), t_(std::chrono::steady_clock::now()) {}
  void step(const char* name) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    line_ += std::string(line_.empty() ? "" : ", ") + name + " " +
             std::to_string(std::chrono::duration<double, std::milli>(now - t_).count()) + " ms";
    t_ = now;
  }
  void print(const std::string& what) const {
    if (on_) log::print("conv", what + ": " + line_);
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point t_;
  std::string line_;
};

}  // namespace

uint8_t* Plan::workspace_for(void* workspace, uint64_t workspace_size,
                             std::unique_lock<std::mutex>& lock,
                             std::unique_ptr<uint8_t[]>& fresh) const {
  const uint64_t need = layout_.bytes;
  if (need == 0) return static_cast<uint8_t*>(workspace);
  if (workspace != nullptr) {
    check(workspace_size >= need, "workspace",
          "size " + std::to_string(workspace_size) + " is smaller than the " + std::to_string(need) +
              " bytes the plan needs");
    return static_cast<uint8_t*>(workspace);
  }
  // The plan's own buffer is reused (its pages stay mapped across calls, e.g. a training
  // loop); a concurrent run of the same plan allocates a fresh one.
  uint8_t* base;
  lock = std::unique_lock<std::mutex>(ws_mu_, std::try_to_lock);
  if (lock.owns_lock()) {
    if (!ws_cache_) ws_cache_.reset(new uint8_t[need + 64]);
    base = ws_cache_.get();
  } else {
    fresh.reset(new uint8_t[need + 64]);
    base = fresh.get();
  }
  return base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
}

void Plan::run(const StridedTensor& grad_output, const StridedTensor& input,
               const StridedTensor& weight, const StridedTensor* grad_input,
               const StridedTensor* grad_weight, const StridedTensor* grad_bias, void* workspace,
               uint64_t workspace_size) const {
  const auto& a = args_;
  const auto& spec = checked_.spec;
  // Check everything before anything is written.
  const View5 go = view_of(&grad_output, "grad_output", a.grad_output_shape, a.grad_output_dtype);
  const View5 in = view_of(&input, "input", a.input_shape, a.input_dtype);
  const View5 w = view_of(&weight, "weight", a.weight_shape, a.weight_dtype);
  View5 out[3];
  const StridedTensor* outs[3] = {grad_input, grad_weight, grad_bias};
  static const char* kOut[3] = {"grad_input", "grad_weight", "grad_bias"};
  for (int i = 0; i < 3; ++i)
    if (a.output_mask[i]) out[i] = view_of(outs[i], kOut[i], spec[i].shape, spec[i].dtype);
  std::unique_lock<std::mutex> ws_lock;
  std::unique_ptr<uint8_t[]> fresh;
  uint8_t* ws = workspace_for(workspace, workspace_size, ws_lock, fresh);

  if (checked_.geo.n == 0) {
    if (a.output_mask[1]) zero_fill(out[1]);
    if (a.output_mask[2]) zero_fill(out[2]);
    return;
  }
  const PackRound round = a.cube_math_type == 3 ? PackRound::kHf32 : PackRound::kNone;
  const Layout& l = layout_;
  StepTimer timer;
  // Conv C's x and dy (conv_backward_impl.h): a transposed conv swaps them.
  const View5& cx = a.transposed ? go : in;
  const View5& cdy = a.transposed ? in : go;
  // NaN / Inf (the packers report them): the kernels run on clean copies, and the terms of
  // those values are applied after them (conv_backward_nonfinite.cpp).
  bool go_bad = false;
  if (dx_) {
    const Problem& p = dx_->problem();
    const DType t = p.in_dtype;
    void* wbuf = ws + l.dx_w;
    void* gobuf = ws + l.dx_go;
    void* obuf = ws + l.dx_out;
    bool w_bad = false;
    pack_fz3d(w, a.groups, /*transpose_groups=*/a.transposed, wbuf, t, round, &w_bad);
    // dX reads grad_output as C's dy; the forward conv reads it as C's input x.
    pack_6hd(go, gobuf, t, round, &go_bad);
    Sanitized clean;
    if (w_bad) pack_fz3d(clean.copy(w, t), a.groups, a.transposed, wbuf, t, round);
    if (go_bad) pack_6hd(clean.copy(go, t), gobuf, t, round);
    timer.step("pack grad_output+weight");
    const auto ins = p.input_shapes();
    const TensorArg wa{wbuf, ins[a.transposed ? 1 : 0], {}, t};
    const TensorArg ga{gobuf, ins[a.transposed ? 0 : 1], {}, t};
    dx_->run(a.transposed ? std::vector<TensorArg>{ga, wa} : std::vector<TensorArg>{wa, ga},
             TensorArg{obuf, p.output_shape(), {}, p.res_dtype});
    timer.step(a.transposed ? "conv3d kernel" : "dX kernel");
    unpack_6hd(obuf, p.res_dtype, out[0]);
    timer.step("unpack grad_input");
    if (w_bad || go_bad) {
      apply_nonfinite(p.op, checked_.geo, cx, w, cdy, t, out[0]);
      timer.step("NaN/Inf terms");
    }
  }
  if (dw_) {
    const Problem& p = dw_->problem();
    const DType t = p.in_dtype;
    void* gobuf = ws + l.dw_go;
    void* inbuf = ws + l.dw_in;
    void* obuf = ws + l.dw_out;
    // A shared pack is dX's grad_output, already clean (same compute dtype).
    bool in_bad = false, dgo_bad = l.share_go && go_bad;
    if (!l.share_go) pack_6hd(go, gobuf, t, round, &dgo_bad);
    pack_6hd(in, inbuf, t, round, &in_bad);
    Sanitized clean;
    if (dgo_bad && !l.share_go) pack_6hd(clean.copy(go, t), gobuf, t, round);
    if (in_bad) pack_6hd(clean.copy(in, t), inbuf, t, round);
    timer.step(l.share_go ? "pack input" : "pack input+grad_output");
    void* xbuf = a.transposed ? gobuf : inbuf;
    void* dybuf = a.transposed ? inbuf : gobuf;
    dw_->run({TensorArg{xbuf, p.x_shape(), {}, t}, TensorArg{dybuf, p.dy_shape(), {}, t}},
             TensorArg{obuf, p.output_shape(), {}, p.res_dtype});
    timer.step("dW kernel");
    unpack_fz3d(obuf, p.res_dtype, a.groups, out[1]);
    timer.step("unpack grad_weight");
    if (dgo_bad || in_bad) {
      apply_nonfinite(OpKind::kBackpropFilter, checked_.geo, cx, w, cdy, t, out[1]);
      timer.step("NaN/Inf terms");
    }
  }
  if (a.output_mask[2]) {
    bias_sum(go, out[2]);
    timer.step("grad_bias");
  }
  timer.print(describe());
}

}  // namespace tbex::conv_bwd
