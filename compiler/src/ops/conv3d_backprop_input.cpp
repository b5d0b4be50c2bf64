/** dX = conv3d_backprop_input: the transposed convolution (docs/data_flow.md; layouts in
 * docs/layouts.md).
 *
 * Strides use a stride-phase decomposition: output position w + pl = qw*sw + pw only receives the
 * taps kw with (pw - kw*dw) divisible by sw, reading dy at ow = qw + (pw - kw*dw)/sw. The RDom
 * predicate skips the other taps, so no multiply-add touches an inserted zero. */
#include <algorithm>

#include "ops/define.h"
#include "tbex/errors.h"

namespace tbex::ops {

using namespace Halide;

DxAlgorithm define_backprop_input(const Problem& p) {
  const ConvGeometry& geo = p.geo;
  const GroupDict& gd = p.group;
  DxAlgorithm a;
  a.filter = input_param(p.in_dtype, 4, "filter", p.filter_shape());
  a.dy = input_param(p.in_dtype, 6, "dy", p.dy_shape());
  if (p.has_bias) a.bias = input_param(p.bias_dtype, 1, "bias", p.bias_shape());
  auto [c0, qw, pw, qh, ph, qd, pd, c1, b, n, kw, kh, kd, g, w, h, d, c1g] =
      std::tie(a.c0, a.qw, a.pw, a.qh, a.ph, a.qd, a.pd, a.c1, a.b, a.n, a.kw, a.kh, a.kd, a.g,
               a.w, a.h, a.d, a.c1g);
  const auto [Kd, Kh, Kw] = ints(geo.kernel);
  const int cin1_g = (int)gd.cin1_g, cout_g = (int)gd.cout_g, Co1 = (int)geo.cout1();
  const int cin_pg = (int)geo.cin_pg(), cout_pg = (int)geo.cout_pg();
  const int mag = (int)gd.mag_factor, Cin = (int)geo.cin;
  const auto [Do, Ho, Wo] = ints(geo.out);
  const auto [sd, sh, sw] = ints(geo.stride);
  const auto [dd, dh, dw] = ints(geo.dilation);
  const auto [pf, pt, pl] = head_pads(geo);

  // Weights of real group g with input channel c1g*16+c0 innermost (the transposed conv never
  // mixes groups).
  define_group_weights(a, p, cout_pg, cin_pg, /*lanes_out=*/false);
  // dy, zero outside its volume (the transposed conv reads beyond it near the borders).
  {
    Expr oc = g * cout_g + n;
    Expr inside = w >= 0 && w < Wo && h >= 0 && h < Ho && d >= 0 && d < Do;
    Expr v = a.dy(oc % C0, clamp(w, 0, Wo - 1), clamp(h, 0, Ho - 1), min(oc / C0, Co1 - 1),
                  clamp(d, 0, Do - 1), b);
    a.dys(n, w, h, d, b, g) = select(inside, to_f32(v), 0.0f);
  }

  a.r = RDom(0, cout_g, 0, Kw, 0, Kh, 0, Kd, "r");
  RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
  // Taps of phase p along one dim: (p - k*dil) % s == 0 (Halide's % is Euclidean).
  auto taps_of_phase = [&](Expr kw, Expr kh, Expr kd) {
    Expr pred = cast<bool>(1);
    if (sw > 1) pred = pred && (pw - kw * dw) % sw == 0;
    if (sh > 1) pred = pred && (ph - kh * dh) % sh == 0;
    if (sd > 1) pred = pred && (pd - kd * dd) % sd == 0;
    return pred;
  };
  a.strided = sd > 1 || sh > 1 || sw > 1;
  if (a.strided) a.r.where(taps_of_phase(rkw, rkh, rkd));

  Expr ow = qw + (pw - rkw * dw) / sw, oh = qh + (ph - rkh * dh) / sh,
       od = qd + (pd - rkd * dd) / sd;
  Expr gi = c1 / cin1_g, c1g_i = c1 % cin1_g;
  a.acc(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
  a.acc(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
      a.dys(rn, ow, oh, od, b, gi) * a.wz(c0, c1g_i, rn, rkw, rkh, rkd, gi);

  // Back from the phase frame: w + pl = qw*sw + pw. A phase is written t - (t / s) * s, clamped
  // to [0, s) (equal to t % s for t >= 0): Halide narrows its bounds to one value for one t (not
  // those of %), so a schedule can compute the phase frame per output slice or row without
  // computing every phase of it.
  Expr tw = w + pl, th = h + pt, td = d + pf;
  auto phase = [](Expr t, int s) { return clamp(t - (t / s) * s, 0, s - 1); };
  // The output stages over an accumulator: bias, cast, back from the phase frame.
  auto tail = [&](Func acc, Func dxp, Func out) {
    Expr val = acc(c0, qw, pw, qh, ph, qd, pd, c1, b);
    if (p.has_bias) {
      Expr c = c1 * C0 + c0;
      val += select(c < Cin, to_f32(a.bias(min(c, Cin - 1))), 0.0f);
    }
    dxp(c0, qw, pw, qh, ph, qd, pd, c1, b) = from_f32(val, halide_type(p.res_dtype));
    out(c0, w, h, c1, d, b) =
        dxp(c0, tw / sw, phase(tw, sw), th / sh, phase(th, sh), td / sd, phase(td, sd), c1, b);
    constrain_shape(out.output_buffer(), p.x_shape());
  };
  tail(a.acc, a.dxp, a.out);

  // The same output read at the valid lanes only (see DxAlgorithm::out_lanes). With cin1_g == 1
  // and fewer than 16 valid lanes, real_g is 1 (mag_factor * cin_pg is a multiple of 16 otherwise),
  // so lane c0 of block c1 = 0 is channel c0 and lanes >= cin_valid are padding.
  a.cin_valid = std::min(C0, mag * cin_pg);
  if (cin1_g == 1 && a.cin_valid < C0) {
    Expr v = a.dxp(min(c0, a.cin_valid - 1), tw / sw, phase(tw, sw), th / sh, phase(th, sh),
                   td / sd, phase(td, sd), c1, b);
    a.out_lanes(c0, w, h, c1, d, b) =
        select(c0 < a.cin_valid, v, cast(halide_type(p.res_dtype), 0));
    constrain_shape(a.out_lanes.output_buffer(), p.x_shape());
  }

  // Diagonal form (cin_pg == 1): lane c0 of block c1 (= real group) is original group
  // c1*mag + c0, fed by output channels n = c0*mult + m only; wz is 0 for every other n, so
  // leaving those terms out changes no sum. Lanes beyond the groups get weight 0.
  a.diag = cin_pg == 1 && cin1_g == 1;
  if (a.diag) {
    const int M = cout_pg;
    a.mult = M;
    Var m = a.m;
    Expr nn = min(c0 * M + m, cout_g - 1);
    a.wd(c0, m, kw, kh, kd, g) = select(c0 < mag, a.wz(c0, 0, nn, kw, kh, kd, g), 0.0f);
    if (M == 1 && cout_g == C0) {  // channel g*16 + c0: dy's block g, read as a vector
      Expr inside = w >= 0 && w < Wo && h >= 0 && h < Ho && d >= 0 && d < Do;
      Expr v = a.dy(c0, clamp(w, 0, Wo - 1), clamp(h, 0, Ho - 1), min(g, Co1 - 1),
                    clamp(d, 0, Do - 1), b);
      a.dyd(c0, m, w, h, d, b, g) = select(inside, to_f32(v), 0.0f);
    } else {
      a.dyd(c0, m, w, h, d, b, g) = a.dys(nn, w, h, d, b, g);
    }
    a.rd = RDom(0, M, 0, Kw, 0, Kh, 0, Kd, "rd");
    RVar sm = a.rd[0], skw = a.rd[1], skh = a.rd[2], skd = a.rd[3];
    if (a.strided) a.rd.where(taps_of_phase(skw, skh, skd));
    Expr dow = qw + (pw - skw * dw) / sw, doh = qh + (ph - skh * dh) / sh,
         dod = qd + (pd - skd * dd) / sd;
    a.accd(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
    a.accd(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
        a.dyd(c0, sm, dow, doh, dod, b, c1) * a.wd(c0, sm, skw, skh, skd, c1);
    a.outd = Func("out");
    tail(a.accd, a.dxpd, a.outd);
  }

  // Pair form (bf16 inputs): output channels two at a time, both operands bf16 bits read as
  // bf16, so (e, c0) vectorized is a dot product of bf16 pairs per fp32 lane. Each product is
  // exact in fp32 and the sums are fp32, as in acc; only the order differs (pairs first).
  a.pairs = bf16_pairs(p);
  if (a.pairs) {
    Var e = a.e, n2 = a.n2;
    Expr nn = 2 * n2 + e;
    const auto [valid, v] = group_weight(a, p, cout_pg, cin_pg, /*lanes_out=*/false, nn);
    a.wzp(e, c0, c1g, n2, kw, kh, kd, g) = as_bf16(select(valid, v, cast<uint16_t>(0)));
    Expr oc = g * cout_g + nn;
    Expr inside = w >= 0 && w < Wo && h >= 0 && h < Ho && d >= 0 && d < Do;
    Expr dv = a.dy(oc % C0, clamp(w, 0, Wo - 1), clamp(h, 0, Ho - 1), min(oc / C0, Co1 - 1),
                   clamp(d, 0, Do - 1), b);
    a.dysp(e, n2, w, h, d, b, g) = as_bf16(select(inside, dv, cast<uint16_t>(0)));
    a.rp = RDom(0, 2, 0, cout_g / 2, 0, Kw, 0, Kh, 0, Kd, "rp");
    RVar pe = a.rp[0], pn = a.rp[1], pkw = a.rp[2], pkh = a.rp[3], pkd = a.rp[4];
    if (a.strided) a.rp.where(taps_of_phase(pkw, pkh, pkd));
    Expr pow_ = qw + (pw - pkw * dw) / sw, poh = qh + (ph - pkh * dh) / sh,
         pod = qd + (pd - pkd * dd) / sd;
    a.accp(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
    a.accp(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
        cast<float>(a.dysp(pe, pn, pow_, poh, pod, b, gi)) *
        cast<float>(a.wzp(pe, c0, c1g_i, pn, pkw, pkh, pkd, gi));
    a.outp = Func("out");
    tail(a.accp, a.dxpp, a.outp);
  }
  return a;
}

}  // namespace tbex::ops
