/** dx_w_lanes: dX for few input channels per block (a network's stem: Cin = 3), with positions
 * along w in the vector lanes.
 *
 * dx_cout_lanes puts dy's channels n in the lanes and sums them horizontally per output; its
 * register tile holds cv valid input lanes x qt positions of 16 n lanes, so each weight vector it
 * loads serves qt positions only (2 on AVX2), and a tile visit streams every tap's weights of its
 * phase (about 37 KB on the stem) from L2 for those few positions. This schedule turns the tile
 * around: the lanes are V consecutive positions of one w phase (V: the machine's fp32 lanes), the
 * tile is cv input channels x qv such vectors, and a reduction step (one output channel n at one
 * tap) broadcasts the tap's cv weights and loads qv dy vectors for cv*qv FMAs, so a weight serves
 * V*qv positions and no horizontal sum is left. dy is staged with ow innermost (a transpose of
 * its 6HD channel blocks), so a step's dy vectors are contiguous; the weights are staged with the
 * cv valid lanes innermost, so a step's broadcasts share one line.
 *
 * Like dx_cout_lanes it computes the valid lanes only (out_lanes) and one output row (d, h, b)
 * at a time: every w phase of the row in tiles along qw, then out_lanes gathers the row back
 * to 6HD. */
#include <algorithm>
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** Valid lanes up to which dx_cout_lanes' AVX2 tile (cv x 1-2 positions, 2 ymm each) fits the
 * 16 ymm unspilled, and the smallest L1 data cache of the x86 cores tbex runs on: where a
 * phase's weights fit it, dx_cout_lanes reads them from L1. */
constexpr int kCoutLanesFitValid = 4;
constexpr int64_t kSmallestL1 = 32 << 10;

const TileSpace& space() {
  static const TileSpace s("dx_w_lanes", {"qv"});
  return s;
}

struct Tiles {
  int qv = 1;  ///< machine vectors of positions along w (phase frame) per register tile
};

int lanes_of(const Halide::Target& t) { return t.natural_vector_size<float>(); }

/** Vectors of a phase row: ceil(phase extent / lanes). */
int64_t row_vectors(const Problem& p, const Halide::Target& t) {
  return ceil_div(phase_extent(p, 2), (int64_t)lanes_of(t));
}

/** Most position vectors per tile: cv*qv accumulators beside the cv broadcast weights and one dy
 * vector in the register file, and no more than a phase row holds. */
int qv_max(const Problem& p, const Halide::Target& t) {
  const int cv = cin_valid(p);
  const int free = (vector_registers(t) - cv - 1) / cv;
  return (int)std::max<int64_t>(1, std::min<int64_t>(free, row_vectors(p, t)));
}

/** The narrowest tile that covers a phase row in as few tiles as the widest does, then the
 * fields `variant` sets. The last tile of a row holds what is left (apply peels it off), so
 * even tiles keep it long: a row of 7 vectors with room for 5 takes tiles of 4 and 3, not 5 and
 * 2, whose 6 accumulators leave the FMA pipes waiting on their latency. */
Tiles choose_tiles(const Problem& p, const Context& ctx, const std::string& variant) {
  const int64_t vecs = row_vectors(p, ctx.target);
  const int qmax = qv_max(p, ctx.target);
  Tiles t;
  t.qv = (int)ceil_div(vecs, ceil_div(vecs, (int64_t)qmax));
  space().resolve(variant, {{"qv", &t.qv}});
  space().require(t.qv >= 1 && t.qv <= vecs, variant,
                  "qv must be in [1, " + std::to_string(vecs) + "] (vectors of a phase row)");
  return t;
}

std::string key_of(const Tiles& t) { return space().key({{"qv", t.qv}}); }

class DxWLanes final : public DxSchedule {
 public:
  std::string name() const override { return "dx_w_lanes"; }
  std::string why_not(const Problem& p) const override {
    if (std::string why = few_cin_why_not(p, "dx_tiled"); !why.empty()) return why;
    // dx_cout_lanes is slow where its weights stream from L2 or its tile spills; elsewhere it
    // measured faster than this schedule, which the model does not see: with 3x3x3 kernels at
    // unit stride and 3 or 4 valid lanes (a phase's weights 10-28 KB) it took 0.80-0.89x this
    // schedule's time on a Zen 3, while on the stem (37 KB) this one took 0.78x its time.
    const int64_t weights = dx_phase_weight_bytes(p);
    if (cin_valid(p) <= kCoutLanesFitValid && weights <= kSmallestL1 &&
        dx_cout_lanes_schedule()->why_not(p).empty())
      return "dx_cout_lanes reads a phase's weights (" + std::to_string(weights >> 10) +
             " KB) from L1 with an unspilled tile: faster here";
    return "";
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const Tiles t = choose_tiles(p, ctx, ctx.variant);
    std::ostringstream s;
    const int64_t rest = row_vectors(p, ctx.target) % t.qv;  // the peeled last tile's vectors
    s << "[" << key_of(t) << "] register tile " << cin_valid(p) << "c0 x " << t.qv << " x "
      << lanes_of(ctx.target) << "w (w in lanes, weights broadcast)"
      << (rest > 0 ? ", a row's last tile " + std::to_string(rest) + " vectors" : "")
      << ", dy staged ow-innermost, "
      << (is_strided(p) ? "stride-phase frame, " : "") << "per-row output, " << ctx.threads
      << " threads";
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    const Tiles own = choose_tiles(p, ctx, "");
    std::vector<std::string> keys{key_of(own)};
    const int qmax = qv_max(p, ctx.target);
    for (int qv : {qmax, qmax - 1, (qmax + 1) / 2})
      if (qv >= 1) keys.push_back(key_of({qv}));
    return TileSpace::candidates(keys, 4);
  }

  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const Tiles t = choose_tiles(p, ctx, ctx.variant);
    const ConvGeometry& g = p.geo;
    const int cv = cin_valid(p), V = lanes_of(ctx.target);
    const double taps = double(g.kernel[0]) * g.kernel[1] * g.kernel[2] /
                        (double(g.stride[0]) * g.stride[1] * g.stride[2]);
    LoopNest n;
    n.threads = ctx.threads;
    n.tile_lanes = V;
    // A step: one output channel at one tap: cv broadcasts, q dy vectors, cv*q FMAs (q = qv,
    // or the vectors left for a row's last tile).
    auto tile_of = [&](int q) {
      return RegisterTile{double(cv * q), double(cv + q), cv * q, cv + 1, 0, double(cv)};
    };
    n.tile = tile_of(t.qv);
    n.steps_per_visit = double(p.group.cout_g) * taps;
    const int64_t rows = g.n * g.in[0] * g.in[1] * g.cin1();
    // Each phase row: whole tiles of qv vectors, then a peeled tile of the rest (if any).
    const int64_t vecs = row_vectors(p, ctx.target);
    const double phase_rows = double(rows) * g.stride[2];
    n.visits = phase_rows * double(vecs / t.qv);
    if (const int rest = int(vecs % t.qv); rest > 0)
      n.tail = tile_of(rest), n.tail_visits = phase_rows;
    // A visit reads its phase's weights (cv per channel and tap) and qv vectors (+ the taps'
    // reach) of each dy row it needs, per channel.
    const double w_bytes = cv * 4.0 * p.group.cout_g * taps * g.stride[2];
    const double dy_bytes = (t.qv * V + double(g.kernel[2]) / g.stride[2]) * 4.0 *
                            p.group.cout_g * dx_dy_rows(p);
    n.visit_bytes = w_bytes / g.stride[2] + dy_bytes;
    n.visit_footprint = (int64_t)n.visit_bytes;
    n.chunk_footprint = int64_t(w_bytes) + dx_row_dy_bytes(p);
    n.units = rows;
    // Passes: dy staged in fp32 (transposed), the row gather back to 6HD.
    n.pass_bytes = dx_pass_bytes(p);
    n.lane_use = lane_use_of(g.flops(), n);
    n.executed = ops::inside_tap_share(p);
    return evaluate(n, Machine::of(ctx.target));
  }

  void apply(ops::DxAlgorithm& a, const Problem& p, const Context& ctx) const override {
    use_out_lanes(a, p, name());
    const Tiles t = choose_tiles(p, ctx, ctx.variant);
    const int V = lanes_of(ctx.target);

    // Weights with the cv valid lanes innermost: a step's broadcasts share one line.
    a.wz.compute_root();
    // dy with ow innermost: a step's dy vectors are contiguous.
    a.dys.reorder_storage(a.w, a.n, a.h, a.d, a.b, a.g);
    {
      Var wo("dwo"), wi("dwi"), t1("t1"), t2("t2");
      a.dys.compute_root()
          .split(a.w, wo, wi, V, TailStrategy::GuardWithIf)
          .reorder(wi, wo, a.n)
          .vectorize(wi)
          .fuse(a.d, a.b, t2)
          .fuse(t2, a.g, t1)
          .parallel(t1);
    }

    // The reduction: the phase's kw taps innermost (they read one dy row at shifted offsets: its
    // lines are loaded from L2 once per n, not once per tap), then n, kh, kd. The kw loop is not
    // unrolled: its extent is a constant per phase (the w phases are unrolled below), and the
    // tile of cv x qv FMAs is body enough. Unrolled, the stem dX's cold compile took 1.0-1.15 s
    // against 0.75-0.87 (Zen 1, 2.46 GHz), with run times level within the host's noise (1 and
    // 2 threads, f32 and f16: 133-155 ms against 139-155 at 1 thread, 75-82 against 80-82 at 2).
    const RVar rn = a.r[0], rkw = a.r[1], rkh = a.r[2], rkd = a.r[3];
    Var qw = a.qw, wo("wo"), wi("wi"), wv("wv"), wu("wu"), qvec("qvec"), lane("lane"), t3("t3"),
        par("par");
    a.out.compute_root().vectorize(a.c0).fuse(a.c1, a.d, t3).fuse(t3, a.b, par).parallel(par);
    // Every phase of one output row, tiled along qw; the tile's positions stored contiguously.
    // The row is cut into whole vectors (rounded up: the lanes past its end are computed and
    // never gathered), and those into tiles of qv vectors with the rest in a shorter last tile:
    // Halide peels that tile off the loop (GuardWithIf), so it has its own constant extent and
    // recomputes nothing. A last tile shifted back onto the one before instead recomputed up to
    // qv - 1 vectors: on the stem (7 vectors a row, tiles of 4) one FMA in eight; 74.4 against
    // 68.6 ms on a Zen 3.
    a.dxp.compute_at(a.out, a.h)
        .reorder_storage(qw, a.c0)
        .split(qw, qvec, lane, V, TailStrategy::RoundUp)
        .split(qvec, wo, wi, t.qv, TailStrategy::GuardWithIf)
        .reorder(lane, wi, a.c0, wo)
        .vectorize(lane)
        .unroll(wi)
        .unroll(a.c0);
    a.acc.compute_at(a.dxp, wo)
        .reorder_storage(qw, a.c0)
        .split(qw, wu, wv, V)
        .reorder(wv, a.c0, wu)
        .vectorize(wv)
        .unroll(a.c0)
        .unroll(wu);
    a.acc.update()
        .split(qw, wu, wv, V)
        .reorder(wv, a.c0, wu, rkw, rn, rkh, rkd)
        .vectorize(wv)
        .unroll(a.c0)
        .unroll(wu);
    // Each w phase its own loop nest: the kw taps' predicate folds to constants per phase.
    if (p.geo.stride[2] > 1) a.dxp.unroll(a.pw);
  }
};

}  // namespace

const DxSchedule* dx_w_lanes_schedule() { return the<DxWLanes>(); }

}  // namespace tbex::sched
