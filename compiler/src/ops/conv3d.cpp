/** Forward conv3d: y = conv(x, W), the gradient w.r.t. the input of a transposed convolution.
 *
 * The filter is the FRACTAL_Z_3D packing of the per-group transposed weight (Problem::group is
 * that packing's group_dict, Cin and Cout swapped), so the 16 lanes of a fractal row are output
 * channels: each reduction step multiplies one broadcast x value by a vector of 16 outputs. */
#include "ops/define.h"
#include "tbex/errors.h"

namespace tbex::ops {

using namespace Halide;

FwdAlgorithm define_forward(const Problem& p) {
  const ConvGeometry& geo = p.geo;
  const GroupDict& gd = p.group;  // packing of [Cin, Cout/groups, K...]: roles swapped
  internal_check(p.op == OpKind::kForward, "define_forward on a non-forward problem");
  FwdAlgorithm a;
  a.x = input_param(p.in_dtype, 6, "x", p.x_shape());
  a.filter = input_param(p.in_dtype, 4, "filter", p.filter_shape());
  auto [c0, wo, ho, c1, od, b, n, kw, kh, kd, g, w, h, d, c1g] =
      std::tie(a.c0, a.wo, a.ho, a.c1, a.od, a.b, a.n, a.kw, a.kh, a.kd, a.g, a.w, a.h, a.d,
               a.c1g);
  // Per real group: out1_g blocks of output channels, in_g input channels.
  const int out1_g = (int)gd.cin1_g, in_g = (int)gd.cout_g;
  const int Cin = (int)geo.cin, Cout = (int)geo.cout, C1 = (int)geo.cin1();
  const auto [Kd, Kh, Kw] = ints(geo.kernel);
  const auto [D, H, W] = ints(geo.in);
  const auto [sd, sh, sw] = ints(geo.stride);
  const auto [dd, dh, dw] = ints(geo.dilation);
  const auto [pf, pt, pl] = head_pads(geo);

  // Weights of real group g with output channel c1g*16+c0 innermost (padding lanes fall in no
  // group).
  define_group_weights(a, p, (int)geo.cin_pg(), (int)geo.cout_pg(), /*lanes_out=*/true);
  // x in the padded frame with the input channel of real group g innermost (the broadcast
  // operand), 0 outside the volume and past Cin.
  {
    Expr ic = g * in_g + n;
    Expr wi = w - pl, hi = h - pt, di = d - pf;
    Expr inside = wi >= 0 && wi < W && hi >= 0 && hi < H && di >= 0 && di < D && ic < Cin;
    Expr v = a.x(ic % C0, clamp_inside(wi, W), clamp_inside(hi, H), min(ic / C0, C1 - 1),
                 clamp_inside(di, D), b);
    a.xs(n, w, h, d, b, g) = select(inside, to_f32(v), 0.0f);
  }

  a.r = RDom(0, in_g, 0, Kw, 0, Kh, 0, Kd, "r");
  RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
  // Taps whose x row lies in the depth or height padding are left out (as in dX: Halide narrows
  // the tap loops of each output row); along the row the tile's positions share every tap.
  {
    Expr di = od * sd + rkd * dd - pf, hi = ho * sh + rkh * dh - pt;
    if (skips_outside(p, 0)) a.r.where(di >= 0 && di < D);
    if (skips_outside(p, 1)) a.r.where(hi >= 0 && hi < H);
  }
  Expr gi = c1 / out1_g, c1g_i = c1 % out1_g;
  a.acc(c0, wo, ho, c1, od, b) = 0.0f;
  a.acc(c0, wo, ho, c1, od, b) +=
      a.xs(rn, wo * sw + rkw * dw, ho * sh + rkh * dh, od * sd + rkd * dd, b, gi) *
      a.wz(c0, c1g_i, rn, rkw, rkh, rkd, gi);

  // Padding lanes are written 0 whatever x holds (0 * inf would not be).
  Expr valid_lane = c1 * C0 + c0 < Cout;
  a.out(c0, wo, ho, c1, od, b) =
      select(valid_lane, from_f32(a.acc(c0, wo, ho, c1, od, b), halide_type(p.res_dtype)),
             from_f32(0.0f, halide_type(p.res_dtype)));
  constrain_shape(a.out.output_buffer(), p.dy_shape());
  return a;
}

}  // namespace tbex::ops
