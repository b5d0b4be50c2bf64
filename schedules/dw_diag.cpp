/** dw_diag: depthwise dW (cin_pg == 1), only the diagonal of each real group's block.
 *
 * With one input channel per original group, TBE's group_dict packs 16 groups into one real
 * group whose cout_g x 16 block is zero except at n = c0*mult + m (mult = cout_pg; see
 * docs/group_dict.md). The dense schedules compute the whole block (15/16 of it, or more,
 * multiplies by exact zeros). This one uses the algorithm's diagonal Funcs (accd: lanes = the 16
 * groups, elementwise vector FMAs):
 *   accd(c0, m, kw, kh, kd, g) += dyd(c0, m, wo, ho, do, b) * xs(c0, wo+kw, ho+kh, do+kd, b).
 * Register tile KWT x KHT taps (one zmm accumulator each) for one (m, kd); the reduction is
 * streamed in chunks of CH output rows (split_dw_reduction: intm holds one chunk's partial sums
 * in registers, accd adds them up), with wo unrolled by U so LLVM shares the x loads of
 * neighbouring taps. Per (b, do) plane the padded fp32 x planes are staged once (sliding window
 * over do: one new plane per step); dy is read in place (fp32, mult 1) or staged per chunk.
 * Parallel over real groups (and kd when there are fewer groups than threads): no reduction is
 * split, so results do not depend on the thread count. */
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct DwDiagTiles {
  int kwt = 1, kht = 1;  ///< taps per register tile
  int ch = 1;            ///< output rows per reduction chunk
  int u = 1;             ///< wo unrolled inside the tile
  bool stage_x = true;   ///< padded fp32 x planes staged (stage_x_rows)
  bool kd_par = false;   ///< kd split across threads too (fewer real groups than threads)
};

const TileSpace& space() {
  static const TileSpace s("dw_diag", {"kht", "ch", "u"});
  return s;
}

DwDiagTiles choose_dw_diag(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  DwDiagTiles t;
  // At most 12 accumulators (AVX-512); fewer where the file is narrower (AVX2: 3 x 1 taps, the
  // 3 x 3 tile spilled: e2 dW 1.34 ms against 0.78).
  const int max_acc = std::min(12, tile_accumulators(ctx.target, 2));
  t.kwt = largest_divisor_upto(g.kernel[2], max_acc);
  t.kht = largest_divisor_upto(g.kernel[1], std::max(1, max_acc / t.kwt));
  // A chunk's x rows (every kd) and dy rows stay in L1 while its tiles stream them.
  const int64_t row_bytes = 64 * padded_w(p) * g.kernel[0];
  int64_t ch = 1;
  while (ch < g.out[1] &&
         ((ch + 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1]) * row_bytes +
                 (ch + 1) * g.out[2] * 64 * p.geo.cout_pg() <= (32 << 10))
    ++ch;
  t.ch = largest_divisor_upto(g.out[1], ch);
  t.u = largest_divisor_upto(g.out[2], 4);
  t.stage_x = stage_x_rows(p);
  t.kd_par = ctx.threads > 1 && p.group.real_g < ctx.threads && g.kernel[0] > 1;
  space().resolve(ctx.variant, {{"kht", &t.kht}, {"ch", &t.ch}, {"u", &t.u}});
  space().require(g.kernel[1] % t.kht == 0 && g.out[1] % t.ch == 0 && g.out[2] % t.u == 0,
                  ctx.variant,
                  "kht must divide Kh (" + std::to_string(g.kernel[1]) + "), ch Ho (" +
                      std::to_string(g.out[1]) + ") and u Wo (" + std::to_string(g.out[2]) + ")");
  return t;
}

std::string dw_diag_variant(const DwDiagTiles& t) {
  return space().key({{"kht", t.kht}, {"ch", t.ch}, {"u", t.u}});
}

class DwDiag final : public DwSchedule {
 public:
  std::string name() const override { return "dw_diag"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = diag_why_not(p); !why.empty()) return why;
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
    std::vector<std::string> keys;
    for (const DwDiagTiles& t : list) keys.push_back(dw_diag_variant(t));
    return TileSpace::candidates(keys, 8);
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
    const int64_t wp = padded_w(p);
    n.visit_bytes = double(t.ch * g.stride[1] + t.kht - 1) * wp * 64 + double(t.ch) * g.out[2] * 64;
    n.visit_footprint = (int64_t)n.visit_bytes;
    n.chunk_footprint = x_rows_of(p, t.ch) * wp * 64 * g.kernel[0] + t.ch * g.out[2] * 64 * mult;
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
    DwReduction red = split_dw_reduction(a.accd, a.r, p, 1, t.ch);
    Func body = red.body, intm = red.intm;
    const RVar rhoo = red.chunk, rdo = red.mid, rb = red.outer;

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
        .split(a.r[0], wuo, wui, t.u)
        .reorder(c0, kw, kh, wui, wuo, red.rows)
        .vectorize(c0)
        .unroll(kw)
        .unroll(kh)
        .unroll(wui);

    stage_root(a.out, c0, 0, {a.kd, a.g}, {"kdg"});
  }
};

}  // namespace

const DwSchedule* dw_diag_schedule() { return the<DwDiag>(); }

}  // namespace tbex::sched
