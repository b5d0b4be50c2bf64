/** dx_cout_lanes: dX for few input channels per block (a network's stem: Cin = 3).
 *
 * dx_tiled vectorizes over the 16 c0 lanes of the input channel block; with 3 valid channels, 13
 * of them compute padding. This schedule puts the reduction's output channels n (dy's channels,
 * contiguous in the staged dy and, with wz stored n-innermost, in the staged weights) in the
 * vector lanes: the reduction over n is split into 16-lane blocks and the lane index rfactored
 * (intermediate `intm`, 16 partial sums per output element), then summed horizontally once per
 * output element. The register tile is (valid c0 lanes cv) x (qt positions along w in the
 * stride-phase frame) accumulators of 16 n lanes; per reduction step (one 16-block of n at one
 * tap) it loads qt dy vectors and cv weight vectors for cv*qt FMAs. By default (ord=1) the kw taps
 * are unrolled inside the n-block loop and the w phases unrolled, so the stride predicate on kw
 * folds away and one 16-block step over the T = ceil(Kw/sw) taps of a phase loads qt + T - 1 dy
 * vectors (shared by the taps) and cv*T weight vectors for cv*qt*T FMAs.
 *
 * Only the valid lanes are computed: the output is the algorithm's out_lanes, which reads dxp at
 * lanes [0, cv) and writes the padding lanes as 0. dxp (and the tiles) are computed per output
 * row (d, h, b): every w phase of the row, then out_lanes gathers the row back to 6HD. */
#include <algorithm>
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** 16-lane vectors the register file holds: accumulators + cv weights + 1 dy vector (32 zmm;
 * AVX2's 16 ymm hold 8), and the accumulators per register tile (AVX-512: 24). */
int regs_of(const Halide::Target& t) { return vector_registers(t) / vectors_per_c0(t); }
int max_acc_of(const Halide::Target& t) { return regs_of(t) * 3 / 4; }
/** Whether a tile keeps its weight vectors in registers (AVX-512). With AVX2's two ymm per 16
 * lanes there is no room: the FMAs read the weights from memory, so only the accumulators and
 * the dy vector are live (stem dX on a Zen 3: qt=2 99 ms, qt=1 159 ms). */
bool keeps_weights(const Halide::Target& t) { return t.has_feature(Halide::Target::AVX512); }
constexpr int kMaxUnrollKw = 11; ///< kw taps unrolled by default up to this

const TileSpace& space() {
  static const TileSpace s("dx_cout_lanes", {"qt", "ord"});
  return s;
}

struct Tiles {
  int qt = 1;   ///< positions along w (phase frame) per register tile
  int kwu = 0;  ///< 1: kw taps unrolled inside the n-block loop (and w phases unrolled)
};

/** Weight vectors the kw-unrolled order keeps live: cv per active kw tap. */
int64_t unrolled_wregs(const Problem& p) {
  return cin_valid(p) * ceil_div(p.geo.kernel[2], p.geo.stride[2]);
}

/** FMAs the kw-unrolled order's tile body holds once unrolled: cv x qt x every kw tap (each w
 * phase's loop nest holds its own taps), twice where qt leaves a last tile along the row, which
 * Halide's loop partitioning compiles as a body of its own. */
int64_t unrolled_fmas(const Problem& p, int qt) {
  return int64_t(cin_valid(p)) * qt * p.geo.kernel[2] * (phase_extent(p, 2) % qt ? 2 : 1);
}
/** What unrolled_fmas may reach in the tiles "auto" considers: JIT time grows with it, about 7
 * ms per FMA on an Emerald Rapids guest (the stem's dX: [qt=4] 84 FMAs 0.55 s, [qt=7] 147 1.0
 * s, [qt=6] with its last tile 252, 1.8 s; [qt=4] ran as fast as [qt=7]), and a kernel has 1 s
 * to compile. */
constexpr int64_t kMaxUnrolledFmas = 128;
bool within_unroll_budget(const Problem& p, int qt, int kwu) {
  return !kwu || unrolled_fmas(p, qt) <= kMaxUnrolledFmas;
}

/** Most accumulators (cv * qt) that fit the registers with the weight vectors a step keeps
 * (kwu: cv per active kw tap, else cv; none unless keeps_weights) and one dy vector, within the
 * unroll budget. */
int qt_max(const Problem& p, int kwu, const Halide::Target& target) {
  const int cv = cin_valid(p), regs = regs_of(target);
  const int wregs = kwu ? (int)std::min<int64_t>(unrolled_wregs(p), regs * 3 / 8) : cv;
  const int free = keeps_weights(target) ? (regs - 1 - wregs) / cv : max_acc_of(target) / cv;
  int q = (int)std::max<int64_t>(
      1, std::min<int64_t>({max_acc_of(target) / cv, free, 16, phase_extent(p, 2)}));
  while (q > 1 && !within_unroll_budget(p, q, kwu)) --q;
  return q;
}

/** The schedule's own choice, then the fields `variant` sets. */
Tiles choose_tiles(const Problem& p, const Context& ctx, const std::string& variant) {
  const int64_t ext = phase_extent(p, 2);
  Tiles t;
  // kw unrolled while its taps' weights fit beside the tile (12 of AVX-512's 32 registers; the
  // stem's 12 do not fit AVX2's 16 ymm: unrolled it ran 167 ms, n-block loop innermost 99).
  t.kwu = p.geo.kernel[2] <= kMaxUnrollKw && unrolled_wregs(p) <= regs_of(ctx.target) * 3 / 8 ? 1 : 0;
  t.qt = qt_max(p, t.kwu, ctx.target);
  const VariantFields f = space().resolve(variant, {{"qt", &t.qt}});
  if (f.count("ord")) t.kwu = f.at("ord") == 1 ? 1 : 0;
  space().require(t.qt <= ext && (!f.count("ord") || f.at("ord") <= 2), variant,
                  "qt must be at most " + std::to_string(ext) +
                      " (positions along w), ord 1 (kw taps unrolled inside the n-block loop) or 2 "
                      "(n-block loop innermost)");
  return t;
}

std::string key_of(const Tiles& t) { return space().key({{"qt", t.qt}, {"ord", 2 - t.kwu}}); }

class DxCoutLanes final : public DxSchedule {
 public:
  std::string name() const override { return "dx_cout_lanes"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = few_cin_why_not(p, "dx_tiled"); !why.empty()) return why;
    const int cv = cin_valid(p);
    // Lanes doing useful work: cout_valid / cout_g here, cv / 16 in dx_tiled; ask for twice.
    if (cout_valid(p) * 16 < 2 * cv * p.group.cout_g)
      return "only " + std::to_string(cout_valid(p)) + " of " + std::to_string(p.group.cout_g) +
             " output channels per real group are valid: n lanes would be mostly padding";
    return "";
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const Tiles t = choose_tiles(p, ctx, ctx.variant);
    std::ostringstream s;
    s << "[" << key_of(t) << "] register tile "
      << cin_valid(p) << "c0 x " << t.qt << "w x 16n (n in lanes, rfactor + horizontal sum), "
      << (is_strided(p) ? "stride-phase frame, " : "")
      << (t.kwu ? "kw unrolled, " : "") << "per-row output, " << ctx.threads << " threads";
    return s.str();
  }
  /** "" (the own choice) first, then in its kw order the widest tiles and the narrowest covering
   * a phase row in as few tiles, then the own tile in the other order. The other order's widths
   * are not offered: the model ties their compute with the own order's and credits the taps-
   * one-at-a-time order with less streaming, but that order recomputes every position's dy row
   * address per tap (Sapphire Rapids, stem dX: [qt=8,ord=2] 54 ms against [qt=7,ord=1] 40.5). */
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    const int64_t ext = phase_extent(p, 2);
    const Tiles own = choose_tiles(p, ctx, "");
    std::vector<std::string> keys{key_of(own)};
    const int64_t qmax = qt_max(p, own.kwu, ctx.target);
    // One position past qt_max only where the tile keeps its weights in registers (AVX-512:
    // qt_max's share of the file is a rule of thumb). On AVX2 the accumulators and the dy vector
    // already fill the 16 ymm: one more position spills an accumulator every step (stem dX on a
    // Zen 3: [qt=3,ord=2] 171 ms against [qt=2,ord=2] 131), which the model's spill cost
    // underrates against the tile's fewer weight reads.
    const int64_t past = keeps_weights(ctx.target) ? qmax + 1 : qmax;
    for (int64_t qt : {qmax, ceil_div(ext, ceil_div(ext, qmax)), past, qmax * 3 / 4}) {
      const int q = (int)std::max<int64_t>(1, qt);
      if (qt <= ext && within_unroll_budget(p, q, own.kwu)) keys.push_back(key_of({q, own.kwu}));
    }
    if (within_unroll_budget(p, own.qt, 1 - own.kwu)) keys.push_back(key_of({own.qt, 1 - own.kwu}));
    return TileSpace::candidates(keys, 6);
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const Tiles t = choose_tiles(p, ctx, ctx.variant);
    const ConvGeometry& g = p.geo;
    const int cv = cin_valid(p);
    const double taps_w = double(g.kernel[2]) / g.stride[2];  // active kw taps of a w phase
    const double taps_dh = double(g.kernel[0]) * g.kernel[1] / (g.stride[0] * g.stride[1]);
    const double blocks = double(p.group.cout_g) / 16;
    LoopNest n;
    n.threads = ctx.threads;
    if (t.kwu) {
      // A step: one 16-channel block at one (kd, kh), every kw tap of the phase unrolled; the
      // taps share dy vectors.
      // Live besides the accumulators: the cv weights of the tap in use and the dy vectors (a
      // tile of about 21 accumulators ran fastest on the stem, AVX-512). On AVX2 every unrolled
      // tap's weights stay live and spill (stem: 167 ms unrolled, 99 ms with n innermost).
      const int live = keeps_weights(ctx.target) ? cv + 2 : (int)unrolled_wregs(p) + 1;
      n.tile = {cv * t.qt * taps_w, t.qt + taps_w - 1 + cv * taps_w, cv * t.qt, live, 0};
      n.steps_per_visit = blocks * taps_dh;
    } else {
      const int live = keeps_weights(ctx.target) ? cv + 1 : 1;  // weights, dy vector
      n.tile = {double(cv * t.qt), double(t.qt + cv), cv * t.qt, live, 0};
      n.steps_per_visit = blocks * taps_dh * taps_w;
    }
    const int64_t rows = g.n * g.in[0] * g.in[1] * g.cin1();
    const int64_t tiles = rows * g.stride[2] * ceil_div(phase_extent(p, 2), t.qt);
    n.visits = double(tiles);
    // A visit reads the weights of its phase and qt (+ the taps' reach) positions of dy rows.
    // The tiles of a phase row run one after another on the same weights: where a phase's fit
    // the L1 they stay there and only dy streams (stem dX: all its phases in Emerald Rapids' 48
    // KB L1, [qt=7] 44.7 ms against dx_w_lanes' 53.0), each phase by its own taps (Zen 4's 32 KB
    // hold three of the stem's four (kh, kw) phases: 60.6 ms against dx_w_lanes' 66.2, which
    // every phase streamed priced 4% slower). Measured where the tile keeps its weight vectors
    // in registers (AVX-512) only: on AVX2 they stream (a Zen 3: dx_w_lanes 0.78x the time).
    const double w_bytes = cv * 64.0 * blocks * taps_dh * taps_w;
    const double dy_bytes = (t.qt + taps_w) * 64.0 * blocks * taps_dh;
    const Machine m = Machine::of(ctx.target);
    n.visit_bytes =
        dx_streamed_phase_weight_bytes(p, keeps_weights(ctx.target) ? m.l1 : 0) + dy_bytes;
    n.visit_footprint = int64_t(w_bytes + dy_bytes);
    n.chunk_footprint = int64_t(w_bytes * g.stride[2]) + dx_row_dy_bytes(p);
    n.units = rows;
    // Passes: dy staged in fp32, the per-tile horizontal sums (about 8 ops per output element),
    // the row scatter back to 6HD.
    n.pass_bytes = dx_pass_bytes(p);
    n.pass_ops = double(tiles) * cv * t.qt * 8;
    n.lane_use = lane_use_of(g.flops(), n);
    n.executed = ops::inside_tap_share(p);
    return evaluate(n, m);
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override {
    use_out_lanes(a, p, name());
    const Tiles t = choose_tiles(p, ctx, ctx.variant);

    // Staged fp32 operands: weights n-innermost (a 16-lane load per c0 and tap), dy as is.
    a.wz.reorder_storage(a.n, a.c0, a.c1g, a.kw, a.kh, a.kd, a.g)
        .reorder(a.n, a.c0, a.c1g, a.kw, a.kh, a.kd, a.g);
    stage_root(a.wz, a.n, 16, {a.kd, a.g}, {"t1"});
    stage_root(a.dys, a.n, 16, {a.d, a.b, a.g}, {"t2", "t1"});

    // n in lanes: rfactor the 16-lane part of the n reduction.
    RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
    RVar rno("rno"), rni("rni");
    Var lane("lane");
    Var c0 = a.c0, qw = a.qw, wo("wo"), wi("wi"), t3("t3"), par("par");
    a.out.compute_root()
        .vectorize(a.c0)
        .fuse(a.c1, a.d, t3)
        .fuse(t3, a.b, par)
        .parallel(par);
    // Every phase of one output row, tiled along qw.
    a.dxp.compute_at(a.out, a.h)
        .split(qw, wo, wi, t.qt)
        .reorder(c0, wi, wo)
        .unroll(c0)
        .unroll(wi);
    // Each w phase its own loop nest: the kw tap predicate folds to constants per unrolled kw.
    if (t.kwu && p.geo.stride[2] > 1) a.dxp.unroll(a.pw);
    a.acc.compute_at(a.dxp, wo).unroll(c0).unroll(qw);
    Func intm = a.acc.update().split(rn, rno, rni, 16).rfactor(rni, lane);
    a.acc.update().reorder(rni, c0, qw).atomic().vectorize(rni).unroll(c0).unroll(qw);
    intm.compute_at(a.dxp, wo)
        .reorder_storage(lane, c0, qw)
        .reorder(lane, c0, qw)
        .vectorize(lane)
        .unroll(c0)
        .unroll(qw);
    Stage u = intm.update();
    // kwu: a dy vector loaded once serves every kw tap of the 16-block.
    if (t.kwu)
      u.reorder(lane, c0, qw, rkw, rno, rkh, rkd).unroll(rkw);
    else
      u.reorder(lane, c0, qw, rno, rkw, rkh, rkd);
    u.vectorize(lane).unroll(c0).unroll(qw);
  }
};

}  // namespace

const DxSchedule* dx_cout_lanes_schedule() { return the<DxCoutLanes>(); }

}  // namespace tbex::sched
