/** dW schedules.
 *
 * The dW GEMM: M = output channels (n), N = input channels x taps (c0, kw, ...), K = N*Do*Ho*Wo.
 * "dw_tiled" keeps a register tile of NT output channels x KWT kw taps x 16 input lanes (c0, one
 * AVX-512 vector per kw) and streams K through it in chunks of CH output rows, so the x and dy
 * rows a chunk touches stay in L2 while every output tile is updated from them. Chunking is an
 * rfactor of the reduction: intm holds one chunk's partial sums for one tile (in registers), acc
 * adds them up. Output tiles are split across threads (outermost parallel loop), so there is no
 * cross-thread reduction and results do not depend on the thread count. */
#include <sstream>
#include <cstdio>
#include <cstdlib>

#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "schedules/variant.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct DwTiles {
  int nt = 8;   ///< output channels per register tile
  int kwt = 1;  ///< kw taps per register tile
  int ch = 1;   ///< output rows (ho) per reduction chunk
  int parts = 1;  ///< reduction split into this many per-thread partial sums
  bool stage_x = true;  ///< stage padded fp32 rows of x per chunk (dense rows only)
  bool prefetch_x = false;  ///< prefetch the next chunk's x rows while this chunk computes
  int64_t tiles = 1;
};

const std::vector<std::string> kDwKeys{"nt", "kwt", "ch", "parts"};

/** The tiles for `p`: the schedule's own choice, then TBEX_DW_TILE (experiments; only when no
 * variant is given, as before variants existed), then the fields `variant` sets. */
DwTiles choose_dw_tiles(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  const int threads = ctx.threads;
  DwTiles t;
  t.kwt = largest_divisor_upto(g.kernel[2], 3);
  // 12-16 zmm accumulators measured best (24 spills): 4n x 3kw, 8n x 2kw or 16n x 1kw.
  t.nt = t.kwt == 3 ? 4 : t.kwt == 2 ? 8 : 16;
  // ~512 reduction points per chunk amortize loading/storing the tile, and a chunk's x/dy rows
  // fit in L2.
  t.ch = largest_divisor_upto(g.out[1], std::max<int64_t>(1, 512 / g.out[2]));
  const char* e = getenv("TBEX_DW_TILE");
  if (e && ctx.variant.empty()) {  // experiments only; must divide cout_g / Kw
    sscanf(e, "%d,%d,%d", &t.nt, &t.kwt, &t.ch);
    t.nt = std::max(t.nt, 1), t.kwt = std::max(t.kwt, 1), t.ch = std::max(t.ch, 1);
  }
  for (int i = 1; i < 3; ++i)
    t.stage_x = t.stage_x && g.stride[i] <= (g.kernel[i] - 1) * g.dilation[i] + 1;
  const bool can_split = threads > 1 && std::max(g.n, g.out[0]) >= threads;
  const VariantFields f = parse_variant(ctx.variant, kDwKeys, "dw_tiled");
  if (f.count("nt")) t.nt = f.at("nt");
  if (f.count("kwt")) t.kwt = f.at("kwt");
  if (f.count("ch")) t.ch = f.at("ch");
  // The own choice may round nt or kwt up past cout_g or Kw; a variant's tile divides them.
  user_check(p.group.cout_g % (f.count("nt") ? t.nt : 1) == 0 &&
                 g.kernel[2] % (f.count("kwt") ? t.kwt : 1) == 0 &&
                 g.out[1] % (f.count("ch") ? t.ch : 1) == 0,
             "", "variant",
             "dw_tiled variant '" + ctx.variant + "': nt must divide cout_g (" +
                 std::to_string(p.group.cout_g) + "), kwt Kw (" + std::to_string(g.kernel[2]) +
                 ") and ch Ho (" + std::to_string(g.out[1]) + ")");
  t.tiles = (p.group.cout_g / t.nt) * (g.kernel[2] / t.kwt) * g.kernel[1] * p.group.cin1_g *
            g.kernel[0] * p.group.real_g;
  // Staging streams x from memory chunk by chunk; where that dominates (many x bytes per FMA:
  // few channels, strides) the next chunk's rows are prefetched during this chunk's tiles, if
  // both chunks fit in L2 side by side (the seed's dW: 8.0 -> 7.4 ms; a 400 KiB chunk of the
  // 1x1x1 layer got slower).
  {
    const int64_t x_rows = (t.ch - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1;
    const int64_t chunk_bytes = x_rows * (g.in[2] + g.pads[4] + g.pads[5]) * 64 * p.group.cin1_g *
                                p.group.real_g * g.kernel[0];
    const double x_bytes = 4.0 * g.n * g.in[0] * g.in[1] * g.in[2] * g.cin1() * 16;
    t.prefetch_x = t.stage_x && chunk_bytes <= (256 << 10) && x_bytes / (g.flops() / 32) >= 0.5;
  }
  // Fewer than 4 tiles a thread balance badly: split the reduction instead.
  if (can_split && t.tiles < 4 * threads) t.parts = threads;
  if (f.count("parts")) {
    t.parts = f.at("parts");
    user_check(t.parts == 1 || (can_split && t.parts == threads), "", "variant",
               "dw_tiled variant '" + ctx.variant + "': parts must be 1" +
                   (can_split ? " or " + std::to_string(threads) + " (the thread count)" : ""));
  }
  return t;
}

std::string dw_variant(const DwTiles& t) {
  return format_variant({{"nt", t.nt}, {"kwt", t.kwt}, {"ch", t.ch}, {"parts", t.parts}}, kDwKeys);
}

/** "" (the own choice) first, then register tiles of at most 16 accumulators (nt x kwt) and
 * each with a narrower one, the row chunk halved and doubled, and the other reduction split. */
std::vector<std::string> dw_candidates(const Problem& p, const Context& ctx) {
  Context own = ctx;
  own.variant = "";
  const DwTiles d = choose_dw_tiles(p, own);
  const ConvGeometry& g = p.geo;
  std::vector<DwTiles> list{d};
  for (int kwt = 3; kwt >= 1; --kwt) {
    if (g.kernel[2] % kwt != 0) continue;
    for (int acc : {16, 8}) {
      DwTiles t = d;
      t.kwt = kwt, t.nt = largest_divisor_upto(p.group.cout_g, acc / kwt);
      list.push_back(t);
    }
  }
  for (int64_t ch : {(int64_t)d.ch * 2, (int64_t)d.ch / 2}) {
    DwTiles t = d;
    t.ch = largest_divisor_upto(g.out[1], std::max<int64_t>(1, ch));
    list.push_back(t);
  }
  if (ctx.threads > 1 && std::max(g.n, g.out[0]) >= ctx.threads) {
    DwTiles t = d;
    t.parts = d.parts > 1 ? 1 : ctx.threads;
    list.push_back(t);
  }
  std::vector<std::string> out;
  for (const DwTiles& t : list) out.push_back(dw_variant(t));
  out = unique_upto(out, 8);
  out[0] = "";  // the own choice, as such (its nt may not divide cout_g)
  return out;
}

/** The cost model's view of dw_tiled with tiles `t`. */
Estimate dw_tiled_estimate(const Problem& p, const Context& ctx, const DwTiles& t) {
  const ConvGeometry& g = p.geo;
  const Machine m = Machine::of(ctx.target);
  const GroupDict& gd = p.group;
  LoopNest n;
  n.threads = ctx.threads;
  // Per step: kwt x vectors (c0 lanes), nt dy broadcasts, nt x kwt FMAs.
  n.tile = {double(t.nt * t.kwt), double(t.kwt + t.nt), t.nt * t.kwt, t.kwt + 1, 0};
  const int64_t tiles = ceil_div(gd.cout_g, t.nt) * ceil_div(g.kernel[2], t.kwt) * g.kernel[1] *
                        gd.cin1_g * g.kernel[0] * gd.real_g;
  n.steps_per_visit = double(t.ch * g.out[2]);
  n.visits = double(tiles) * g.n * g.out[0] * (g.out[1] / t.ch);
  // A visit streams ch rows of x (one block, kw taps overlapping) and ch rows of dy (a line a
  // position holds the tile's nt channels).
  const double x_row = double(g.out[2] * g.stride[2] + (t.kwt - 1) * g.dilation[2]) * 64;
  const double dy_row = double(g.out[2]) * 64;
  n.visit_bytes = t.ch * (x_row + dy_row);
  n.visit_footprint = (int64_t)n.visit_bytes;
  // A chunk's staged x (all blocks, every kd and kh) and dy rows (every output channel).
  const int64_t x_rows = (t.ch - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1;
  const int64_t w_pad = g.in[2] + g.pads[4] + g.pads[5];
  n.chunk_footprint = x_rows * w_pad * 64 * gd.cin1_g * gd.real_g * g.kernel[0] +
                      t.ch * g.out[2] * 64 * g.cout1();
  n.units = t.parts > 1 ? (g.n >= t.parts ? g.n : g.out[0]) : tiles;
  // Passes: x staged per chunk (kd and kh overlap re-stage rows), dy converted per chunk, the
  // output stage, and adding the per-thread partial sums.
  const double x_elems = double(g.n) * g.in[0] * g.cin1() * 16 * (g.in[1] + g.pads[2] + g.pads[3]) * w_pad;
  const double restage = double(g.kernel[0]) / g.stride[0] * x_rows / (t.ch * g.stride[1]);
  n.pass_bytes = (t.stage_x ? x_elems * restage * (input_bytes(p) + 4) : 0) +
                 (p.in_dtype != DType::kFloat32 ? dy_elems(p) * (input_bytes(p) + 4) : 0) +
                 dw_out_elems(p) * 8 * (t.parts > 1 ? 1 + t.parts : 1);
  n.lane_use = lane_use_of(g.flops(), n);
  return evaluate(n, m);
}

class DwTiled final : public DwSchedule {
 public:
  std::string name() const override { return "dw_tiled"; }
  std::string why_not(const Problem& p) const override { return dw_accumulator_why_not(p); }
  std::string describe(const Problem& p, const Context& ctx) const override {
    DwTiles t = choose_dw_tiles(p, ctx);
    std::ostringstream s;
    s << "[" << dw_variant(t) << "] register tile 16c0 x " << t.nt << "n x " << t.kwt << "kw, " << t.tiles
      << " tiles over " << ctx.threads << " threads, K chunks of " << t.ch << " rows x "
      << p.geo.out[2] << " cols, " << (t.stage_x ? "" : "x read in place (sparse rows), ") << (t.prefetch_x ? "next chunk of x prefetched, " : "") << (t.parts > 1 ? "reduction split in " + std::to_string(t.parts) + " parts, " : "") << (p.in_dtype == DType::kFloat32 ? "dy read in place" : "dy staged to fp32");
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    return dw_candidates(p, ctx);
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    return dw_tiled_estimate(p, ctx, choose_dw_tiles(p, ctx));
  }

  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const DwTiles t = choose_dw_tiles(p, ctx);
    Var c0 = a.c0, n = a.n, kw = a.kw, kh = a.kh, c1g = a.c1g, kd = a.kd, g = a.g;

    RVar rwo = a.r[0], rho = a.r[1], rdo = a.r[2], rb = a.r[3];
    RVar r_mid = rdo, r_outer = rb;  // the reduction loops outside a chunk
    Var part("part");
    // Few output tiles for the threads: split the reduction over batch (or depth) into per-thread
    // partial sums (an rfactor), each computed with the tiled schedule, then added up.
    Func body = a.acc;
    if (t.parts > 1) {
      body = split_dw_reduction(a, p, t.parts, part, r_mid, r_outer);
      a.acc.compute_root().vectorize(c0);
      a.acc.update().vectorize(c0);
    }
    RVar rhoo("rhoo"), rhoi("rhoi");
    Var u("u"), v("v"), bb("bb");
    Func intm = body.update()
                    .split(rho, rhoo, rhoi, t.ch)
                    .rfactor({{rhoo, u}, {r_mid, v}, {r_outer, bb}});

    Var no("no"), ni("ni"), kwo("kwo"), kwi("kwi"), tile("tile"), t1("t1"), t2("t2"), t3("t3"),
        t4("t4"), tgo("tgo"), tgi("tgi");
    // Output tiles split across threads (outermost loop), or all tiles per reduction part.
    const int groups_par = t.parts > 1 ? 1 : (int)std::min<int64_t>(ctx.threads, t.tiles);
    body.compute_root().vectorize(c0);
    Stage s = body.update();
    s.split(n, no, ni, t.nt)
        .split(kw, kwo, kwi, t.kwt)
        .reorder(c0, ni, kwi, no, kwo, kh, c1g, kd, g, rhoo, r_mid, r_outer)
        .fuse(no, kwo, t1)
        .fuse(t1, kh, t2)
        .fuse(t2, c1g, t3)
        .fuse(t3, kd, t4)
        .fuse(t4, g, tile)
        .split(tile, tgo, tgi, (int)((t.tiles + groups_par - 1) / groups_par), TailStrategy::GuardWithIf)
        .reorder(c0, ni, kwi, tgi, rhoo, r_mid, r_outer, tgo)
        .vectorize(c0)
        .unroll(ni)
        .unroll(kwi);
    if (t.parts > 1) s.parallel(part);
    else s.parallel(tgo);

    // Staging per reduction chunk: the padded fp32 rows of x (and dy, for 16-bit inputs) one
    // chunk needs are built in cache right before every tile of the thread consumes them, so
    // conversion and padding stay out of the hot loop without a pass over memory.
    // Strides beyond the dilated kernel leave gaps: a padded box would mostly hold rows nobody
    // reads (with huge strides and pads, more than memory), so x is then read in place.
    if (t.stage_x) {
      a.xs.compute_at(body, rhoo).vectorize(c0);
      if (t.prefetch_x) s.prefetch(a.x, rhoo, rhoo, 1, PrefetchBoundStrategy::NonFaulting);
    }
    if (p.in_dtype != DType::kFloat32) a.dys.compute_at(body, rhoo).vectorize(n, 16);
    intm.compute_at(body, tgi).vectorize(c0).unroll(n).unroll(kw);
    intm.update().reorder(c0, n, kw, rwo, rhoi).vectorize(c0).unroll(n).unroll(kw);

    Var kdg("kdg");
    a.out.compute_root().vectorize(c0).fuse(kd, g, kdg).parallel(kdg);
  }
};

/** Short reductions or outputs too big to hold twice: the accumulator lives per output row t
 * (one tap, all cout_g x 16 entries) and is written straight into the output; no K chunking. */
class DwDirect final : public DwSchedule {
 public:
  std::string name() const override { return "dw_direct"; }
  std::string why_not(const Problem& p) const override {
    const auto& g = p.geo;
    const int64_t reduction = g.n * g.out[0] * g.out[1] * g.out[2];
    const int64_t out_bytes = 4 * p.group.real_g * g.kernel[0] * g.kernel[1] * g.kernel[2] *
                              p.group.cin1_g * p.group.cout_g * 16;
    if (reduction <= 4096 || out_bytes >= (int64_t(1) << 30)) return "";
    return "reduction of " + std::to_string(reduction) + " points is long enough for dw_tiled";
  }
  std::string describe(const Problem&, const Context& ctx) const override {
    return "accumulator per output row (one tap), " + std::to_string(ctx.threads) + " threads over rows";
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    // A scalar update (see apply), parallel over kd.
    const Machine m = Machine::of(ctx.target);
    Estimate e = scalar_estimate(p.geo.flops(), 0, m);
    e.balance = balance_of(p.geo.kernel[0], ctx.threads);
    e.compute /= std::max(1, ctx.threads) * e.balance;
    e.cycles = e.compute + e.passes;
    return e;
  }
  void apply(ops::DwAlgorithm& a, const Problem& p, const Context&) const override {
    // acc per (kh, c1g, kd, g): every kw x n x c0 entry of those taps. No fused loops: Halide
    // recovers fused vars by div/mod, whose bounds it cannot narrow (acc would span every tap).
    // The update stays scalar: vectorized over c0 with x read in place (bounds-checked),
    // Halide's code ran far slower (measured on the kernel2 public case).
    a.out.compute_root().parallel(a.kd);
    a.acc.compute_at(a.out, a.kh).vectorize(a.c0);
    a.acc.update().unscheduled();
    (void)p;  // dy read in place
  }
};

class DwReference final : public DwSchedule {
 public:
  std::string name() const override { return "reference"; }
  std::string why_not(const Problem&) const override { return ""; }
  std::string describe(const Problem&, const Context&) const override {
    return "every stage computed at root, serial, scalar: a second opinion for tests";
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    // Every output entry (padding lanes too) sums the whole reduction, one scalar at a time.
    const ConvGeometry& g = p.geo;
    const double macs = dw_out_elems(p) * g.n * g.out[0] * g.out[1] * g.out[2];
    return scalar_estimate(2 * macs, 8 * dw_out_elems(p), Machine::of(ctx.target));
  }
  void apply(ops::DwAlgorithm& a, const Problem&, const Context&) const override {
    // xs stays inline: its padded box can be far larger than x (huge pads and strides). The
    // accumulator is per output row, so huge outputs are not held twice.
    a.dys.compute_root();
    a.out.compute_root();
    a.acc.compute_at(a.out, a.kw);
  }
};

}  // namespace

const DwSchedule* dw_tiled_schedule() {
  static const DwTiled s;
  return &s;
}
const DwSchedule* dw_direct_schedule() {
  static const DwDirect s;
  return &s;
}
const DwSchedule* dw_reference_schedule() {
  static const DwReference s;
  return &s;
}

}  // namespace tbex::sched
