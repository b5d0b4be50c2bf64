/** NaN and Inf in convolution_backward's inputs: each output is NaN / Inf exactly where a term of
 * its defining sum is, as in PyTorch (docs/arithmetic.md, "NaN and Inf"). The kernels multiply
 * whole packed blocks: a zero weight pairing two groups, or a zero-padded dy position under a
 * weight tap, would turn a NaN or Inf into NaN where no term carries one. So when an operand
 * holds such values, the kernels run on a copy where they are 0 (every finite term exact), and
 * the outputs the non-finite terms reach get the class their IEEE sum has.
 *
 * Terms, for the conv C whose kernels run (x [N, Cin, in], W [Cout, Cin/g, K], dy [N, Cout, out];
 * position j = o*stride - pad_head + k*dilation), always with j inside x (a padded position is no
 * term: padding never multiplies a NaN weight or gradient into an output) and ci, co in the
 * same group:
 *  - dX (grad_input):  W[co, ci', k] * dy[n, co, o];
 *  - dW (grad_weight): x[n, ci, j] * dy[n, co, o];
 *  - forward (a transposed conv's grad_input): W[co, ci', k] * x[n, ci, j].
 * (PyTorch agrees where it computes with oneDNN; its im2col paths also multiply padding zeros.)
 * grad_bias sums the caller's own grad_output (exact as is). */
#include <cmath>
#include <cstring>

#include "conv_backward_impl.h"
#include "tbex/log.h"

namespace tbex::conv_bwd {
namespace {

/** The value the kernels compute with: rounded to the compute dtype (an fp32 1e5 is Inf in fp16). */
float as_computed(float v, DType t) {
  if (t == DType::kFloat16) return half_to_float(float_to_half(v));
  if (t == DType::kBFloat16) return bf16_to_float(float_to_bf16(v));
  return v;
}

int64_t offset(const View5& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t i4) {
  return i0 * v.strides[0] + i1 * v.strides[1] + i2 * v.strides[2] + i3 * v.strides[3] +
         i4 * v.strides[4];
}

template <class F>
void for_each5(const std::array<int64_t, 5>& s, F&& f) {
  for (int64_t a = 0; a < s[0]; ++a)
    for (int64_t b = 0; b < s[1]; ++b)
      for (int64_t c = 0; c < s[2]; ++c)
        for (int64_t d = 0; d < s[3]; ++d)
          for (int64_t e = 0; e < s[4]; ++e) f(a, b, c, d, e);
}

enum : uint8_t { kNaN = 1, kPosInf = 2, kNegInf = 4 };

/** The class of a * b when either is non-finite (0 for a finite product). */
uint8_t term_class(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  if (!std::isinf(a) && !std::isinf(b)) return 0;
  if (a == 0.0f || b == 0.0f) return kNaN;
  return std::signbit(a) != std::signbit(b) ? kNegInf : kPosInf;
}

/** Per-output flags of the non-finite terms, over a dense 5-D index of the output's shape. */
struct Flags {
  std::array<int64_t, 5> shape;
  std::vector<uint8_t> bits;
  explicit Flags(const std::array<int64_t, 5>& s) : shape(s) {
    bits.assign(size_t(s[0] * s[1] * s[2] * s[3] * s[4]), 0);
  }
  void add(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, uint8_t cls) {
    if (cls) bits[size_t((((a * shape[1] + b) * shape[2] + c) * shape[3] + d) * shape[4] + e)] |= cls;
  }
  /** The output's fast-path value r (the finite terms' sum) combined with the flags. */
  void apply(const View5& out) const {
    size_t i = 0;
    for_each5(shape, [&](int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
      const uint8_t f = bits[i++];
      if (!f) return;
      const int64_t off = offset(out, a, b, c, d, e);
      const float r = load_f32(out.data, off, out.dtype);
      const bool pos = f & kPosInf, neg = f & kNegInf;
      const bool nan = (f & kNaN) || std::isnan(r) || (pos && neg) || (pos && r == -INFINITY) ||
                       (neg && r == INFINITY);
      store_f32(out.data, off, out.dtype, nan ? NAN : pos ? INFINITY : -INFINITY);
    });
  }
};

/** The conv C's operands as the terms read them (computed values), and its geometry. */
struct Terms {
  const ConvGeometry& g;
  View5 x, w, dy;  // caller views: x [N, Cin, in], w [Cout, Cin/g, K], dy [N, Cout, out]
  DType t;         // compute dtype
  float xv(int64_t n, int64_t ci, const std::array<int64_t, 3>& j) const {
    return as_computed(load_f32(x.data, offset(x, n, ci, j[0], j[1], j[2]), x.dtype), t);
  }
  float wv(int64_t co, int64_t cig, const std::array<int64_t, 3>& k) const {
    return as_computed(load_f32(w.data, offset(w, co, cig, k[0], k[1], k[2]), w.dtype), t);
  }
  float dyv(int64_t n, int64_t co, const std::array<int64_t, 3>& o) const {
    return as_computed(load_f32(dy.data, offset(dy, n, co, o[0], o[1], o[2]), dy.dtype), t);
  }
  bool inside_x(const std::array<int64_t, 3>& j) const {
    for (int i = 0; i < 3; ++i)
      if (j[i] < 0 || j[i] >= g.in[i]) return false;
    return true;
  }
  std::array<int64_t, 3> pos(const std::array<int64_t, 3>& o, const std::array<int64_t, 3>& k) const {
    std::array<int64_t, 3> j;
    for (int i = 0; i < 3; ++i) j[i] = o[i] * g.stride[i] - g.pads[2 * i] + k[i] * g.dilation[i];
    return j;
  }
  /** o with pos(o, k) == j, if there is one inside dy. */
  bool out_of(const std::array<int64_t, 3>& j, const std::array<int64_t, 3>& k, std::array<int64_t, 3>& o) const {
    for (int i = 0; i < 3; ++i) {
      const int64_t num = j[i] + g.pads[2 * i] - k[i] * g.dilation[i];
      if (num < 0 || num % g.stride[i] != 0) return false;
      o[i] = num / g.stride[i];
      if (o[i] >= g.out[i]) return false;
    }
    return true;
  }
  template <class F>
  void each3(const std::array<int64_t, 3>& ext, F&& f) const {
    for (int64_t a = 0; a < ext[0]; ++a)
      for (int64_t b = 0; b < ext[1]; ++b)
        for (int64_t c = 0; c < ext[2]; ++c) f(std::array<int64_t, 3>{a, b, c});
  }
  template <class F>
  void nonfinite(const View5& v, F&& f) const {
    for_each5(v.shape, [&](int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
      const float val = as_computed(load_f32(v.data, offset(v, a, b, c, d, e), v.dtype), t);
      if (!std::isfinite(val)) f(a, b, std::array<int64_t, 3>{c, d, e});
    });
  }
};

/** One term of conv C: W[co, cig, k] (ci = its group's base + cig), x[n, ci, j], dy[n, co, o]
 * with j = pos(o, k) inside x. */
struct Term {
  int64_t n, co, ci, cig;
  std::array<int64_t, 3> o, k, j;
};

/** Calls visit(term) for every term that reads a NaN / Inf of x, W or dy (those `op` multiplies:
 * dX reads W and dy, dW x and dy, the forward conv W and x). A term with two such values is
 * visited twice; flags do not mind. */
template <class F>
void each_nonfinite_term(OpKind op, const Terms& T, F&& visit) {
  const ConvGeometry& g = T.g;
  const int64_t cin_pg = g.cin_pg(), cout_pg = g.cout_pg();
  auto group_ci = [&](int64_t co, int64_t cig) { return co / cout_pg * cin_pg + cig; };
  if (op != OpKind::kBackpropInput)
    T.nonfinite(T.x, [&](int64_t n, int64_t ci, const std::array<int64_t, 3>& j) {
      const int64_t grp = ci / cin_pg;
      for (int64_t co = grp * cout_pg; co < (grp + 1) * cout_pg; ++co)
        T.each3(g.kernel, [&](const std::array<int64_t, 3>& k) {
          std::array<int64_t, 3> o;
          if (T.out_of(j, k, o)) visit(Term{n, co, ci, ci % cin_pg, o, k, j});
        });
    });
  if (op != OpKind::kBackpropFilter)
    T.nonfinite(T.w, [&](int64_t co, int64_t cig, const std::array<int64_t, 3>& k) {
      for (int64_t n = 0; n < g.n; ++n)
        T.each3(g.out, [&](const std::array<int64_t, 3>& o) {
          const auto j = T.pos(o, k);
          if (T.inside_x(j)) visit(Term{n, co, group_ci(co, cig), cig, o, k, j});
        });
    });
  if (op != OpKind::kForward)
    T.nonfinite(T.dy, [&](int64_t n, int64_t co, const std::array<int64_t, 3>& o) {
      for (int64_t cig = 0; cig < cin_pg; ++cig)
        T.each3(g.kernel, [&](const std::array<int64_t, 3>& k) {
          const auto j = T.pos(o, k);
          if (T.inside_x(j)) visit(Term{n, co, group_ci(co, cig), cig, o, k, j});
        });
    });
}

}  // namespace

View5 Sanitized::copy(const View5& src, DType t) {
  const auto& s = src.shape;
  const size_t es = dtype_size(src.dtype);
  auto& buf = bufs.emplace_back(size_t(s[0] * s[1] * s[2] * s[3] * s[4]) * es);
  const View5 v{buf.data(), s, {s[1] * s[2] * s[3] * s[4], s[2] * s[3] * s[4], s[3] * s[4], s[4], 1},
                src.dtype};
  for_each5(s, [&](int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    const int64_t from = offset(src, a, b, c, d, e), to = offset(v, a, b, c, d, e);
    if (std::isfinite(as_computed(load_f32(src.data, from, src.dtype), t)))
      std::memcpy(buf.data() + to * es, static_cast<const char*>(src.data) + from * es, es);
    else
      store_f32(buf.data(), to, src.dtype, 0.0f);
  });
  return v;
}

void apply_nonfinite(OpKind op, const ConvGeometry& g, const View5& x, const View5& w,
                     const View5& dy, DType t, const View5& out) {
  const Terms T{g, x, w, dy, t};
  Flags F(out.shape);
  each_nonfinite_term(op, T, [&](const Term& m) {
    if (op == OpKind::kBackpropInput)  // grad_input[n, ci, j] += W * dy
      F.add(m.n, m.ci, m.j[0], m.j[1], m.j[2], term_class(T.wv(m.co, m.cig, m.k), T.dyv(m.n, m.co, m.o)));
    else if (op == OpKind::kBackpropFilter)  // grad_weight[co, cig, k] += x * dy
      F.add(m.co, m.cig, m.k[0], m.k[1], m.k[2], term_class(T.xv(m.n, m.ci, m.j), T.dyv(m.n, m.co, m.o)));
    else  // y[n, co, o] += W * x
      F.add(m.n, m.co, m.o[0], m.o[1], m.o[2], term_class(T.wv(m.co, m.cig, m.k), T.xv(m.n, m.ci, m.j)));
  });
  F.apply(out);
  if (log::enabled("conv"))
    log::print("conv", std::string("NaN/Inf in the operands of ") + op_name(op) +
                           ": kernels ran on a copy without them, then their terms were applied");
}

}  // namespace tbex::conv_bwd
