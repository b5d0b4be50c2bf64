/** dW = conv3d_backprop_filter (docs/data_flow.md; layouts in docs/layouts.md). */
#include <algorithm>
#include <functional>
#include <utility>

#include "ops/define.h"
#include "tbex/errors.h"

namespace tbex::ops {

using namespace Halide;

DwAlgorithm define_backprop_filter(const Problem& p) {
  DwAlgorithm a;
  a.x = input_param(p.in_dtype, 6, "x", p.x_shape());
  a.dy = input_param(p.in_dtype, 6, "dy", p.dy_shape());
  const ConvGeometry& geo = p.geo;
  const GroupDict& gd = p.group;

  const auto [D, H, W] = ints(geo.in);
  const auto [pf, pt, pl] = head_pads(geo);
  const auto [sd, sh, sw] = ints(geo.stride);
  const auto [dd, dh, dw] = ints(geo.dilation);
  const int Kh = (int)geo.kernel[1], Kw = (int)geo.kernel[2];
  const int C1 = (int)geo.cin1(), Co1 = (int)geo.cout1();
  const int cin1_g = (int)gd.cin1_g, cout_g = (int)gd.cout_g;
  auto [c0, n, kw, kh, c1g, kd, g, w, h, d, b] =
      std::tie(a.c0, a.n, a.kw, a.kh, a.c1g, a.kd, a.g, a.w, a.h, a.d, a.b);

  // x in the padded frame: coordinates shifted by the front/top/left pads (as stored: the value
  // and whether it is inside the dims `zeros` names; undefined where it names none). Those
  // dims' clamps keep likely() (clamp_inside), so Halide partitions the loops over their rows at
  // the pads. The other dims' clamps only bound the reads for Halide, and depth and height are
  // clamped there without likely(): with x read in place, a likely() on a coordinate the row
  // loop does not walk kept Halide from partitioning the row at its pads (e1 dW 5.1 against 3.8
  // ms).
  auto x_padded = [&](Expr w, Expr h, Expr lane = Expr(),
                      const std::function<bool(int)>& zeros = [](int) { return true; },
                      Expr batch = Expr()) {
    Expr inside;
    const auto coord = [&](int dim, Expr i, int extent) {
      if (!zeros(dim)) return dim == 2 ? clamp_inside(i, extent) : clamp(i, 0, extent - 1);
      Expr in = i >= 0 && i < extent;
      inside = inside.defined() ? (inside && in) : in;
      return clamp_inside(i, extent);
    };
    Expr cw = coord(2, w - pl, W), ch = coord(1, h - pt, H);
    // Depth and batch, the dims a reduction split divides, are clamped to x's own extent
    // (clamp_to_input: a constant clamp is lost under a split's tail).
    Expr cd = clamp_to_input(a.x, 4, coord(0, d - pf, D)),
         cb = clamp_to_input(a.x, 5, batch.defined() ? batch : Expr(b));
    Expr c1 = min(g * cin1_g + c1g, C1 - 1);
    return std::make_pair(inside, a.x(lane.defined() ? lane : Expr(c0), cw, ch, c1, cd, cb));
  };
  {
    const auto [inside, v] = x_padded(w, h);
    a.xs(c0, w, h, c1g, d, b, g) = select(inside, to_f32(v), 0.0f);
  }
  // x as acc reads it: zeros only in the dims whose pad taps the reduction keeps.
  {
    const auto [inside, v] = x_padded(w, h, Expr(), [&](int dim) { return keeps_pad_taps(p, dim); });
    a.xr(c0, w, h, c1g, d, b, g) = inside.defined() ? select(inside, to_f32(v), 0.0f) : to_f32(v);
  }
  // dy's bits of output channel n of real group g. Its slice and batch, the dims a reduction
  // split divides, are clamped to dy's own extent (clamp_to_input: a constant clamp is lost
  // under a split's tail).
  const auto dy_bits = [&](Expr w, Expr h, Expr d, Expr batch) {
    Expr oc = g * cout_g + n;
    return a.dy(oc % C0, w, h, min(oc / C0, Co1 - 1), clamp_to_input(a.dy, 4, d),
                clamp_to_input(a.dy, 5, batch));
  };
  // dy with the output channel innermost (broadcast operand of the GEMM).
  a.dys(n, w, h, d, b, g) = to_f32(dy_bits(w, h, d, b));

  auto positions = [&](const char* name) {
    return RDom(0, (int)geo.out[2], 0, (int)geo.out[1], 0, (int)geo.out[0], 0, (int)geo.n, name);
  };
  a.r = positions("r");
  RVar rwo = a.r[0], rho = a.r[1], rdo = a.r[2], rb = a.r[3];
  // Rows and depth slices whose tap falls into the pads multiply zeros: the predicate leaves
  // them out (skips_outside; xr relies on it), and Halide narrows each tile's row and depth
  // loops to the rows inside (e1 dW 8%, f dW 5% faster on a Zen 3). Along the row, where the
  // position loop runs the tile's steps with the kw taps unrolled inside, the width condition is
  // `likely`: Halide partitions the loop into its edge positions (their pad taps left out) and a
  // steady loop free of the checks. The diagonal form keeps every row (rd): dw_diag unrolls the
  // taps kh inside its row loop, where the predicate would be a branch per tap.
  // skip_pad_taps leaves out of `r` the taps of output position (wo, ho, do) that read x's pads.
  const auto skip_pad_taps = [&](RDom& r, Expr wo, Expr ho, Expr dpo) {
    Expr di = dpo * sd + kd * dd - pf, hi = ho * sh + kh * dh - pt, wi = wo * sw + kw * dw - pl;
    if (skips_outside(p, 0)) r.where(di >= 0 && di < D);
    if (skips_outside(p, 1)) r.where(hi >= 0 && hi < H);
    if (skips_outside(p, 2)) r.where(likely(wi >= 0) && likely(wi < W));
  };
  skip_pad_taps(a.r, rwo, rho, rdo);
  a.acc(c0, n, kw, kh, c1g, kd, g) = 0.0f;
  a.acc(c0, n, kw, kh, c1g, kd, g) +=
      a.dys(n, rwo, rho, rdo, rb, g) *
      a.xr(c0, rwo * sw + kw * dw, rho * sh + kh * dh, c1g, rdo * sd + kd * dd, rb, g);

  // Output in grouped FRACTAL_Z_3D order, seen 7-D: (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16) is the
  // same memory as (real_g, Kd, cin1_g, Kh, Kw, cout_g, 16), so taps need no div/mod (whose
  // bounds Halide cannot narrow). Entries pairing channels of different original groups (or
  // padding channels) are exactly 0.
  const int cin_pg = (int)geo.cin_pg(), cout_pg = (int)geo.cout_pg();
  const int mag = (int)gd.mag_factor, groups = (int)geo.groups;
  Expr e_out = n / cout_pg;
  Expr valid = same_group(e_out, (c1g * C0 + c0) / cin_pg, e_out, mag, groups, g);
  // One input block holding fewer than 16 channels: acc is read only at the valid lanes (the
  // others are masked anyway), so bounds inference never asks a schedule to compute padding.
  const int cin_valid = std::min(C0, mag * cin_pg);
  Expr ac0 = cin1_g == 1 && cin_valid < C0 ? min(c0, cin_valid - 1) : Expr(c0);
  // Every form's output: its sum where lane c0 and channel n share a group, else 0.
  a.out_shape = {gd.real_g, geo.kernel[0], gd.cin1_g, Kh, Kw, cout_g, kC0};
  const auto masked_out = [&](Expr sum) {
    Func f("out");
    f(c0, n, kw, kh, c1g, kd, g) = select(valid, sum, 0.0f);
    constrain_shape(f.output_buffer(), a.out_shape);
    return f;
  };
  a.out = masked_out(a.acc(ac0, n, kw, kh, c1g, kd, g));

  // Diagonal form (cin_pg == 1): lane c0 is original group g*mag + c0, whose output channels
  // are n = c0*mult + m of real group g. Lanes beyond the groups read a clamped channel; the
  // output masks them like the dense form.
  a.diag = cin_pg == 1 && cin1_g == 1;
  if (a.diag) {
    const int M = cout_pg;
    a.mult = M;
    Var m = a.m;
    if (M == 1 && cout_g == C0) {  // channel g*16 + c0: dy's block g, read as a vector
      a.dyd(c0, m, w, h, d, b, g) = to_f32(a.dy(c0, w, h, min(g, Co1 - 1), d, b));
    } else {
      a.dyd(c0, m, w, h, d, b, g) = a.dys(min(c0 * M + m, cout_g - 1), w, h, d, b, g);
    }
    a.rd = positions("rd");
    RVar dwo = a.rd[0], dho = a.rd[1], ddo = a.rd[2], db = a.rd[3];
    a.accd(c0, m, kw, kh, kd, g) = 0.0f;
    a.accd(c0, m, kw, kh, kd, g) +=
        a.dyd(c0, m, dwo, dho, ddo, db, g) *
        a.xs(c0, dwo * sw + kw * dw, dho * sh + kh * dh, 0, ddo * sd + kd * dd, db, g);
    a.outd = masked_out(a.accd(c0, n % M, kw, kh, kd, g));
  }

  // Pair form (bf16 inputs): output rows two at a time, both operands bf16 bits read as bf16, so
  // (e, c0) vectorized is a dot product of bf16 pairs per fp32 lane. Each product is exact in
  // fp32 and the sums are fp32, as in acc; only the order differs (row pairs first). An odd Ho
  // pairs its last row with a zero dy row.
  a.pairs = p.in_dtype == DType::kBFloat16;
  if (a.pairs) {
    Var e = a.e;
    const int Ho = (int)geo.out[1], Ho2 = (Ho + 1) / 2;
    // Staged x row pairs by first row, or by output row pair (Kh = 1: pairs_staged_by_output_row).
    const bool by_pair = pairs_staged_by_output_row(p);
    {
      Expr first = by_pair ? h * (2 * sh) : Expr(h);
      const auto [inside, v] = x_padded(w, first + e * sh);
      a.xsp(e, c0, w, h, c1g, d, b, g) = as_bf16(select(inside, v, cast<uint16_t>(0)));
    }
    {
      Expr ho = 2 * h + e;
      a.dysp(e, n, w, h, d, b, g) =
          as_bf16(select(ho < Ho, dy_bits(w, min(ho, Ho - 1), d, b), cast<uint16_t>(0)));
    }
    a.rp = RDom({{0, (int)geo.out[2]}, {0, Ho2}, {0, (int)geo.out[0]}, {0, (int)geo.n}, {0, 2}}, "rp");
    RVar pwo = a.rp[0], pho = a.rp[1], pdo = a.rp[2], pb = a.rp[3], pe = a.rp[4];
    // The taps into the pads are left out as r's are (a pair's row taps where both of its rows
    // read pads): the dots of e1 dW's edge depth slices and columns, 10% of them, multiplied
    // zeros (e1 dW bf16 ran at 0.91x oneDNN on Zen 4, which skips them). The predicates name
    // no pair element, so the pair stays one dot.
    {
      Expr di = pdo * sd + kd * dd - pf, hi = pho * (2 * sh) + kh * dh - pt, wi = pwo * sw + kw * dw - pl;
      if (skips_outside(p, 0)) a.rp.where(di >= 0 && di < D);
      if (skips_outside(p, 1)) a.rp.where(hi + sh >= 0 && hi < H);
      if (skips_outside(p, 2)) a.rp.where(likely(wi >= 0) && likely(wi < W));
    }
    a.accp(c0, n, kw, kh, c1g, kd, g) = 0.0f;
    a.accp(c0, n, kw, kh, c1g, kd, g) +=
        cast<float>(a.dysp(pe, n, pwo, pho, pdo, pb, g)) *
        cast<float>(a.xsp(pe, c0, pwo * sw + kw * dw, by_pair ? pho + kh : pho * (2 * sh) + kh * dh, c1g,
                          pdo * sd + kd * dd, pb, g));
    a.outp = masked_out(a.accp(ac0, n, kw, kh, c1g, kd, g));

    // Batch pair form (see DwAlgorithm): the pairs along an even batch, rows as acc's.
    a.batch_pairs = geo.n % 2 == 0;
    if (a.batch_pairs) {
      {
        const auto [inside, v] = x_padded(w, h, Expr(), [](int) { return true; }, 2 * b + e);
        a.xsb(e, c0, w, h, c1g, d, b, g) = as_bf16(select(inside, v, cast<uint16_t>(0)));
      }
      a.dysb(e, n, w, h, d, b, g) = as_bf16(dy_bits(w, h, d, 2 * b + e));
      a.rb = RDom({{0, (int)geo.out[2]}, {0, (int)geo.out[1]}, {0, (int)geo.out[0]},
                   {0, (int)geo.n / 2}, {0, 2}}, "rb");
      RVar bwo = a.rb[0], bho = a.rb[1], bdo = a.rb[2], bb = a.rb[3], be = a.rb[4];
      skip_pad_taps(a.rb, bwo, bho, bdo);
      a.accb(c0, n, kw, kh, c1g, kd, g) = 0.0f;
      a.accb(c0, n, kw, kh, c1g, kd, g) +=
          cast<float>(a.dysb(be, n, bwo, bho, bdo, bb, g)) *
          cast<float>(a.xsb(be, c0, bwo * sw + kw * dw, bho * sh + kh * dh, c1g, bdo * sd + kd * dd, bb, g));
      a.outpb = masked_out(a.accb(ac0, n, kw, kh, c1g, kd, g));
    }

    // Tile form (see DwAlgorithm): output channel innermost, positions padded to We.
    const int Wo = (int)geo.out[2], Do = (int)geo.out[0], N = (int)geo.n, G = (int)gd.real_g;
    a.we = dw_padded_row(p);
    const int half = a.we / 2;
    Var wq = a.wq, ph = a.ph, row = a.row;
    {
      // Four lanes' bits as one 64-bit word per position: transposing words (a quarter of the
      // scattered stores) and then splitting them runs ~2x faster than moving 16-bit lanes.
      std::vector<Expr> lanes;
      Expr inside;
      for (int i = 0; i < 4; ++i) {
        const auto [in, v] = x_padded(wq * sw + ph, h, 4 * a.q + i);
        inside = in;
        lanes.push_back(v);
      }
      a.xq(wq, a.q, h, c1g, d, b, g, ph) = select(inside, concat_bits(lanes), cast<uint64_t>(0));
      a.xT(wq, c0, h, c1g, d, b, g, ph) =
          as_bf16(extract_bits(UInt(16), a.xq(wq, c0 / 4, h, c1g, d, b, g, ph), (c0 % 4) * 16));
    }
    {
      // row = (((b*Do + do)*Ho + ho)*real_g + g)*We/2 + wo/2: a chunk's rows are one run.
      Expr wo = 2 * (row % half) + e, t = row / half;
      Expr gg = t % G, t2 = t / G;
      Expr ho = t2 % Ho, t3 = t2 / Ho;
      Expr oc = gg * cout_g + n;
      // An odd row pads its last pair with a zero; an even one has no clamp, so a pair row is
      // two channel vectors interleaved (with it, Halide gathered every element).
      Expr v = a.dy(oc % C0, Wo % 2 ? min(wo, Wo - 1) : wo, ho, min(oc / C0, Co1 - 1), t3 % Do,
                    t3 / Do);
      a.dyV(e, n, row) = as_bf16(Wo % 2 ? select(wo < Wo, v, cast<uint16_t>(0)) : v);
    }
    a.rt = RDom({{0, a.we}, {0, Ho}, {0, Do}, {0, N}}, "rt");
    RVar tk = a.rt[0], tho = a.rt[1], tdo = a.rt[2], tb = a.rt[3];
    Expr trow = (((tb * Do + tdo) * Ho + tho) * G + g) * half + tk / 2;
    a.acct(n, c0, kw, kh, c1g, kd, g) = 0.0f;
    a.acct(n, c0, kw, kh, c1g, kd, g) +=
        cast<float>(a.xT(tk + (kw * dw) / sw, c0, tho * sh + kh * dh, c1g, tdo * sd + kd * dd, tb,
                         g, (kw * dw) % sw)) *
        cast<float>(a.dyV(tk % 2, n, trow));
    a.outt = masked_out(a.acct(n, ac0, kw, kh, c1g, kd, g));

    // Tap rows (see DwAlgorithm): row kr of xTk is xT's lane kr % cin shifted by tap kr / cin.
    a.tap_rows = Kw * cin_valid;
    {
      Var kr = a.kr;
      Expr tw = min(kr / cin_valid, Kw - 1), lane = select(kr < a.tap_rows, kr % cin_valid, cin_valid - 1);
      a.xTk(wq, kr, h, c1g, d, b, g) = a.xT(wq + (tw * dw) / sw, lane, h, c1g, d, b, g, (tw * dw) % sw);
      a.acctk(n, kr, kh, c1g, kd, g) = 0.0f;
      a.acctk(n, kr, kh, c1g, kd, g) +=
          cast<float>(a.xTk(tk, kr, tho * sh + kh * dh, c1g, tdo * sd + kd * dd, tb, g)) *
          cast<float>(a.dyV(tk % 2, n, trow));
      a.outk = masked_out(a.acctk(n, kw * cin_valid + min(c0, cin_valid - 1), kh, c1g, kd, g));
    }

    // Blocked tile form: acct's sums from tbex_amx_dw, which reads x and dy in place and stages
    // each chunk's tiles itself (tbex/amx_dw.h); its sums have c0 innermost, as out.
    a.kk = dw_k_step(p);
    a.ext_args = {a.x.parameter(), a.dy.parameter(), Expr(N),  Expr(D),      Expr(H),  Expr(W),
                  Expr(C1),        Expr(Do),         Expr(Ho), Expr(Wo),     Expr(Co1), Expr(a.we),
                  Expr(G),         Expr(cin1_g),     Expr(cout_g), Expr(sd), Expr(sh), Expr(sw),
                  Expr(dd),        Expr(dh),         Expr(dw), Expr(pf),     Expr(pt), Expr(pl)};
    a.ext_valid = valid, a.ext_c0 = ac0;
  }
  return a;
}

void DwAlgorithm::use_blocks(const ReductionParts& parts) {
  std::vector<Halide::ExternFuncArgument> args = ext_args;
  for (int v : {parts.by_batch ? 1 : 0, parts.per, kk}) args.push_back(Expr(v));
  ext.define_extern("tbex_amx_dw", args, Float(32), {c0, n, kw, kh, c1g, kd, g, part}, NameMangling::C);
  // The parts added in order: ((part 0 + part 1) + part 2) ...
  Expr sum = ext(ext_c0, n, kw, kh, c1g, kd, g, 0);
  for (int k = 1; k < parts.count; ++k) sum = sum + ext(ext_c0, n, kw, kh, c1g, kd, g, k);
  outb = Func("out");
  outb(c0, n, kw, kh, c1g, kd, g) = select(ext_valid, sum, 0.0f);
  constrain_shape(outb.output_buffer(), out_shape);
  out = outb;
}

}  // namespace tbex::ops
