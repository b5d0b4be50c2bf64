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

TileSpace space_of(const GemmShape& s) {
  return TileSpace(s.schedule, {"qt", "ct", "pair", "kwt"}, s.knob, 2);
}

/** The row taps a tile takes per step by default: all wherever the shape has them and they fit. */
int own_kwt(const GemmShape& s, const GemmTiles& t) {
  return s.row_taps > 1 && t.pair == 1 && row_taps_fit(t, s.row_taps, s.target) ? s.row_taps : 1;
}

}  // namespace

bool row_taps_fit(const GemmTiles& t, int taps, const Halide::Target& target) {
  const int w = vectors_per_c0(target);
  return (t.qt * t.ct + t.ct * taps) * w + 2 <= vector_registers(target);
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
  t.qt = s.cover_row ? (int)ceil_div(s.row, ceil_div(s.row, qmax))
                     : (int)std::max<int64_t>(1, std::min<int64_t>(qmax, s.row));
  const VariantFields f = space.resolve(variant, {{"qt", &t.qt}, {"ct", &t.ct}});
  space.require(s.blocks % (f.count("ct") ? t.ct : 1) == 0 && (!f.count("qt") || t.qt <= s.row),
                variant,
                "ct must divide " + std::string(s.blocks_name) + " (" + std::to_string(s.blocks) +
                    ") and qt be at most " + s.row_name + " (" + std::to_string(s.row) + ")");
  t.kwt = asked.count("kwt") ? asked.at("kwt") : own_kwt(s, t);
  space.require(t.kwt == 1 || (t.kwt == s.row_taps && t.pair == 1 &&
                               row_taps_fit(t, s.row_taps, s.target)),
                variant,
                "kwt must be 1, or the row's taps (" + std::to_string(s.row_taps) +
                    ") for fp32 tiles of a unit-stride row whose accumulators and weight rows of "
                    "every tap fit the registers");
  return t;
}

std::string gemm_key(const GemmTiles& t, bool pairs, bool row_taps) {
  return "qt=" + std::to_string(t.qt) + ",ct=" + std::to_string(t.ct) +
         (pairs ? ",pair=" + std::to_string(t.pair) : "") +
         (row_taps ? ",kwt=" + std::to_string(t.kwt) : "");
}

std::vector<std::string> gemm_candidates(const GemmShape& s) {
  const int64_t ext = s.row;
  const bool taps = s.row_taps > 1;
  GemmTiles own = choose_gemm_tiles(s, "");
  std::vector<std::string> keys{gemm_key(own, s.pairs, taps)};
  if (own.kwt > 1) {  // the own tile one tap at a time: the measured tuner compares both
    own.kwt = 1;
    keys.push_back(gemm_key(own, s.pairs, taps));
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
      for (int64_t qt : {qmax, qmax * 3 / 4, qmax / 2, ceil_div(ext, ceil_div(ext, qmax))}) {
        GemmTiles t{(int)std::max<int64_t>(1, qt), ct, pair};
        t.kwt = own_kwt(s, t);
        keys.push_back(gemm_key(t, s.pairs, taps));
      }
    }
  return TileSpace::candidates(keys, s.cap);
}

std::string describe_gemm_tile(const GemmTiles& t, const char* pos, bool pairs, bool row_taps) {
  return "[" + gemm_key(t, pairs, row_taps) + "] register tile 16c0 x " + std::to_string(t.ct) +
         "c1 x " + std::to_string(t.qt) + pos + (t.pair == 2 ? ", bf16 pair dot products" : "") +
         (t.kwt > 1 ? ", row taps unrolled" : "") + ", ";
}

}  // namespace tbex::sched
