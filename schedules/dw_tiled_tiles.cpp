/** dw_tiled's tiles (dw_tiled_tiles.h): the own choice, the variant rules, the candidates and
 * the estimate; the rules' measurements beside each. */
#include "schedules/dw_tiled_tiles.h"

#include <algorithm>

#include "schedules/loops.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched::dw_tiled {

using namespace Halide;

namespace {

const TileSpace& space() {
  static const TileSpace s("dw_tiled", {"nt", "kwt", "ch", "parts", "pair", "db", "x"}, "TBEX_DW_TILE", 3);
  return s;
}

/** Many x bytes per FMA (few channels, strides): staging x from memory dominates. */
bool staging_bound(const Problem& p) {
  return 4.0 * dx_elems(p) / (p.geo.flops() / 32) >= 0.5;
}

/** Whether staging-bound chunks are staged with the next chunk's x prefetched (prefetch_x)
 * rather than read in place: Zen 4 targets (Halide 21's Zen 5 host target carries the feature
 * too). Halide prefetches into L1 (prefetchnta), which hid staging there (seed dW 8.0 -> 7.4
 * ms) but evicted the running chunk on Sapphire Rapids (seed dW 6.3 -> 14 ms at 1 thread; both
 * measured before lower::mend_prefetches, when a prefetch covered four times an fp32 region). */
bool prefetches_staged_x(const Halide::Target& target) {
  return target.has_feature(Halide::Target::AVX512_Zen4);
}

/** Whether tiles staging x per input block (x_per_block_applies) prefetch the next block's x while
 * this block's tiles compute, the lowering spreading its lines over those tiles: Zen 4 targets
 * (prefetches_staged_x), where x's rows come from the L3 (x beyond the L2, within the L3), and
 * there is a next block (Halide warns of, and drops, a prefetch past a loop of one). The
 * staging pass otherwise waits on the L3 for each block's rows in a burst the dots do not
 * overlap. Zen 4, interleaved runs (min / median of 4): d dW bf16 [nt=8,ch=2,parts=4,pair=2]
 * (x 6.4 MB) 1.92 / 1.94 ms against 2.09 / 2.15 at 1 thread, 0.94 / 0.94 against 0.95 / 0.96 at
 * 2; c2 and f at 2 threads level. Its depth cut to 2 (x 1.6 MB, parts=2): 0.473 against 0.477;
 * to 1 (0.8 MB, in the L2): level. Beyond the L3 the rows stream at the memory path's rate,
 * which prefetching does not raise: the seed (x 21 MB) ran 1-2% slower with it (4.85 against
 * 4.75 ms at 1 thread, 2.44 against 2.40 at 2). */
bool prefetches_next_block(const Problem& p, const Halide::Target& target) {
  const double x = dx_elems(p) * input_bytes(p);
  const Machine m = Machine::of(target);
  const int64_t blocks = p.group.cin1_g * p.geo.kernel[0] * p.group.real_g;
  return prefetches_staged_x(target) && x > m.l2 && x <= m.l3 && blocks > 1;
}

/** Whether the tiles may read fp32 x in place (DwAlgorithm::xr inlined) instead of staging its
 * padded rows per chunk (DwTiles::stage_x; key "x": 1 in place, 2 staged), and do by default:
 * dense rows of fp32 x where the reduction leaves out every tap reading the pads
 * (keeps_no_pad_taps; so x read in place needs no padding select, and Halide partitions those
 * along the row out of its steady loop) or where staging dominates (staging_bound). The
 * staging pass's reads of x from L3 or DRAM overlap nothing, while the tiles' do (the first
 * tile to reach a row waits on it, the others find it in cache). Emerald Rapids, interleaved, 1
 * thread: the seed dW 5.98 against 6.92 ms (3.00 against 3.56 at 2 threads in 4 parts, 2.75
 * unsplit), e1 3.77 / 3.92 (1.95 / 2.03 at 2 threads), f 9.84 / 10.33 (staged for 8 depth
 * slices), g 36.2 / 36.3, c1 89.7 / 90.4, b and c2 level; with a padding select left in the
 * loop (pad taps kept), 1.09-1.7x slower. Not where staged chunks are prefetched instead
 * (staging-bound problems on Zen 4: prefetches_staged_x; measured so, reading in place was
 * not). 16-bit x stays staged: converted in the tiles, the seed ran 6.24 against 6.02 ms, e1
 * 4.80 against 3.91. */
bool x_in_place_applies(const Problem& p, const Halide::Target& target) {
  const bool bound = staging_bound(p);
  return p.in_dtype == DType::kFloat32 && stage_x_rows(p) &&
         (ops::keeps_no_pad_taps(p) || bound) && !(bound && prefetches_staged_x(target));
}

/** Whether x's staging can span several output depth slices (DwTiles::db): staged fp32 rows
 * (not the pair form) and kd taps that overlap between neighbouring slices. */
bool depth_blocks_apply(const Problem& p, const DwTiles& t) {
  return t.stage_x && t.pair == 1 && p.geo.kernel[0] > p.geo.stride[0] &&
         dw_depth_extent(p, t.parts) > 1;
}

/** x depth slices staged for `db` output depth slices: each slice's kd taps, those shared by
 * neighbours once (Kd for one slice). */
int64_t x_slices_of(const Problem& p, int64_t db) {
  const ConvGeometry& g = p.geo;
  return std::min(db * g.kernel[0], (db - 1) * g.stride[0] + (g.kernel[0] - 1) * g.dilation[0] + 1);
}

/** Bytes of x a chunk of t.ch output rows (or row pairs) stages for one input block (one depth
 * slice of one block of one real group). */
int64_t block_x_bytes(const Problem& p, const DwTiles& t) {
  return dw_staged_x_rows(p, t.ch, t.pair) * padded_w(p) * 64;
}

/** Bytes of x such a chunk of `db` depth slices stages: all blocks, every kd and kh. */
int64_t chunk_x_bytes(const Problem& p, const DwTiles& t, int64_t db) {
  return block_x_bytes(p, t) * p.group.cin1_g * p.group.real_g * x_slices_of(p, db);
}

}  // namespace

/** Whether tiles `t` stage x per input block of the chunk (the block's rows right before its
 * tiles), not the whole chunk at once: pair tiles whose reduction is split in parts, so each
 * thread walks every tile of its part in one loop, whose blocks can each stage their own rows.
 * (Pair chunks are one depth slice: depth_blocks_apply.) A chunk's x (all blocks, 57 KB for d
 * dW's 2 row pairs) staged at once outgrows the L1 before its tiles read it; one block's (3.5
 * KB) stays there. Zen 4, d dW bf16 [nt=8,ch=2,parts=4], interleaved runs of one build (min / median of 6): 1.94 / 1.97 ms
 * per block against 2.02 / 2.12 per chunk (2 threads 0.96 / 0.97 against 1.01 / 1.04); the
 * seed (x from DRAM, staging-bound) level, 5.72 / 5.77 against 5.74 / 5.78; at 2 threads g
 * 13.8 / 14.0 against 14.0 / 14.4, c1, c2 and f level. Such tiles prefetch the next block, not
 * the next chunk (prefetches_next_block). Split over threads by tiles (parts = 1), the threads'
 * tiles cut across blocks: per chunk there. */
bool x_per_block_applies(const DwTiles& t) { return t.pair != 1 && t.parts > 1; }

namespace {

/** Bytes of a chunk that must stay in cache while its tiles pass over it. Staged whole, the
 * chunk's x (every block, written before the tiles read it) and its dy rows (every output
 * channel). Staged per input block (x_per_block_applies), one block's x at a time. Read in
 * place (fp32, !stage_x), the tiles read x where it lies, in the order of spread_tiles (output
 * channels innermost, then the kw and kh taps, the block, the kd tap, the real group): between
 * reuses a block's rows of one depth slice and the real group's dy rows, the rest each read once
 * from where it lies. Counted whole there, e1 dW's 14-row chunks (468 KB) were priced from L3
 * and ranked last; they ran fastest (Zen 1, [nt=4,kwt=1,x=1]: 1 thread 17.7-18.4 ms against
 * 18.0-18.3 for 7 rows and 18.7-18.9 for the own 4; 2 threads 8.9-9.0 against 9.2-9.3 and
 * 9.5). */
int64_t chunk_footprint(const Problem& p, const DwTiles& t, int64_t db) {
  const int64_t dy_row = t.ch * p.geo.out[2] * 64;
  if (!t.stage_x) return block_x_bytes(p, t) + dy_row * ceil_div(p.group.cout_g, int64_t(16));
  const int64_t x = x_per_block_applies(t) ? block_x_bytes(p, t) : chunk_x_bytes(p, t, db);
  return x + db * dy_row * p.geo.cout1();
}

/** The depth slices per chunk the schedule picks: the most (dividing the part's depth) whose
 * chunk stays within half the L2, so x is staged once per slice instead of once per kd tap (e1
 * dW: 3.9 times x per call with one slice per chunk, about a tenth of its time). */
int own_depth_block(const Problem& p, const DwTiles& t, const Machine& m) {
  // A prefetched next chunk (Zen 4, staging-bound) was measured with single slices.
  if (!depth_blocks_apply(p, t) || t.prefetch_x) return 1;
  const int64_t extent = dw_depth_extent(p, t.parts);
  int best = 1;
  for (int64_t db = 2; db <= extent; ++db)
    if (extent % db == 0 && chunk_footprint(p, t, db) <= m.l2 / 2) best = (int)db;
  return best;
}

/** Bytes one output row (or row pair) adds to a tile visit: its x row (kwt taps overlapping)
 * and its dy row. */
int64_t visit_row_bytes(const Problem& p, const DwTiles& t) {
  const ConvGeometry& g = p.geo;
  return 64 * (g.out[2] * g.stride[2] + (t.kwt - 1) * g.dilation[2] + g.out[2]);
}

/** Rows per chunk whose tile visit stays in L1 (l1_chunk_rows): the tiles sharing those rows
 * (output channel groups, kh neighbours) then run from L1. On Sapphire
 * Rapids: e1 dW 7 rows against 14 (5-8%), g dW 7 against 14 (16%), seed 6 against 12 (5%). */
int l1_chunk(const Problem& p, const DwTiles& t, const Machine& m) {
  return l1_chunk_rows(dw_rows_of(p, t.pair), visit_row_bytes(p, t), p.geo.out[2] * dw_pair_points(t.pair),
                       m.l1_visit_bytes());
}

/** The earlier rule (a candidate): ~512 reduction points per chunk. */
int points_chunk(const Problem& p, const DwTiles& t) {
  return largest_divisor_upto(dw_rows_of(p, t.pair),
                              std::max<int64_t>(1, 512 / p.geo.out[2] / dw_pair_points(t.pair)));
}

}  // namespace

/** The tiles for `p`: the schedule's own choice, then TBEX_DW_TILE (only when no variant is
 * given), then the fields `variant` sets. */
DwTiles choose_tiles(const Problem& p, const Context& ctx) {
  const ConvGeometry& g = p.geo;
  DwTiles t;
  const VariantFields asked = space().parse(ctx.variant);
  t.pair = dw_pair_or_batch_pair_of(p, ctx.target, space(), ctx.variant);
  const int64_t rows = dw_rows_of(p, t.pair);
  const Machine m = Machine::of(ctx.target);
  if (ctx.target.has_feature(Target::AVX512)) {
    t.kwt = largest_divisor_upto(g.kernel[2], 3);
    // 24 zmm accumulators for three kw taps (8n x 3kw: each x vector and broadcast serves more
    // FMAs, half the tile visits of 4n x 3kw: 1-2% faster on e1, c2, f and g dW on two Intel
    // AVX-512 guests), else 16 (8n x 2kw, 16n x 1kw). The pair form keeps every channel's
    // broadcast pair live beside its accumulators: 4n there.
    t.nt = t.kwt == 3 ? (t.pair != 1 ? 4 : 8) : t.kwt == 2 ? 8 : 16;
  } else {
    // Narrower files (AVX2: two ymm per 16 lanes): the kw taps whose tile holds the most
    // accumulators beside its kwt x rows (6n x 1kw there; nt divides cout_g).
    for (int kwt = 3, most = 0; kwt >= 1; --kwt) {
      const int nt = largest_divisor_upto(p.group.cout_g, tile_accumulators(ctx.target, kwt) / kwt);
      if (g.kernel[2] % kwt == 0 && nt * kwt > most) most = nt * kwt, t.kwt = kwt, t.nt = nt;
    }
  }
  t.ch = l1_chunk(p, t, m);
  const VariantFields f = space().resolve(ctx.variant, {{"nt", &t.nt}, {"kwt", &t.kwt}, {"ch", &t.ch}});
  {
    const bool may = x_in_place_applies(p, ctx.target);
    // A variant asking for depth blocks (which stage x) without naming x stages x.
    const bool in_place = asked.count("x") ? asked.at("x") == 1
                                           : may && !(asked.count("db") && asked.at("db") > 1);
    space().require(!asked.count("x") || (may && asked.at("x") <= 2), ctx.variant,
                    "x must be 1 (read in place) or 2 (staged), for fp32 x of dense rows whose "
                    "reduction leaves every pad tap out or whose staging dominates");
    t.stage_x = stage_x_rows(p) && !in_place;
  }
  // The own choice may round nt or kwt up past cout_g or Kw; a variant's tile divides them.
  space().require(p.group.cout_g % (f.count("nt") ? t.nt : 1) == 0 &&
                      g.kernel[2] % (f.count("kwt") ? t.kwt : 1) == 0 &&
                      rows % (f.count("ch") ? t.ch : 1) == 0,
                  ctx.variant,
                  "nt must divide cout_g (" + std::to_string(p.group.cout_g) + "), kwt Kw (" +
                      std::to_string(g.kernel[2]) + ") and ch the rows (" + std::to_string(rows) +
                      (t.pair == kDwRowPairs ? " row pairs" : "") + ")");
  t.tiles = (p.group.cout_g / t.nt) * (g.kernel[2] / t.kwt) * g.kernel[1] * p.group.cin1_g *
            g.kernel[0] * p.group.real_g;
  // Staging streams x from memory chunk by chunk; where that dominates (many x bytes per FMA:
  // few channels, strides) the next chunk's rows are prefetched during this chunk's tiles, if
  // both chunks fit in L2 side by side (larger chunks got slower), where the target is one that
  // prefetches them (prefetches_staged_x).
  // Few tiles balance badly over threads, and staging-bound problems stage every chunk once
  // per tile group: split the reduction instead (kDwSplitParts, whatever the thread count).
  const bool streams_x = t.stage_x && chunk_x_bytes(p, t, 1) <= (256 << 10) && staging_bound(p) &&
                         prefetches_staged_x(ctx.target);
  const int64_t batch = dw_batch_of(p, t.pair);
  if (t.tiles < 8 || streams_x) t.parts = dw_parts(p, kDwSplitParts, batch);
  if (f.count("parts")) t.parts = dw_parts_of_variant(p, space(), ctx.variant, f.at("parts"), batch);
  // Staged per input block, the next block is prefetched instead of the next chunk, which needs a
  // next chunk (as prefetches_next_block a next block).
  t.prefetch_x = x_per_block_applies(t) ? prefetches_next_block(p, ctx.target)
                                        : streams_x && rows / t.ch > 1;
  // Last: the depth extent a chunk can span depends on the parts.
  t.db = f.count("db") ? f.at("db") : own_depth_block(p, t, m);
  space().require(t.db == 1 || (depth_blocks_apply(p, t) && dw_depth_extent(p, t.parts) % t.db == 0),
                  ctx.variant,
                  "db must be 1, or divide the output depth a part walks (" +
                      std::to_string(dw_depth_extent(p, t.parts)) +
                      ") where x is staged in fp32 rows and kd taps overlap (Kd " +
                      std::to_string(g.kernel[0]) + " > stride " + std::to_string(g.stride[0]) + ")");
  return t;
}

std::string key_of(const Problem& p, const Halide::Target& target, const DwTiles& t) {
  VariantFields f{{"nt", t.nt}, {"kwt", t.kwt}, {"ch", t.ch}, {"parts", t.parts}};
  if (dw_pairs_apply(p)) f["pair"] = t.pair;
  if (depth_blocks_apply(p, t)) f["db"] = t.db;
  if (x_in_place_applies(p, target)) f["x"] = t.stage_x ? 2 : 1;
  return space().key(f);
}

/** "" (the own choice) first, then register tiles of the most accumulators (nt x kwt) the
 * target holds without spills (tile_accumulators) and each with half as many (each with its L1
 * chunk), the row chunk halved and doubled, ~512 points per chunk, and the other reduction
 * split. */
std::vector<std::string> candidates_of(const Problem& p, const Context& ctx) {
  Context own = ctx;
  own.variant = "";
  const DwTiles d = choose_tiles(p, own);
  const ConvGeometry& g = p.geo;
  std::vector<DwTiles> list{d};
  const Machine m = Machine::of(ctx.target);
  for (int kwt = 3; kwt >= 1; --kwt) {
    if (g.kernel[2] % kwt != 0) continue;
    const int most = tile_accumulators(ctx.target, kwt);
    // AVX-512 with three kw taps also 24 accumulators (+ 3 x vectors and a broadcast: 28 of
    // the 32 zmm; the own tile where pairs do not apply).
    const int wide = ctx.target.has_feature(Target::AVX512) && kwt == 3 ? 24 : 0;
    for (int acc : {most, most / 2, wide}) {
      if (acc < kwt) continue;
      DwTiles t = d;
      t.kwt = kwt, t.nt = largest_divisor_upto(p.group.cout_g, acc / kwt);
      t.ch = l1_chunk(p, t, m);
      list.push_back(t);
    }
  }
  for (int64_t ch : {(int64_t)d.ch * 2, (int64_t)d.ch / 2}) {
    DwTiles t = d;
    t.ch = largest_divisor_upto(dw_rows_of(p, d.pair), std::max<int64_t>(1, ch));
    list.push_back(t);
  }
  {
    DwTiles t = d;
    t.ch = points_chunk(p, d);
    list.push_back(t);
  }
  if (const int split = dw_parts(p, kDwSplitParts, dw_batch_of(p, d.pair)); split > 1) {
    DwTiles t = d;
    t.parts = d.parts > 1 ? 1 : split;
    list.push_back(t);
  }
  // Every tile its own depth block; right after the own tile, the own tile with the other
  // choice (x staged per depth slice, or once for several).
  for (DwTiles& t : list) t.db = own_depth_block(p, t, m);
  if (depth_blocks_apply(p, d)) {
    DwTiles t = d;
    t.db = d.db > 1 ? 1 : largest_divisor_upto(dw_depth_extent(p, d.parts), 2);
    if (t.db != d.db) list.insert(list.begin() + 1, t);
  }
  // Right after the own tile: the other choice of reading x in place (staged: its own depth
  // block).
  if (x_in_place_applies(p, ctx.target)) {
    DwTiles t = d;
    t.stage_x = !d.stage_x;
    t.db = own_depth_block(p, t, m);
    list.insert(list.begin() + 1, t);
  }
  // Right after the own tile: the other forms, each with its own chunk (pairs only where the
  // target computes them natively).
  if (dw_other_pair_offered(p, ctx.target, d.pair)) {
    for (int form : {kDwBatchPairs, kDwRowPairs, 1}) {
      if (form == d.pair || (form == kDwBatchPairs && !dw_batch_pairs_apply(p))) continue;
      Context other = own;
      other.variant = "pair=" + std::to_string(form);
      list.insert(list.begin() + 1, choose_tiles(p, other));
    }
  }
  std::vector<std::string> keys;
  for (const DwTiles& t : list) keys.push_back(key_of(p, ctx.target, t));
  return TileSpace::candidates(keys, 10);
}

/** The cost model's view of dw_tiled with tiles `t`. */
Estimate estimate_of(const Problem& p, const Context& ctx, const DwTiles& t) {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  LoopNest n;
  n.threads = ctx.threads;
  // Per step: kwt x vectors (c0 lanes), nt dy broadcasts, nt x kwt FMAs.
  // Pair tiles keep every channel's broadcast pair live (as dx_tiled's do).
  n.tile = {double(t.nt * t.kwt), double(t.kwt + t.nt), t.nt * t.kwt,
            t.pair != 1 ? t.kwt + t.nt : t.kwt + 1, 0, double(t.nt)};
  n.tile.dots = t.pair != 1;
  const int64_t tiles = ceil_div(gd.cout_g, t.nt) * ceil_div(g.kernel[2], t.kwt) * g.kernel[1] *
                        gd.cin1_g * g.kernel[0] * gd.real_g;
  // A pair step is one dot-product instruction per accumulator for two output rows (or the same
  // row of two batches).
  n.steps_per_visit = double(t.ch * g.out[2]);
  n.visits = double(tiles) * dw_batch_of(p, t.pair) * g.out[0] * (dw_rows_of(p, t.pair) / t.ch);
  // A visit streams ch rows of x (one block, kw taps overlapping) and ch rows of dy (a line a
  // position holds the tile's nt channels). A pair form's row (two rows or batches of bf16) takes
  // the 64 bytes a column an fp32 row does (charged twice that before; the Zen 5 bf16 dW picks
  // the fix moved, twice the rows per chunk, ran level with the old ones).
  const double x_row = double(g.out[2] * g.stride[2] + (t.kwt - 1) * g.dilation[2]) * 64;
  const double dy_row = double(g.out[2]) * 64;
  n.visit_bytes = t.ch * (x_row + dy_row);
  n.visit_footprint = (int64_t)n.visit_bytes;
  n.chunk_footprint = chunk_footprint(p, t, t.db);
  const int64_t x_rows = dw_staged_x_rows(p, t.ch, t.pair);
  n.units = t.parts > 1 ? t.parts : tiles;
  // Passes: x staged per chunk (kd and kh overlap re-stage rows), dy converted per chunk, the
  // output stage, and adding the partial sums. Unsplit, every tile group (thread) stages every
  // chunk for its own tiles (the blocks of its real groups: tile_stagers).
  const double x_elems = padded_x_elems(p);
  // Row pairs stage most x rows twice (as a pair's first and second row), batch pairs once,
  // both in bf16. A chunk of db depth slices stages the x slices their kd taps share once.
  const int rows_per = t.pair == kDwRowPairs ? 2 : 1;  // output rows per reduction row
  const double restage = double(x_slices_of(p, t.db)) / (t.db * g.stride[0]) * x_rows /
                         (t.ch * rows_per * g.stride[1]) * rows_per;
  const double staged = t.pair != 1 ? 2 : 4;
  const double stagers = tile_stagers(tiles, ctx.threads, t.parts, gd.real_g);
  // Dense fp32 x read in place (x_in_place_applies): x read from beyond the L2 once, at the rate
  // of a pass (the seed dW at 1 thread: 5.4-6.0 ms measured, 4.3 predicted for its steps alone;
  // staged, 6.9). Once, not per tile group: the groups walk the same chunks at the same time
  // and the second finds the rows in the shared L3 (seed dW at 2 threads, unsplit 2.75 ms
  // against 2.96 split in 4 parts).
  const double x_reads = !t.stage_x && stage_x_rows(p) ? dx_elems(p) * input_bytes(p) : 0;
  n.pass_bytes = x_reads +
                 stagers * ((t.stage_x ? x_elems * restage * (input_bytes(p) + staged) : 0) +
                            (p.in_dtype != DType::kFloat32 ? dy_elems(p) * (input_bytes(p) + staged) : 0)) +
                 dw_out_elems(p) * 8 * (t.parts > 1 ? 1 + t.parts : 1);
  n.lane_use = lane_use_of(g.flops() / dw_pair_points(t.pair), n);
  // Row pairs skip the pads as rows do (a pair where both rows read pads): about the same share.
  n.executed = ops::inside_tap_share(p);
  return evaluate(n, Machine::of(ctx.target));
}

}  // namespace tbex::sched::dw_tiled
