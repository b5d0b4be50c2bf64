#include "schedules/gemm_tile.h"

#include <algorithm>

#include "schedules/tiling.h"
#include "tbex/problem.h"

namespace tbex::sched {
namespace {

/** The widest tile (positions) of ct channel blocks that runs without spills on `target`.
 * fp32 FMA tiles: the accumulators tile_accumulators allows beside the ct weight rows. bf16 pair
 * tiles (AVX512_BF16 targets): Halide keeps every position's broadcast pair live beside the
 * accumulators and up to two weight rows, so qt * (ct + 1) + min(ct, 2) must fit the 32
 * registers (6 x 4 compiles without a spill; 11 x 2 spilled and ran 2.4x slower). */
int64_t max_qt(int pair, int ct, const Halide::Target& target) {
  return pair == 2 ? (32 - std::min(ct, 2)) / (ct + 1)
                   : std::max(1, tile_accumulators(target, ct) / ct);
}

/** The widest tile of at most qmax positions that splits a row of ext into equal tiles, or qmax
 * where that is under half of qmax (a prime row): no position computed twice or masked. c1 dX
 * bf16 (rows of 64, pair tiles of at most 10 positions x 2 blocks) on Zen 5 at 1 thread,
 * interleaved (min of 5): [qt=8,ct=2] 32.0 ms against [qt=10,ct=2] (7 tiles of 10 cover 70)
 * 34.7, [qt=7,ct=2] 35.8 and [qt=13,ct=1] 35.8. */
int64_t widest_dividing(int64_t ext, int64_t qmax) {
  const int64_t q = largest_divisor_upto(ext, qmax);
  return q * 2 > qmax ? q : qmax;
}

TileSpace space_of(const GemmShape& s) {
  return TileSpace(s.schedule, {"qt", "ct", "pair", "kwt", "kt", "hb"}, s.knob, 2);
}

/** Whether t may take the shape's row taps: an fp32 tile whose accumulators and
 * row_taps_operands fit the registers. */
bool row_taps_fit(const GemmShape& s, const GemmTiles& t) {
  if (s.row_taps < 2 || t.pair != 1) return false;
  const int spanned = spanned_groups(s.group_blocks, t.ct);
  return (t.qt * t.ct + row_taps_operands(t, s.row_taps, s.row_dilation, spanned, s.target)) *
             vectors_per_c0(s.target) <=
         vector_registers(s.target);
}

/** The weight bytes t's ct blocks hold over `taps` taps (every output channel's row). */
double tile_weights(const GemmShape& s, const GemmTiles& t, int taps) {
  return double(s.k_bytes) * t.ct * taps;
}

/** Whether all of t's weights (every tap of the reduction) stay in L1 unchunked. */
bool all_weights_stay_in_l1(const GemmShape& s, const GemmTiles& t, const Machine& m) {
  return weights_stay_in_l1(m, tile_weights(s, t, s.chunk_taps.empty() ? 1 : s.chunk_taps.back()),
                            false);
}

/** Whether t's accumulators hide the FMA latency with room to spare on m (a tenth more than
 * the latency x pipes FMAs in flight): then the row taps' deeper chains (kwt FMAs into each
 * accumulator per step) do not wait, and their fewer loads and steps per FMA pay. With exactly
 * as many, one tap at a time ran faster: e1 dX on a Zen 3 (8 ymm = latency 4 x 2 pipes),
 * [qt=4,ct=1] 8.7 ms with kwt=3 against 7.8. Zen 1 (latency 5 x 1 pipe), the same 8 ymm (1.6x):
 * kwt=3 ahead on every unit-stride dX row at 1 thread, c1 372 against 397 ms, f 44.8-45.3
 * against 48.3-48.6, e1 16.0 against 16.7 (2 threads 8.3 against 8.6-9.2); and 6 ymm (1.2x, the
 * widest row-taps tile of f's dilated row): f dX [qt=3,ct=1,kwt=3] 36.9-38.2 ms (chunked or
 * not) against the one-tap tiles' best, [qt=2,ct=2,kwt=1,kt=3], 38.7-40.8. The room asked
 * sits between the two machines' evidence (1.0 slower, 1.2 faster), clear of a calibration's
 * noise on either side. */
bool row_taps_hide_latency(const GemmShape& s, const GemmTiles& t, const Machine& m) {
  const double accumulators = double(t.qt) * t.ct * vectors_per_c0(s.target);
  return accumulators >= 1.1 * m.fma_latency * m.fma_pipes;
}

/** The row taps a tile takes per step by default: all wherever they fit, except on AVX2 where a
 * block's weights stay in L1 unchunked and the accumulators do not hide the FMA latency with
 * room to spare (row_taps_hide_latency). There every operand is L1-fed, one tap at a time is not
 * load-bound (the cost model ties the two) and the row-taps tile, its 16 ymm all live, measured
 * slower: e1 dX on a Zen 3 (27 KB per block), [qt=4,ct=1] 8.7 ms with kwt=3 against 7.8 one
 * tap at a time. Where the weights stream (b_c3d: 221 KB per block, in chunks of a kernel row)
 * the shared broadcasts paid: 543-595 against 575-790 ms. Both stay candidates. */
int own_kwt(const GemmShape& s, const GemmTiles& t) {
  if (!row_taps_fit(s, t)) return 1;
  const Machine m = Machine::of(s.target);
  return vectors_per_c0(s.target) == 1 || !all_weights_stay_in_l1(s, t, m) ||
                 row_taps_hide_latency(s, t, m)
             ? s.row_taps
             : 1;
}

/** The taps per reduction chunk a tile takes by default: all of them (no chunks) where one channel
 * block's weights fit the L1, else the most whose weights a visit may hold in L1
 * (Machine::l1_visit_bytes: the rest holds the dy lines and the row of partial sums), at least a
 * kernel row. AVX2 dX on a Zen 3 (1 thread, [qt=2,ct=2] in rows of taps against the unchunked
 * own tile): b_c3d 575 against 680 ms (128 output channels: 221 KB of weights per block), c2 78
 * against 88, c1 159 against 172, f 20.6 against 24-30; e1 (27 KB) ran 5% slower in chunks. */
int own_kt(const GemmShape& s, const GemmTiles& t) {
  if (s.chunk_taps.empty()) return 0;
  const Machine m = Machine::of(s.target);
  // A tile spanning real groups is not chunked: e1 dX's [qt=2,ct=2] (two groups of 16 output
  // channels, 55 KB of weights) ran 24% slower in depth slices than unchunked at 1 and 2
  // threads, its inner loop the same in perf; not understood.
  if (t.pair != 1 || s.group_blocks % t.ct != 0 || all_weights_stay_in_l1(s, t, m))
    return s.chunk_taps.back();
  for (auto it = s.chunk_taps.rbegin(); it != s.chunk_taps.rend(); ++it)
    if (weights_stay_in_l1(m, tile_weights(s, t, *it), true)) return *it;
  return s.chunk_taps.front();
}

/** Rows per group a tile takes by default (GemmTiles::hb): none, unless its blocks take turns on
 * a depth slice whose dy rows overflow twice the L2 (row_groups_apply, slice_dy_overflows_l2):
 * then groups of kGroupRows, whose dy rows (10 of each depth tap) stay in L2 across the
 * blocks. dX on a Zen 3, timed alternately: b_c3d
 * [qt=4,ct=1,kwt=3,kt=3] (4 blocks, 5 MB of dy rows per slice) 570 against 632 ms at 1
 * thread, 284 against 308 at 2; c1 (2 blocks, 1.6 MB) 0.91x / 0.93x the ungrouped time;
 * c2 [qt=2,ct=2] (2 passes, 0.84 MB) 1.02-1.03x, so not grouped. */
int own_hb(const GemmShape& s, const GemmTiles& t) {
  return row_groups_apply(s, t) && slice_dy_overflows_l2(s, Machine::of(s.target)) ? kGroupRows
                                                                                  : 0;
}

}  // namespace

bool chunked(const GemmShape& s, const GemmTiles& t) {
  return !s.chunk_taps.empty() && t.kt < s.chunk_taps.back();
}

bool weights_stay_in_l1(const Machine& m, double bytes, bool chunks) {
  return bytes <= double(chunks ? m.l1_visit_bytes() : m.l1);
}

bool taps_inside_positions(const Halide::Target& target) { return vectors_per_c0(target) == 1; }

int row_taps_operands(const GemmTiles& t, int taps, int dilation, int spanned,
                      const Halide::Target& target) {
  const int reach = (taps - 1) * dilation;
  if (taps_inside_positions(target)) return t.ct * taps + (reach + 1) * spanned;
  const int vw = vectors_per_c0(target);
  const int window = (t.qt + reach) * spanned;
  return (t.ct * vw + window + vw - 1) / vw;
}

GemmTiles choose_gemm_tiles(const GemmShape& s, const std::string& variant) {
  const TileSpace space = space_of(s);
  GemmTiles t;
  const VariantFields asked = space.parse(variant);
  t.pair = asked.count("pair") ? asked.at("pair") : s.pairs_default ? 2 : 1;
  space.require(t.pair == 1 || (t.pair == 2 && s.pairs), variant,
                "pair must be 1, or 2 for bf16 inputs with an even number of output channels "
                "per group");
  // The channel blocks (a divisor of the blocks up to 4) whose tile holds the most accumulators
  // (ties: more blocks; AVX-512 fp32: 4, AVX2: 1, which holds 6 where 2 blocks hold 4).
  for (int ct = 4, most = 0; ct >= 1; --ct) {
    const int64_t acc = std::min<int64_t>(max_qt(t.pair, ct, s.target), s.row) * ct;
    if (s.blocks % ct == 0 && acc > most) most = (int)acc, t.ct = ct;
  }
  const int64_t qmax = max_qt(t.pair, t.ct, s.target);
  // Covering: fewest tiles along the row, then the narrowest that still covers it in that many
  // (a row of 17 is 3 tiles of 6, not 2 of 8 and a shifted third recomputing 7 positions).
  const auto fitted = [&](int64_t widest) {
    return s.cover_row ? (int)ceil_div(s.row, ceil_div(s.row, widest))
                       : (int)std::max<int64_t>(1, std::min<int64_t>(widest, s.row));
  };
  t.qt = fitted(qmax);
  // Where the row taps hide the FMA latency (row_taps_hide_latency: own_kwt takes them), the own
  // tile is the widest that holds them: Zen 1's c1 dX [qt=4,kwt=3] 372 ms against [qt=6,kwt=1]
  // 397. (Where only the streaming weights make row taps the own choice, the widest tile keeps
  // one tap at a time: b_c3d's [qt=6,kwt=1] ran at the FMA peak there.)
  if (!asked.count("kwt") && vectors_per_c0(s.target) > 1 && !row_taps_fit(s, t)) {
    GemmTiles r = t;
    while (r.qt > 1 && !row_taps_fit(s, r)) --r.qt;
    r.qt = fitted(r.qt);
    if (row_taps_fit(s, r) && row_taps_hide_latency(s, r, Machine::of(s.target))) t.qt = r.qt;
  }
  const VariantFields f = space.resolve(variant, {{"qt", &t.qt}, {"ct", &t.ct}});
  space.require(s.blocks % (f.count("ct") ? t.ct : 1) == 0 && (!f.count("qt") || t.qt <= s.row),
                variant,
                "ct must divide " + std::string(s.blocks_name) + " (" + std::to_string(s.blocks) +
                    ") and qt be at most " + s.row_name + " (" + std::to_string(s.row) + ")");
  t.kwt = asked.count("kwt") ? asked.at("kwt") : own_kwt(s, t);
  space.require(t.kwt == 1 || (t.kwt == s.row_taps && row_taps_fit(s, t)),
                variant,
                "kwt must be 1, or the row's taps (" + std::to_string(s.row_taps) +
                    ") for fp32 tiles of a unit-stride row whose accumulators and operands fit "
                    "the registers");
  t.kt = asked.count("kt") ? asked.at("kt") : own_kt(s, t);
  const auto& kts = s.chunk_taps;
  space.require(kts.empty() ? !asked.count("kt")
                            : std::count(kts.begin(), kts.end(), t.kt) && (t.pair == 1 || !chunked(s, t)),
                variant,
                kts.empty() ? std::string("kt is only offered for unit-stride tiles")
                            : "kt must be the taps of a kernel row (" + std::to_string(kts.front()) +
                                  "), of a depth slice or all (" + std::to_string(kts.back()) +
                                  "), and all of them for pair=2");
  // hb = the rows of a slice (or more) is one group: the same loops as no groups (the key
  // writes no groups so).
  t.hb = asked.count("hb") ? asked.at("hb") : own_hb(s, t);
  space.require(!asked.count("hb") || s.slice_rows > 0, variant,
                "hb is only offered for unit-stride tiles of dX");
  if (t.hb >= s.slice_rows) t.hb = 0;
  return t;
}

std::string gemm_key(const GemmTiles& t, const GemmShape& s) {
  return "qt=" + std::to_string(t.qt) + ",ct=" + std::to_string(t.ct) +
         (s.pairs ? ",pair=" + std::to_string(t.pair) : "") +
         (s.row_taps > 1 ? ",kwt=" + std::to_string(t.kwt) : "") +
         (!s.chunk_taps.empty() ? ",kt=" + std::to_string(t.kt) : "") +
         (s.slice_rows > 0 ? ",hb=" + std::to_string(t.hb > 0 ? t.hb : s.slice_rows) : "");
}

std::vector<std::string> gemm_candidates(const GemmShape& s) {
  const int64_t ext = s.row;
  const auto key = [&](const GemmTiles& t) { return gemm_key(t, s); };
  const GemmTiles own = choose_gemm_tiles(s, "");
  std::vector<std::string> keys{key(own)};
  // A tile with the other choice of row taps (where they fit): the model and the measured
  // tuner compare the two.
  const auto other_kwt = [&](GemmTiles t) {
    if (!row_taps_fit(s, t)) return;
    t.kwt = t.kwt > 1 ? 1 : s.row_taps, t.kt = own_kt(s, t), t.hb = own_hb(s, t);
    keys.push_back(key(t));
  };
  other_kwt(own);
  // The own tile in one chunk.
  if (chunked(s, own)) {
    GemmTiles t = own;
    t.kt = s.chunk_taps.back();
    keys.push_back(key(t));
  }
  // The own tile with the other choice of row groups, where blocks take turns on a slice.
  if (row_groups_apply(s, own)) {
    GemmTiles t = own;
    t.hb = t.hb > 0 ? 0 : kGroupRows;
    keys.push_back(key(t));
  }
  std::vector<int> cts;
  for (bool in_group : {true, false})
    for (int ct = 4; ct >= 1; --ct)
      if (s.blocks % ct == 0 && (s.group_blocks % ct == 0) == in_group) cts.push_back(ct);
  // Pairs first where the target has bf16 dot products, then fp32 FMAs. Elsewhere pair=2 is
  // Halide's portable lowering (a variant for tests only): never a candidate.
  std::vector<int> forms{1};
  if (s.pairs_default) forms.insert(forms.begin(), 2);
  for (int pair : forms)
    for (int ct : cts) {
      if (pair == 1 && tile_accumulators(s.target, ct) < ct) continue;  // even qt=1 spills
      const int64_t qmax = std::min<int64_t>(max_qt(pair, ct, s.target), ext);
      for (int64_t qt : {qmax, qmax * 3 / 4, qmax / 2, ceil_div(ext, ceil_div(ext, qmax)),
                         widest_dividing(ext, qmax)}) {
        GemmTiles t{(int)std::max<int64_t>(1, qt), ct, pair};
        t.kwt = own_kwt(s, t);
        t.kt = own_kt(s, t);
        t.hb = own_hb(s, t);
        keys.push_back(key(t));
        other_kwt(t);
      }
    }
  return TileSpace::candidates(keys, s.cap);
}

std::string describe_gemm_tile(const GemmTiles& t, const GemmShape& s, const char* pos) {
  return "[" + gemm_key(t, s) + "] register tile 16c0 x " + std::to_string(t.ct) + "c1 x " +
         std::to_string(t.qt) + pos + (t.pair == 2 ? ", bf16 pair dot products" : "") +
         (t.kwt > 1 ? ", row taps unrolled" : "") +
         (chunked(s, t) ? ", reduction in chunks of " + std::to_string(t.kt) +
                              " taps, row of partial sums in L1"
                        : "") +
         (t.hb > 0 ? ", channel blocks inside groups of " + std::to_string(t.hb) + " rows" : "") +
         ", ";
}

}  // namespace tbex::sched
