/** dw_pointwise: dW of a 1x1x1 kernel (stride 1, no pads) as a plain GEMM. With one tap, dW is
 * (input channels) x (output channels) summed over every position, and x and dy are already
 * packed panels: 6HD holds each 16-channel block of a (d, n) slab as a dense (H*W, 16) matrix,
 * so x and dy are read in place (fp32; 16-bit dy is converted per chunk, 16-bit x either read in
 * place and converted by the tile's loads or converted per chunk: key "x"), with no staging,
 * padding or taps.
 *
 * The register tile is CT input blocks (one vector of 16 c0 lanes each) x NT output channels
 * (dy broadcasts): per position CT vector loads and NT broadcasts feed CT*NT FMAs, so a square
 * tile (4 x 4: 8 loads per 16 FMAs) leaves the load ports half idle where dw_tiled's 1 x 16
 * needs 17. K (positions) is blocked in chunks of CH rows whose x and dy panels stay in L2 while
 * every tile passes over them; the chunking, the tile spread over threads and the optional
 * reduction split are dw_tiled's (schedules/loops.h). */
#include <sstream>

#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"

namespace tbex::sched {
namespace {

using namespace Halide;

struct PwTiles {
  int ct = 1;     ///< input blocks (c1g) per register tile
  int nt = 16;    ///< output channels per register tile
  int ch = 1;     ///< output rows (ho) per K chunk
  int parts = 1;  ///< reduction split into this many partial sums (dw_parts)
  /** 16-bit x read where it lies, each of the tile's x vectors converted as it is loaded (key
   * "x" 1), in place of every block converted per chunk into an fp32 buffer (2). fp32 x is
   * always read in place (no key). */
  bool x_in_place = false;
  int64_t tiles = 1;
};

const TileSpace& space() {
  static const TileSpace s("dw_pointwise", {"ct", "nt", "ch", "parts", "x"});
  return s;
}

/** Whether x has the choice of PwTiles::x_in_place: 16-bit inputs. */
bool x_choice_applies(const Problem& p) { return p.in_dtype != DType::kFloat32; }

/** Vector ops beyond the load that turn one loaded 16-lane vector of 16-bit x into fp32: fp16 one
 * conversion (its load folded into it), bf16 a widening load and a shift. */
double x_conversion_ops(const Problem& p) { return p.in_dtype == DType::kFloat16 ? 1 : 2; }

/** Loads per FMA of tiles of ct blocks x nt channels over a group's channels: each tile loads
 * its ct blocks (w machine vectors each, counted twice: below) and broadcasts its channels; the
 * last tile of a group takes the cout_g % nt channels left. */
double loads_per_fma(const Problem& p, int ct, int nt, int w) {
  const int64_t n = p.group.cout_g, full = n / nt, rest = n % nt;
  const double loads = double(full) * (2 * ct * w + nt) + (rest ? 2 * ct * w + rest : 0);
  return loads / (double(n) * ct * w);
}

/** The register tile with the fewest loads per FMA within the accumulators the target holds
 * (tile_accumulators; ties: more output channels, whose broadcasts share a cache line). A
 * 16-lane block is w machine vectors (AVX2: 2), each loaded and FMA'd; a broadcast serves all.
 * A vector load of x counts twice: each block is a stream of its own, a new 64-byte line per
 * position, where the broadcasts read the one dy line the tile's channels share. That ties 2
 * blocks x 8 channels with 4 x 4 (12 per 16 FMAs), and 2 x 8 ran faster on Emerald Rapids (d
 * dW: 2.81 against 2.94 ms at 1 thread, 1.44 against 1.51 at 2, 2.86 against 2.95 with one
 * row per chunk, f16 at 2 threads 1.77 against 1.80; 1 x 16, 17 loads, 15% slower).
 * nt need not divide the group's channels: the last tile of a group is shorter (guarded, see
 * apply). AVX2's 16 ymm hold 1 block x 6 channels (12 accumulators) where 64 channels
 * divide only into 4s (8): Zen 1, d dW, 1 thread, [ct=1,nt=6,ch=28] 11.8-11.9 ms against
 * [ct=1,nt=4,ch=28] 12.3-12.5 and [ct=2,nt=2,ch=4] 12.6-12.9. */
void choose_register_tile(const Problem& p, const Halide::Target& target, PwTiles& t) {
  const int w = vectors_per_c0(target);
  double best = 1e9;
  for (int ct = 1; ct <= 16; ++ct) {
    if (p.group.cin1_g % ct) continue;
    const int most = (int)std::min<int64_t>(tile_accumulators(target, ct) / ct, p.group.cout_g);
    for (int nt = most; nt >= 1; --nt) {
      const double cost = loads_per_fma(p, ct, nt, w);
      if (cost < best - 1e-9) best = cost, t.ct = ct, t.nt = nt;
    }
  }
}

/** The tiles of t per real group, and of those the shorter last ones (cout_g % nt channels). */
int64_t tiles_per_group(const Problem& p, const PwTiles& t) {
  return (p.group.cin1_g / t.ct) * ceil_div(p.group.cout_g, t.nt);
}
int64_t short_tiles_per_group(const Problem& p, const PwTiles& t) {
  return p.group.cout_g % t.nt ? p.group.cin1_g / t.ct : 0;
}

/** Rows per K chunk whose tile visit (ct blocks of x and the dy lines of nt channels) stays in
 * L1 (l1_chunk_rows): the 4-8 output-channel tiles sharing x blocks run
 * from L1 (d dW on Sapphire Rapids: 7 rows 2.56 ms, the whole 28-row slab 2.89). */
int l1_chunk(const Problem& p, const PwTiles& t, const Machine& m) {
  const int64_t wo = p.geo.out[2];
  return l1_chunk_rows(p.geo.out[1], wo * 64 * (t.ct + ceil_div(t.nt, 16)), wo, m.l1_visit_bytes());
}

/** The L2 chunk (a candidate): every block's x and dy panels in half the L2, at least ~256
 * positions per visit. */
int l2_chunk(const Problem& p, const Machine& m) {
  const ConvGeometry& g = p.geo;
  const int64_t row_bytes = g.out[2] * 64 * (p.group.cin1_g * p.group.real_g + g.cout1());
  const int64_t fit = std::max<int64_t>(1, (m.l2 / 2) / row_bytes);
  return largest_divisor_upto(g.out[1], std::max<int64_t>(fit, ceil_div(256, g.out[2])));
}

Estimate estimate_of(const Problem& p, const Context& ctx, const PwTiles& t);

PwTiles choose_tiles(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  PwTiles t;
  choose_register_tile(p, ctx.target, t);
  t.ch = l1_chunk(p, t, Machine::of(ctx.target));
  const VariantFields f = space().resolve(ctx.variant, {{"ct", &t.ct}, {"nt", &t.nt}, {"ch", &t.ch}});
  space().require(p.group.cin1_g % t.ct == 0 && t.nt <= p.group.cout_g && g.out[1] % t.ch == 0,
                  ctx.variant,
                  "ct must divide cin1_g (" + std::to_string(p.group.cin1_g) + "), nt be at most cout_g (" +
                      std::to_string(p.group.cout_g) + ") and ch divide Ho (" + std::to_string(g.out[1]) + ")");
  t.tiles = tiles_per_group(p, t) * p.group.real_g;
  if (t.tiles < 8) t.parts = dw_parts(p, kDwSplitParts);  // few tiles: split K instead
  if (f.count("parts")) t.parts = dw_parts_of_variant(p, space(), ctx.variant, f.at("parts"));
  space().require(!f.count("x") || (x_choice_applies(p) && f.at("x") <= 2), ctx.variant,
                  "x must be 1 (read in place) or 2 (converted per chunk), for 16-bit inputs");
  if (f.count("x")) {
    t.x_in_place = f.at("x") == 1;
  } else if (x_choice_applies(p)) {
    // The model's choice of the two (the tile, chunk and split above serve both).
    PwTiles in_place = t;
    in_place.x_in_place = true;
    t.x_in_place = estimate_of(p, ctx, in_place).cycles < estimate_of(p, ctx, t).cycles;
  }
  return t;
}

std::string key_of(const Problem& p, const PwTiles& t) {
  VariantFields f{{"ct", t.ct}, {"nt", t.nt}, {"ch", t.ch}, {"parts", t.parts}};
  if (x_choice_applies(p)) f["x"] = t.x_in_place ? 1 : 2;
  return space().key(f);
}

Estimate estimate_of(const Problem& p, const Context& ctx, const PwTiles& t) {
  const ConvGeometry& g = p.geo;
  LoopNest n;
  n.threads = ctx.threads;
  // Per position: ct x vectors, nt dy broadcasts (embedded in the FMAs), ct x nt FMAs; the
  // shorter last tile of a group (cout_g % nt channels) its own.
  // 16-bit x read in place: each x vector converted as it is loaded.
  const double conversions = t.x_in_place ? t.ct * x_conversion_ops(p) : 0;
  const auto tile_of = [&](int nt) {
    return RegisterTile{double(t.ct * nt), double(t.ct + nt), t.ct * nt, t.ct + 1, conversions, double(nt)};
  };
  n.tile = tile_of(t.nt);
  n.steps_per_visit = double(t.ch * g.out[2]);
  const double visits_per_tile = double(g.n) * g.out[0] * (g.out[1] / t.ch);
  const int64_t short_tiles = short_tiles_per_group(p, t) * p.group.real_g;
  n.visits = double(t.tiles - short_tiles) * visits_per_tile;
  if (short_tiles) {
    n.tail = tile_of((int)(p.group.cout_g % t.nt));
    n.tail_visits = double(short_tiles) * visits_per_tile;
  }
  // A visit streams ct blocks of x rows (in their own dtype where read in place, else fp32)
  // and the lines of dy holding its nt channels.
  const double x_row_bytes = 16 * (t.x_in_place ? input_bytes(p) : 4);
  n.visit_bytes = n.steps_per_visit * (t.ct * x_row_bytes + 64 * ceil_div(t.nt, 16));
  n.visit_footprint = (int64_t)n.visit_bytes;
  // What must stay in cache between a chunk's reuses. fp32 read in place: the tiles sharing x
  // blocks run back to back (output channels innermost), so the chunk's dy lines and one
  // tile's x blocks (d dW, 28-row chunks: 250 KB, not 1 MB; Zen 1, 1 thread: [ct=1,nt=6,ch=28]
  // 11.1-11.5 ms against 11.5-12.3 for ch=4, which the model had picked pricing 28 rows from
  // L3). 16-bit: the chunk's buffers, every block converted (d dW f16 at 1 thread: 28 rows
  // 11.9 ms against 10.6 for 4).
  // 16-bit x read in place: like fp32, a tile's blocks at a time (in their own dtype).
  const bool x_read = p.in_dtype == DType::kFloat32 || t.x_in_place;
  const int64_t x_blocks = x_read ? t.ct : p.group.cin1_g * p.group.real_g;
  n.chunk_footprint = t.ch * g.out[2] * ((int64_t)x_row_bytes * x_blocks + 64 * g.cout1());
  n.units = t.parts > 1 ? t.parts : t.tiles;
  // Panels past a quarter of the L3 (the rest holds the output, the chunks' staging and others'
  // lines) come from DRAM chunk by chunk, every block's rows of a chunk a run of their own
  // (read in place, or by the 16-bit conversion). Zen 4, d dW, 1 thread: f32 (16 MB, all of the
  // 16 MB L3) chunks of 14 rows 3.65-3.9 ms, of 4 rows 4.0-4.6, of 28 3.78-3.91 against 4.10 for
  // 14; f16 (8 MB) chunks of 28 rows 4.00-4.15 against 4.57-4.66 for 4 (2 threads 2.08 / 2.22);
  // an eighth of d f32, held in the L3, 0.445 ms either way.
  const Machine m = Machine::of(ctx.target);
  const double x_elems = dx_elems(p), panel_elems = x_elems + dy_elems(p);
  const bool from_dram = panel_elems * input_bytes(p) > m.l3 / 4;
  const int64_t blocks = p.group.cin1_g * p.group.real_g + g.cout1();
  if (from_dram) n.dram_runs = double(blocks) * g.n * g.out[0] * (g.out[1] / t.ch);
  // Passes: the output stage and the partial sums. 16-bit inputs are converted per chunk (by
  // every tile group unless split: tile_stagers) into a chunk buffer in cache: the panels read
  // from where they lie (not overlapped with the tiles), a load, a conversion and a store per
  // vector. Priced as a pass over memory (reads and fp32 writes at DRAM rate, the 24 MB of d
  // f16 being past the L3), its 1.2 ms were twice the 0.55-0.75 the conversion took on Zen 4.
  const double stagers = tile_stagers(t.tiles, ctx.threads, t.parts, p.group.real_g);
  n.pass_bytes = dw_out_elems(p) * 8 * (t.parts > 1 ? 1 + t.parts : 1);
  if (p.in_dtype != DType::kFloat32) {
    const double converted = t.x_in_place ? dy_elems(p) : panel_elems;
    n.stream_bytes = stagers * converted * input_bytes(p);
    n.streams_from_dram = from_dram;
    n.pass_ops = 3 * stagers * converted / m.lanes;
  }
  n.lane_use = lane_use_of(g.flops(), n);
  return evaluate(n, m);
}

class DwPointwise final : public DwSchedule {
 public:
  std::string name() const override { return "dw_pointwise"; }
  std::string why_not(const Problem& p) const override {
    const ConvGeometry& g = p.geo;
    if (g.kernel[0] * g.kernel[1] * g.kernel[2] != 1) return "kernel is not 1x1x1";
    if (is_strided(p)) return "strided: positions are not a dense panel";
    for (int64_t pad : g.pads)
      if (pad != 0) return "padded: positions are not a dense panel";
    return dw_accumulator_why_not(p);
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const PwTiles t = choose_tiles(p, ctx);
    std::ostringstream s;
    s << "[" << key_of(p, t) << "] register tile " << t.ct << " blocks of 16c0 x " << t.nt << "n"
      << (p.group.cout_g % t.nt ? " (the last of a group " + std::to_string(p.group.cout_g % t.nt) + "n)" : "")
      << ", " << t.tiles << " tiles over " << ctx.threads << " threads, K chunks of " << t.ch << " rows x "
      << p.geo.out[2] << " cols, "
      << (t.parts > 1 ? "reduction split in " + std::to_string(t.parts) + " parts, " : "")
      << (p.in_dtype == DType::kFloat32 ? "x and dy read in place"
          : t.x_in_place                  ? "x read in place (converted as loaded), dy converted per chunk"
                                          : "x and dy converted per chunk");
    return s.str();
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    return estimate_of(p, ctx, choose_tiles(p, ctx));
  }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    Context own = ctx;
    own.variant = "";
    const PwTiles d = choose_tiles(p, own);
    std::vector<PwTiles> list{d};
    // AVX-512: tiles of 16 accumulators and two of 24 (spilling, for the tuner); elsewhere
    // the most accumulators the target holds per block count.
    std::vector<std::pair<int, int>> shapes{{2, 8}, {1, 16}, {8, 2}, {4, 6}, {2, 12}};
    if (!ctx.target.has_feature(Target::AVX512)) {
      shapes.clear();
      for (int ct : {1, 2, 4}) shapes.push_back({ct, std::max(1, tile_accumulators(ctx.target, ct) / ct)});
    }
    const Machine m = Machine::of(ctx.target);
    // The reduction split or not (dw_parts), with the own chunk and a whole slab per chunk (one
    // run per block of each slab where the panels come from DRAM: dram_runs); the L2 chunk.
    const int split = dw_parts(p, kDwSplitParts);
    for (int64_t ch : {(int64_t)d.ch, p.geo.out[1]}) {
      PwTiles t = d;
      t.ch = (int)ch;
      if (ch != d.ch) list.push_back(t);
      if (split > 1) {
        t.parts = d.parts > 1 ? 1 : split;
        list.push_back(t);
      }
    }
    {
      PwTiles t = d;
      t.ch = l2_chunk(p, m);
      list.push_back(t);
    }
    // Each shape with the channels dividing the group's, and (AVX2) as many as it holds with a
    // shorter last tile.
    for (auto [ct, nt] : shapes) {
      PwTiles t = d;
      t.ct = largest_divisor_upto(p.group.cin1_g, ct);
      std::vector<int> nts{largest_divisor_upto(p.group.cout_g, nt)};
      if (!ctx.target.has_feature(Target::AVX512)) nts.push_back((int)std::min<int64_t>(nt, p.group.cout_g));
      for (int tnt : nts) {
        t.nt = tnt;
        t.ch = l1_chunk(p, t, m);  // the chunk follows the tile's footprint
        list.push_back(t);
      }
    }
    for (int64_t ch : {(int64_t)d.ch * 2, (int64_t)d.ch / 2}) {
      PwTiles t = d;
      t.ch = largest_divisor_upto(p.geo.out[1], std::max<int64_t>(1, ch));
      list.push_back(t);
    }
    // Right after the own tile, the own tile with x's other form (16-bit inputs).
    if (x_choice_applies(p)) {
      PwTiles t = d;
      t.x_in_place = !d.x_in_place;
      list.insert(list.begin() + 1, t);
    }
    std::vector<std::string> keys;
    for (const PwTiles& t : list) keys.push_back(key_of(p, t));
    return TileSpace::candidates(keys, 8);
  }

  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const PwTiles t = choose_tiles(p, ctx);
    const Var c0 = a.c0, n = a.n, c1g = a.c1g;
    DwReduction red = tiled_dw_reduction(a, p, t.parts, t.ch);
    Var no("no"), ni("ni"), co("co"), ci("ci");
    Stage s = red.body.update();
    // A shorter last tile (nt not dividing the group's channels) computes only its channels
    // (guarded); its partial sums keep the full tile's storage (a stack array, not a heap one
    // per visit: 10% of d dW's time went to malloc and free without the bound).
    s.split(n, no, ni, t.nt, TailStrategy::GuardWithIf)
        .split(c1g, co, ci, t.ct)
        .reorder(c0, ni, ci, no, co, a.kw, a.kh, a.kd, a.g, red.chunk, red.mid, red.outer);
    // Output channels innermost among the tiles: a thread's tiles share its x blocks.
    const Var tgi = spread_tiles(s, {no, co, a.kw, a.kh, a.kd, a.g}, t.tiles, ctx.threads, red,
                                 t.parts, {c0, ni, ci}, {});
    s.vectorize(c0).unroll(ni).unroll(ci);
    if (p.in_dtype != DType::kFloat32) {
      if (!t.x_in_place) a.xr.compute_at(red.body, red.chunk).vectorize(c0);
      a.dys.compute_at(red.body, red.chunk).vectorize(n, 16);
    }
    red.intm.compute_at(red.body, tgi).bound_storage(n, t.nt).vectorize(c0).unroll(n).unroll(c1g);
    // Two positions of a row per step where the row is even: a row's loop then exits after
    // half the trips. Zen 1 mispredicts the exit of a loop of 28 trips (an inline-assembly nest
    // of 8-FMA steps: 0.96-0.98 FMAs a cycle at 32 trips a row, 1.02-1.03 at 16 and at 128):
    // d dW [ct=1,nt=6,ch=4] 11.8-12.3 ms against 12.5-12.8 one position a step, [ch=28]
    // 11.1-11.4 against 11.7-12.3. (dw_tiled's rows, left one position a step, were not
    // measured apart from the host's noise.)
    Stage intm_update = red.intm.update();
    if (p.geo.out[2] % 2 == 0) {
      RVar pair_o("rpo"), pair_i("rpi");
      intm_update.split(a.r[0], pair_o, pair_i, 2).reorder(c0, n, c1g, pair_i, pair_o, red.rows).unroll(pair_i);
    } else {
      intm_update.reorder(c0, n, c1g, a.r[0], red.rows);
    }
    intm_update.vectorize(c0).unroll(n).unroll(c1g);

    stage_root(a.out, c0, 0, {a.kd, a.g}, {"kdg"});
  }
};

}  // namespace

const DwSchedule* dw_pointwise_schedule() { return the<DwPointwise>(); }

}  // namespace tbex::sched
