/** Depthwise (cin_pg == 1) dW and dX: only the diagonal of each real group's block.
 *
 * With one input channel per original group, TBE's group_dict packs 16 groups into one real
 * group whose cout_g x 16 block is zero except at n = c0*mult + m (mult = cout_pg). The dense
 * schedules compute the whole block (15/16 of it, or more, multiplies by exact zeros). These
 * use the algorithms' diagonal Funcs (accd: lanes = the 16 groups, elementwise vector FMAs):
 *
 * "dw_diag": accd(c0, m, kw, kh, kd, g) += dyd(c0, m, wo, ho, do, b) * xs(c0, wo+kw, ho+kh, do+kd, b).
 *   Register tile KWT x KHT taps (one zmm accumulator each) for one (m, kd); the reduction is
 *   streamed in chunks of CH output rows (an rfactor: intm holds one chunk's partial sums in
 *   registers, accd adds them up), with wo unrolled by U so LLVM shares the x loads of
 *   neighbouring taps. Per (b, do) plane the padded fp32 x planes are staged once (sliding
 *   window over do: one new plane per step); dy is read in place (fp32, mult 1) or staged per
 *   chunk. Parallel over real groups (and kd when there are fewer groups than threads): no
 *   reduction is split, so results do not depend on the thread count.
 * "dx_diag": accd(c0, w..) += dyd(c0, m, w - kw, ..) * wd(c0, m, kw, kh, kd): register tile of
 *   QT positions along w, kw and m unrolled inside (dy loads shared between taps), same term
 *   order as the dense sum. dy is staged zero-padded per plane with a sliding window over d.
 *   Parallel over (real group, batch). */
#include <sstream>

#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "schedules/variant.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

std::string diag_why_not(const Problem& p) {
  const int64_t cin_pg = p.geo.cin_pg();
  if (cin_pg != 1)
    return std::to_string(cin_pg) + " input channels per group: the block is " +
           (p.geo.groups == 1 ? "dense" : "block-diagonal, not diagonal");
  return "";
}

// ---------------------------------------------------------------------------------------- dW

struct DwDiagTiles {
  int kwt = 1, kht = 1;  ///< taps per register tile
  int ch = 1;            ///< output rows per reduction chunk
  int u = 1;             ///< wo unrolled inside the tile
  bool stage_x = true;   ///< padded fp32 x planes staged (dense rows only)
  bool kd_par = false;   ///< kd split across threads too (fewer real groups than threads)
};

const std::vector<std::string> kDwDiagKeys{"kht", "ch", "u"};

DwDiagTiles choose_dw_diag(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  DwDiagTiles t;
  constexpr int kMaxAcc = 12;
  t.kwt = largest_divisor_upto(g.kernel[2], kMaxAcc);
  t.kht = largest_divisor_upto(g.kernel[1], std::max(1, kMaxAcc / t.kwt));
  // A chunk's x rows (every kd) and dy rows stay in L1 while its tiles stream them.
  const int64_t wp = g.in[2] + g.pads[4] + g.pads[5];
  const int64_t row_bytes = 64 * wp * g.kernel[0];
  int64_t ch = 1;
  while (ch < g.out[1] &&
         ((ch + 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1]) * row_bytes +
                 (ch + 1) * g.out[2] * 64 * p.geo.cout_pg() <= (32 << 10))
    ++ch;
  t.ch = largest_divisor_upto(g.out[1], ch);
  t.u = largest_divisor_upto(g.out[2], 4);
  for (int i = 1; i < 3; ++i)
    t.stage_x = t.stage_x && g.stride[i] <= (g.kernel[i] - 1) * g.dilation[i] + 1;
  t.kd_par = ctx.threads > 1 && p.group.real_g < ctx.threads && g.kernel[0] > 1;
  const VariantFields f = parse_variant(ctx.variant, kDwDiagKeys, "dw_diag");
  if (f.count("kht")) t.kht = f.at("kht");
  if (f.count("ch")) t.ch = f.at("ch");
  if (f.count("u")) t.u = f.at("u");
  user_check(g.kernel[1] % t.kht == 0 && g.out[1] % t.ch == 0 && g.out[2] % t.u == 0, "",
             "variant",
             "dw_diag variant '" + ctx.variant + "': kht must divide Kh (" +
                 std::to_string(g.kernel[1]) + "), ch Ho (" + std::to_string(g.out[1]) +
                 ") and u Wo (" + std::to_string(g.out[2]) + ")");
  return t;
}

std::string dw_diag_variant(const DwDiagTiles& t) {
  return format_variant({{"kht", t.kht}, {"ch", t.ch}, {"u", t.u}}, kDwDiagKeys);
}

class DwDiag final : public DwSchedule {
 public:
  std::string name() const override { return "dw_diag"; }
  std::string why_not(const Problem& p) const override {
    std::string why = diag_why_not(p);
    if (!why.empty()) return why;
    // Few groups with many output channels each (a stem: Cin = 1..15, groups = Cin): most of
    // the 16 lanes are padding, while dw_cout_lanes fills its lanes with output channels.
    // Compare lane-FMAs per tap and reduction point: 16 * mult here, valid c0 x cout_g there.
    const int64_t lanes_valid = std::min<int64_t>(16, p.group.mag_factor);
    const int64_t diag_work = 16 * p.geo.cout_pg(), cout_lanes_work = lanes_valid * p.group.cout_g;
    if (cout_lanes_work < diag_work && dw_cout_lanes_schedule()->why_not(p).empty())
      return "only " + std::to_string(lanes_valid) + " of 16 lanes are groups: dw_cout_lanes does " +
             std::to_string(cout_lanes_work) + " lane-FMAs per tap and point, the diagonal " +
             std::to_string(diag_work);
    return dw_accumulator_why_not(p);
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const DwDiagTiles t = choose_dw_diag(p, ctx);
    std::ostringstream s;
    s << "[" << dw_diag_variant(t) << "] diagonal only (lanes = 16 groups, mult "
      << p.geo.cout_pg() << "), register tile " << t.kwt << "kw x " << t.kht << "kh, wo unrolled x"
      << t.u << ", K chunks of " << t.ch << " rows, "
      << (t.stage_x ? "x planes staged (sliding over do), " : "x read in place (sparse rows), ")
      << (p.in_dtype == DType::kFloat32 && p.geo.cout_pg() == 1 ? "dy read in place, "
                                                                : "dy staged per chunk, ")
      << ctx.threads << " threads over real groups" << (t.kd_par ? " x kd" : "");
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    Context own = ctx;
    own.variant = "";
    const DwDiagTiles d = choose_dw_diag(p, own);
    const ConvGeometry& g = p.geo;
    std::vector<DwDiagTiles> list{d};
    for (int64_t ch : {(int64_t)d.ch * 2, (int64_t)d.ch / 2, g.out[1]}) {
      DwDiagTiles t = d;
      t.ch = largest_divisor_upto(g.out[1], std::max<int64_t>(1, ch));
      list.push_back(t);
    }
    for (int u : {1, 2, 7}) {
      DwDiagTiles t = d;
      t.u = largest_divisor_upto(g.out[2], u);
      list.push_back(t);
    }
    if (d.kht > 1) {
      DwDiagTiles t = d;
      t.kht = 1;
      list.push_back(t);
    }
    std::vector<std::string> out;
    for (const DwDiagTiles& t : list) out.push_back(dw_diag_variant(t));
    out = unique_upto(out, 8);
    out[0] = "";
    return out;
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const DwDiagTiles t = choose_dw_diag(p, ctx);
    const ConvGeometry& g = p.geo;
    const int64_t mult = g.cout_pg();
    LoopNest n;
    n.threads = ctx.threads;
    // Per wo point: kwt x kht elementwise FMAs, one dy vector, x rows shared by neighbouring
    // taps across the u unrolled points.
    n.tile = {double(t.kwt * t.kht), 1 + t.kht * double(t.u + t.kwt - 1) / t.u, t.kwt * t.kht,
              t.kht + 2, 0};
    n.steps_per_visit = double(t.ch * g.out[2]);
    const int64_t tiles = mult * g.kernel[0] * (g.kernel[1] / t.kht) * ceil_div(g.kernel[2], t.kwt) *
                          p.group.real_g;
    n.visits = double(tiles) * g.n * g.out[0] * (g.out[1] / t.ch);
    const int64_t wp = g.in[2] + g.pads[4] + g.pads[5];
    n.visit_bytes = double(t.ch * g.stride[1] + t.kht - 1) * wp * 64 + double(t.ch) * g.out[2] * 64;
    n.visit_footprint = (int64_t)n.visit_bytes;
    n.chunk_footprint = ((t.ch - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1) * wp * 64 *
                            g.kernel[0] + t.ch * g.out[2] * 64 * mult;
    n.units = p.group.real_g * (t.kd_par ? g.kernel[0] : 1);
    // Passes: padded x planes staged once, dy converted per chunk (unless read in place), the
    // whole output block written (zeros off the diagonal).
    const double x_elems = double(g.n) * p.group.real_g * 16 * (g.in[0] + g.pads[0] + g.pads[1]) *
                           (g.in[1] + g.pads[2] + g.pads[3]) * wp;
    const bool dy_in_place = p.in_dtype == DType::kFloat32 && mult == 1;
    const double in_b = input_bytes(p);
    n.pass_bytes = (t.stage_x ? x_elems * (in_b + 4) : 0) +
                   (dy_in_place ? 0 : dy_elems(p) * (in_b + 4)) + dw_out_elems(p) * 4;
    n.lane_use = lane_use_of(g.flops(), n);
    return evaluate(n, Machine::of(ctx.target));
  }

  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override {
    internal_check(a.diag, "dw_diag on a problem without the diagonal form");
    const DwDiagTiles t = choose_dw_diag(p, ctx);
    a.use_diag();
    Var c0 = a.c0, m = a.m, kw = a.kw, kh = a.kh, kd = a.kd, g = a.g;
    RVar rwo = a.r[0], rho = a.r[1], rdo = a.r[2], rb = a.r[3];
    RVar rhoo("rhoo"), rhoi("rhoi");
    Var u("u"), v("v"), bb("bb");
    Func body = a.accd;
    Func intm = body.update().split(rho, rhoo, rhoi, t.ch).rfactor({{rhoo, u}, {rdo, v}, {rb, bb}});

    Var kwo("kwo"), kwi("kwi"), kho("kho"), khi("khi"), kdg("kdg");
    body.compute_root().vectorize(c0);
    Stage s = body.update();
    s.split(kw, kwo, kwi, t.kwt).split(kh, kho, khi, t.kht);
    VarOrRVar par = g;
    if (t.kd_par) {
      s.reorder(c0, kwi, khi, kwo, kho, m, rhoo, rdo, rb, kd, g).fuse(kd, g, kdg);
      par = kdg;
    } else {
      s.reorder(c0, kwi, khi, kwo, kho, m, kd, rhoo, rdo, rb, g);
    }
    s.vectorize(c0).unroll(kwi).unroll(khi).parallel(par);

    // x: the padded fp32 planes one (b, do) step reads, built once each (sliding window).
    if (t.stage_x) a.xs.store_at(body, rb).compute_at(body, rdo).vectorize(a.c0);
    if (!(p.in_dtype == DType::kFloat32 && a.mult == 1)) a.dyd.compute_at(body, rhoo).vectorize(a.c0);

    RVar wuo("wuo"), wui("wui");
    intm.compute_at(body, kwo).vectorize(c0).unroll(kw).unroll(kh);
    intm.update()
        .split(rwo, wuo, wui, t.u)
        .reorder(c0, kw, kh, wui, wuo, rhoi)
        .vectorize(c0)
        .unroll(kw)
        .unroll(kh)
        .unroll(wui);

    a.out.compute_root().vectorize(a.c0).fuse(a.kd, a.g, kdg).parallel(kdg);
  }
};

// ---------------------------------------------------------------------------------------- dX

const std::vector<std::string> kDxDiagKeys{"qt"};

/** Positions along w of one phase: w + pl = qw*sw + pw over w in [0, W). */
/** Depth chunks per (real group, batch), so that there are some 4 parallel tasks per thread
 * (each output is computed whole by one task: results do not depend on the split). */
int depth_chunks(const Problem& p, int threads) {
  if (threads <= 1) return 1;
  const int64_t tasks = p.group.real_g * p.geo.n;
  return (int)std::min<int64_t>(std::max<int64_t>(1, ceil_div(4 * threads, tasks)),
                                ceil_div(p.geo.in[0], 2));
}

int choose_dx_qt(const Problem& p, const std::string& variant) {
  const int64_t ext = phase_extent(p, 2);
  // Up to 16 accumulators; a row in as few equal tiles as possible.
  int qt = (int)std::max<int64_t>(1, ceil_div(ext, ceil_div(ext, 16)));
  const VariantFields f = parse_variant(variant, kDxDiagKeys, "dx_diag");
  if (f.count("qt")) {
    qt = f.at("qt");
    user_check(qt <= ext, "", "variant",
               "dx_diag variant '" + variant + "': qt must be at most " + std::to_string(ext) +
                   " (positions along w)");
  }
  return qt;
}

class DxDiag final : public DxSchedule {
 public:
  std::string name() const override { return "dx_diag"; }
  std::string why_not(const Problem& p) const override { return diag_why_not(p); }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const int qt = choose_dx_qt(p, ctx.variant);
    const bool strided = p.geo.stride[0] * p.geo.stride[1] * p.geo.stride[2] > 1;
    std::ostringstream s;
    s << "[qt=" << qt << "] diagonal only (lanes = 16 groups, mult " << p.geo.cout_pg()
      << "), register tile " << qt << "w" << (strided ? " (stride-phase frame)" : " x kw unrolled")
      << ", dy staged zero-padded " << (strided ? "per (group, batch)" : "per plane (sliding over d)")
      << ", " << ctx.threads << " threads over (real group, batch"
      << (depth_chunks(p, ctx.threads) > 1 ? ", " + std::to_string(depth_chunks(p, ctx.threads)) + " depth chunks" : "") << ")";
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context&) const override {
    const int64_t ext = phase_extent(p, 2);
    std::vector<std::string> out{""};
    for (int64_t qt : {ceil_div(ext, ceil_div(ext, 16)), std::min<int64_t>(16, ext),
                       std::min<int64_t>(12, ext), std::min<int64_t>(8, ext),
                       ceil_div(ext, ceil_div(ext, 8)), std::min<int64_t>(4, ext)})
      out.push_back(format_variant({{"qt", (int)std::max<int64_t>(1, qt)}}, kDxDiagKeys));
    out = unique_upto(out, 8);
    return out;
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const int qt = choose_dx_qt(p, ctx.variant);
    const ConvGeometry& g = p.geo;
    const double mult = double(g.cout_pg());
    const double taps_w = double(g.kernel[2]) / g.stride[2];
    const double taps_dh = double(g.kernel[0]) * g.kernel[1] / (g.stride[0] * g.stride[1]);
    LoopNest n;
    n.threads = ctx.threads;
    // Per (kd, kh) step: kw and m unrolled; the dy loads are shared by neighbouring taps.
    n.tile = {qt * taps_w * mult, taps_w * mult + mult * (qt + taps_w - 1), qt,
              (int)(taps_w * mult) + 1, 0};
    n.steps_per_visit = taps_dh;
    const int64_t rows = g.n * phase_extent(p, 0) * g.stride[0] * phase_extent(p, 1) * g.stride[1];
    const int64_t tiles = rows * p.group.real_g * g.stride[2] * ceil_div(phase_extent(p, 2), qt);
    n.visits = double(tiles);
    n.visit_bytes = taps_w * mult * taps_dh * 64 + (qt + taps_w) * 64 * mult * taps_dh;
    n.visit_footprint = (int64_t)n.visit_bytes;
    n.chunk_footprint = int64_t(g.kernel[0] * g.kernel[1]) * (g.out[2] + g.kernel[2]) * 64 * int64_t(mult);
    n.units = p.group.real_g * g.n * depth_chunks(p, ctx.threads);
    // Passes: zero-padded fp32 dy planes, the output (and the phase scatter when strided).
    n.pass_bytes = staged_dy_elems(p) * (input_bytes(p) + 4) + dx_elems(p) * 4 * (is_strided(p) ? 2 : 1);
    n.lane_use = lane_use_of(g.flops(), n);
    return evaluate(n, Machine::of(ctx.target));
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override {
    internal_check(a.diag, "dx_diag on a problem without the diagonal form");
    const int qt = choose_dx_qt(p, ctx.variant);
    a.use_diag();
    Var c0 = a.c0, qw = a.qw, c1 = a.c1, b = a.b;
    RVar sm = a.rd[0], skw = a.rd[1], skh = a.rd[2], skd = a.rd[3];
    Var wo("wo"), wi("wi"), par("par"), dco("dco"), dci("dci"), p1("p1");
    a.wd.compute_root().vectorize(a.c0);
    Func tile_owner = a.strided ? a.dxp : a.out;
    const int chunks = depth_chunks(p, ctx.threads);
    if (a.strided) {
      const int64_t qd_ext = ceil_div(p.geo.in[0] + p.geo.pads[0], p.geo.stride[0]);
      a.dxp.compute_root()
          .split(qw, wo, wi, qt)
          .split(a.qd, dco, dci, (int)ceil_div(qd_ext, chunks), TailStrategy::GuardWithIf)
          .reorder(c0, wi, wo, a.pw, a.qh, a.ph, dci, a.pd, dco, c1, b)
          .vectorize(c0)
          .unroll(wi)
          .fuse(dco, c1, p1)
          .fuse(p1, b, par)
          .parallel(par);
      a.dyd.compute_at(a.dxp, par).vectorize(a.c0);
      Var t3("t3");
      a.out.compute_root().vectorize(a.c0).fuse(a.d, a.b, t3).parallel(t3);
    } else {
      a.out.compute_root()
          .split(a.w, wo, wi, qt)
          .split(a.d, dco, dci, (int)ceil_div(p.geo.in[0], chunks), TailStrategy::GuardWithIf)
          .reorder(c0, wi, wo, a.h, dci, dco, c1, b)
          .vectorize(c0)
          .unroll(wi)
          .fuse(dco, c1, p1)
          .fuse(p1, b, par)
          .parallel(par);
      // The zero-padded fp32 dy planes a d step reads, built once each (sliding window over d).
      a.dyd.store_at(a.out, par).compute_at(a.out, dci).vectorize(a.c0);
    }
    a.accd.compute_at(tile_owner, wo).vectorize(c0).unroll(qw);
    Stage s = a.accd.update();
    s.reorder(c0, qw, sm, skw, skh, skd).vectorize(c0).unroll(qw);
    if (!a.strided) s.unroll(sm).unroll(skw);
  }
};

}  // namespace

const DwSchedule* dw_diag_schedule() {
  static const DwDiag s;
  return &s;
}
const DxSchedule* dx_diag_schedule() {
  static const DxDiag s;
  return &s;
}

}  // namespace tbex::sched
