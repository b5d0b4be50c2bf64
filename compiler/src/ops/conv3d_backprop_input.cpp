/** dX = conv3d_backprop_input: the transposed convolution (docs/data_flow.md; layouts in
 * docs/layouts.md).
 *
 * Strides use a stride-phase decomposition: input position w = qw*sw + pw only receives the taps
 * kw with (pw + pl - kw*dw) divisible by sw, reading dy at ow = qw + (pw + pl - kw*dw)/sw. The
 * reduction walks only those taps (PhaseTaps), so no multiply-add touches an inserted zero. The
 * frame starts at w = 0 (not at the padded frame's origin) so that every phase holds
 * ceil((W - pw)/sw) positions: a frame offset by the pad would make the phases' union one
 * position wider than each, and every phase would compute it. */
#include <algorithm>
#include <numeric>

#include "ops/define.h"
#include "tbex/errors.h"

namespace tbex::ops {

using namespace Halide;

namespace {

/** The taps of phase `p` along one dim (kernel K, stride s, dilation dl, leading pad pad): those
 * k with k*dl = p + pad (mod s). With g = gcd(s, dl) they exist iff g divides p + pad, and are
 * k0 + j*step (step = s/g, k0 the least solution), j < ceil(K/step); the RDom walks j. */
struct PhaseTaps {
  int extent = 1;  ///< j's extent: ceil(K/step), the most taps one phase has
  Expr tap;        ///< k of (p, j), at most K-1 (clamped where j is past the phase's last tap)
  Expr valid;      ///< j names a real tap of phase p (a constant true without a stride)
};

PhaseTaps phase_taps(Expr p, Expr j, int K, int s, int dl, int pad) {
  PhaseTaps t;
  t.extent = phase_tap_extent(K, s, dl);
  if (s == 1) {
    t.tap = j, t.valid = cast<bool>(1);
    return t;
  }
  const int g = std::gcd(s, dl), step = s / g;
  int inv = 0;  // (dl/g)^-1 mod step
  while ((inv * (dl / g)) % step != 1 % step) ++inv;
  Expr r = p + pad;
  Expr k0 = ((r / g) * inv) % step;
  Expr k = k0 + j * step;
  t.tap = min(k, K - 1);
  t.valid = k < K;
  if (g > 1) t.valid = t.valid && r % g == 0;
  return t;
}

}  // namespace

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
  // Whether dy position (w, h, d) is inside its volume; the width's condition is likely: a
  // schedule reading dy in place partitions the row's tiles on it, so the inner tiles read dy
  // without the select and the edge tiles' taps into the pads read a constant 0 and fold away.
  Expr dy_inside = likely(w >= 0 && w < Wo) && h >= 0 && h < Ho && d >= 0 && d < Do;
  // dy, zero outside its volume (the transposed conv reads beyond it near the borders). A 1x1x1
  // kernel without pads reads only inside (phase 0 at ow < ceil(W/s) = Wo; the other phases have
  // no taps), so it reads dy as is: no select or clamp left in a loop that reads dy in place.
  {
    Expr oc = g * cout_g + n;
    a.dyc(n, w, h, d, b, g) = to_f32(a.dy(oc % C0, w, h, min(oc / C0, Co1 - 1), d, b));
    const bool reads_inside = Kd * Kh * Kw == 1 && pf == 0 && pt == 0 && pl == 0;
    if (reads_inside) {
      a.dys(n, w, h, d, b, g) = a.dyc(n, w, h, d, b, g);
    } else {
      Expr v = a.dyc(n, clamp_inside(w, Wo), clamp_inside(h, Ho), clamp_inside(d, Do), b, g);
      a.dys(n, w, h, d, b, g) = select(dy_inside, v, 0.0f);
    }
  }

  a.strided = sd > 1 || sh > 1 || sw > 1;
  a.in_extent = ints(geo.in);
  a.stride = {sd, sh, sw};
  a.x_shape = p.x_shape();
  a.scatter = dx_scatters(p);
  // Every form's reduction: its leading dims (output channels, one at a time or in pairs), then
  // (jw, jh, jd), the taps of the phase only (see PhaseTaps), predicated on j naming a real tap
  // when strided; with the taps it names and the dy positions they read in the phase frame.
  // Taps reading dy outside its depth or height (the border rows of dX) are left out by the
  // predicate too: Halide narrows the tap loops of each row to the taps inside, so those
  // multiply-adds of zero padding are not executed (8-10% of e1's and f's dX on a Zen 3), in
  // the dims that have such taps (skips_outside). Along the row the taps stay whole: the
  // positions of a register tile share its tap loops, and a predicate on the position would
  // split the tile (a schedule that unrolls a row's few tiles and reads dy in place has the
  // padding select fold those taps away instead: dx_tiled).
  const bool skip_d = skips_outside(p, 0), skip_h = skips_outside(p, 1);
  struct Taps {
    PhaseTaps w, h, d;
  };
  struct PhaseReduction {
    RDom r;
    Taps tap;
    Expr ow, oh, od;
  };
  auto phase_reduction = [&](std::vector<Range> dims, const char* name, bool skip_outside = true) {
    const int k = (int)dims.size();
    dims.insert(dims.end(), {{0, phase_tap_extent(Kw, sw, dw)}, {0, phase_tap_extent(Kh, sh, dh)},
                             {0, phase_tap_extent(Kd, sd, dd)}});
    RDom r(dims, name);
    const Taps t{phase_taps(pw, r[k], Kw, sw, dw, pl), phase_taps(ph, r[k + 1], Kh, sh, dh, pt),
                 phase_taps(pd, r[k + 2], Kd, sd, dd, pf)};
    if (a.strided) r.where(t.w.valid && t.h.valid && t.d.valid);
    PhaseReduction pr{r, t, qw + (pw + pl - t.w.tap * dw) / sw, qh + (ph + pt - t.h.tap * dh) / sh,
                      qd + (pd + pf - t.d.tap * dd) / sd};
    if (skip_outside && skip_d) pr.r.where(pr.od >= 0 && pr.od < Do);
    if (skip_outside && skip_h) pr.r.where(pr.oh >= 0 && pr.oh < Ho);
    return pr;
  };
  const PhaseReduction pr = phase_reduction({{0, cout_g}}, "r");
  a.r = pr.r;
  RVar rn = a.r[0];
  Expr gi = c1 / cin1_g, c1g_i = c1 % cin1_g;
  a.acc(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
  a.acc(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
      a.dys(rn, pr.ow, pr.oh, pr.od, b, gi) *
      a.wz(c0, c1g_i, rn, pr.tap.w.tap, pr.tap.h.tap, pr.tap.d.tap, gi);

  // Back from the phase frame: w = qw*sw + pw. A phase is written t - (t / s) * s, clamped
  // to [0, s) (equal to t % s for t >= 0): Halide narrows its bounds to one value for one t (not
  // those of %), so a schedule can compute the phase frame per output slice or row without
  // computing every phase of it.
  Expr tw = w, th = h, td = d;
  auto phase = [](Expr t, int s) { return clamp(t - (t / s) * s, 0, s - 1); };
  // A sum of block c1, lane c0 with the bias added and cast to the result type.
  auto result = [&](Expr val) {
    if (p.has_bias) {
      Expr c = c1 * C0 + c0;
      val += select(c < Cin, to_f32(a.bias(min(c, Cin - 1))), 0.0f);
    }
    return from_f32(val, halide_type(p.res_dtype));
  };
  // An extern stage of fp32 sums (c0, w, h, c1, d, b): the output itself, written by the
  // extern in place, where the result is fp32 without a bias (`in_place`), else a Func the
  // output stage reads.
  auto extern_sums = [&](Func& ext, const std::string& fn, const std::vector<ExternFuncArgument>& args,
                         bool in_place) {
    if (in_place) ext = Func("out");
    ext.define_extern(fn, args, Float(32), {c0, w, h, c1, d, b}, NameMangling::C);
    if (in_place) constrain_shape(ext.output_buffer(), p.x_shape());
  };
  // The output stage over an extern stage's sums in the output's frame: bias, cast.
  auto output_of = [&](Func ext) {
    Func out("out");
    out(c0, w, h, c1, d, b) = result(ext(c0, w, h, c1, d, b));
    constrain_shape(out.output_buffer(), p.x_shape());
    return out;
  };
  // The output stages over an accumulator: bias, cast, back from the phase frame.
  auto tail = [&](Func acc, Func dxp, Func out) {
    dxp(c0, qw, pw, qh, ph, qd, pd, c1, b) = result(acc(c0, qw, pw, qh, ph, qd, pd, c1, b));
    out(c0, w, h, c1, d, b) =
        dxp(c0, tw / sw, phase(tw, sw), th / sh, phase(th, sh), td / sd, phase(td, sd), c1, b);
    constrain_shape(out.output_buffer(), p.x_shape());
  };
  tail(a.acc, a.dxp, a.out);

  // The same output read at the valid lanes only (see DxAlgorithm::out_lanes). With cin1_g == 1
  // and fewer than 16 valid lanes, real_g is 1 (mag_factor * cin_pg is a multiple of 16 otherwise),
  // so lane c0 of block c1 = 0 is channel c0 and lanes >= cin_valid are padding.
  a.cin_valid = cin_valid(p);
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
      Expr v = a.dy(c0, clamp_inside(w, Wo), clamp_inside(h, Ho), min(g, Co1 - 1),
                    clamp_inside(d, Do), b);
      a.dyd(c0, m, w, h, d, b, g) = select(inside, to_f32(v), 0.0f);
    } else {
      a.dyd(c0, m, w, h, d, b, g) = a.dys(nn, w, h, d, b, g);
    }
    const PhaseReduction rd = phase_reduction({{0, M}}, "rd");
    a.rd = rd.r;
    RVar sm = a.rd[0];
    const Taps& ts = rd.tap;
    a.accd(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
    a.accd(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
        a.dyd(c0, sm, rd.ow, rd.oh, rd.od, b, c1) * a.wd(c0, sm, ts.w.tap, ts.h.tap, ts.d.tap, c1);
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
    // Channel 2*n2 + e of group g: the pair's first channel fixes the 6HD block and lane (cout_g
    // is even, so a pair never straddles two blocks) and e adds to the lane, so vectorized over
    // e the pair is one 4-byte load of dy.
    Expr oc2 = g * cout_g + 2 * n2;
    Expr dv = as_bf16(a.dy(oc2 % C0 + e, clamp_inside(w, Wo), clamp_inside(h, Ho),
                           min(oc2 / C0, Co1 - 1), clamp_inside(d, Do), b));
    // No pair reading a pad: no select. The clamps stay, for schedules whose rounded-up tiles
    // compute (and drop) positions past the row.
    const bool in_place = dysp_reads_dy(p);
    a.dysp(e, n2, w, h, d, b, g) =
        dysp_is_dy(p) ? dv : select(dy_inside, dv, Internal::make_zero(BFloat(16)));
    a.dysk(n, w, h, d, b, g) = a.dysp(n % 2, n / 2, w, h, d, b, g);
    {
      const int half = cout_g / 2, taps = Kd * Kh * Kw;
      Var row("row");
      Expr tap = (row / half) % taps, blk = row / (half * taps);
      a.wzk(e, c0, row) = a.wzp(e, c0, blk % cin1_g, row % half, tap % Kw, (tap / Kw) % Kh,
                                tap / (Kw * Kh), blk / cin1_g);
    }
    // Where dy can be read in place, the pairs of a 6HD block are walked inside the blocks: each
    // loop's dy address is then affine (a block's 8 pairs 4 bytes apart, the blocks a plane
    // apart). Staged, that walk ran level with one loop over the pairs (c1 dX, Zen 4).
    const PhaseReduction rp =
        in_place ? phase_reduction({{0, 2}, {0, C0 / 2}, {0, cout_g / C0}}, "rp")
                 : phase_reduction({{0, 2}, {0, cout_g / 2}}, "rp");
    a.rp = rp.r;
    RVar pe = a.rp[0];
    Expr pn = in_place ? a.rp[1] + a.rp[2] * (C0 / 2) : Expr(a.rp[1]);
    const Taps& tp = rp.tap;
    a.accp(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
    a.accp(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
        cast<float>(a.dysp(pe, pn, rp.ow, rp.oh, rp.od, b, gi)) *
        cast<float>(a.wzp(pe, c0, c1g_i, pn, tp.w.tap, tp.h.tap, tp.d.tap, gi));
    a.outp = Func("out");
    tail(a.accp, a.dxpp, a.outp);

    // Strided, the tile's reduction is predicated like r: the predicate names only the taps
    // (outer loops of the tile multiply, never its lanes), so Halide's tile matcher takes it.
    // It keeps the taps outside dy: the AMX tile loops were verified without that predicate.
    const PhaseReduction rt = phase_reduction({{0, cout_g}}, "rt", /*skip_outside=*/false);
    a.rt = rt.r;
    RVar tk = a.rt[0];
    const Taps& tt = rt.tap;
    Expr wrow = a.wzk(tk % 2, c0,
                      (((c1 * Kd + tt.d.tap) * Kh + tt.h.tap) * Kw + tt.w.tap) * (cout_g / 2) + tk / 2);
    a.acct(c0, qw, pw, qh, ph, qd, pd, c1, b) = 0.0f;
    a.acct(c0, qw, pw, qh, ph, qd, pd, c1, b) +=
        cast<float>(a.dysk(tk, rt.ow, rt.oh, rt.od, b, gi)) * cast<float>(wrow);
    a.outt = Func("out");
    tail(a.acct, a.dxpt, a.outt);

    // Blocked tile form: the same sums (over k and the taps) from tbex_amx_dx, which reads dy
    // as the caller holds it (staging the rows each call reaches itself) and the weights as
    // wzk's rows, in the output's own frame (strides and all).
    a.blocked = dx_blocks(p);
    if (a.blocked) {
      a.kk = dx_k_step(p);
      const std::vector<ExternFuncArgument> args = {
          a.dy.parameter(), a.wzk,    Expr(Do), Expr(Ho), Expr(Wo), Expr(Co1), Expr(Kd),
          Expr(Kh),         Expr(Kw), Expr(sd), Expr(sh), Expr(sw), Expr(dd),  Expr(dh),
          Expr(dw),         Expr(pf), Expr(pt), Expr(pl), Expr(cin1_g), Expr(cout_g), Expr(a.kk)};
      a.blocks_out = dx_blocks_out(p);
      extern_sums(a.ext, "tbex_amx_dx", args, a.blocks_out);
      a.outb = a.blocks_out ? a.ext : output_of(a.ext);
    }

    // Tap column form: dX in the output's frame from tbex_amx_dx_cols, its weights as rows of
    // 16 (kw, channel) column pairs: row ((kd*Kh + kh)*tiles + t)*cout_g/2 + n2, column
    // t*16 + j = kw*lanes + ci (0 past Kw's taps; wzp is 0 past the valid channels).
    a.cols = dx_cols(p);
    if (a.cols) {
      const int lanes = amx_dx_cols_lanes(a.cin_valid), tiles = amx_dx_cols_tiles(Kw, lanes);
      const int half = cout_g / 2;
      Var j("j"), row("row");
      Expr col = ((row / half) % tiles) * 16 + j, khd = row / (half * tiles);
      Expr kwc = col / lanes;
      Expr v = a.wzp(e, col % lanes, 0, row % half, min(kwc, Kw - 1), khd % Kh, khd / Kh, 0);
      a.wzc(e, j, row) = as_bf16(select(kwc < Kw, reinterpret(UInt(16), v), cast<uint16_t>(0)));
      const std::vector<ExternFuncArgument> args = {
          a.dy.parameter(), a.wzc, Expr(Do), Expr(Ho), Expr(Wo), Expr(Co1), Expr(Kd), Expr(Kh),
          Expr(Kw), Expr(sd), Expr(sh), Expr(sw), Expr(dd), Expr(dh), Expr(dw), Expr(pf),
          Expr(pt), Expr(pl), Expr(cout_g), Expr(dx_k_step(p)), Expr(lanes)};
      a.cols_out = dx_blocks_out(p);
      extern_sums(a.extc, "tbex_amx_dx_cols", args, a.cols_out);
      a.outc = a.cols_out ? a.extc : output_of(a.extc);
    }
  }
  return a;
}

RDom DxAlgorithm::use_scatter() {
  internal_check(scatter, "the scatter form needs a strided dX whose extents its strides divide");
  const auto [D, H, W] = in_extent;
  const auto [sd, sh, sw] = stride;
  RDom rs({{0, W / sw}, {0, sw}, {0, H / sh}, {0, sh}, {0, D / sd}, {0, sd}}, "rs");
  Expr tw = rs[0] * sw + rs[1], th = rs[2] * sh + rs[3], td = rs[4] * sd + rs[5];
  Func o("out");
  o(c0, w, h, c1, d, b) = undef(dxp.type());
  o(c0, tw, th, c1, td, b) = dxp(c0, rs[0], rs[1], rs[2], rs[3], rs[4], rs[5], c1, b);
  constrain_shape(o.output_buffer(), x_shape);
  out = o;
  return rs;
}

}  // namespace tbex::ops
