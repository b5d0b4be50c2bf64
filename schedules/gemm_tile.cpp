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
  return TileSpace(s.schedule, {"qt", "ct", "pair"}, s.knob, 2);
}

}  // namespace

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
  return t;
}

std::string gemm_key(const GemmTiles& t, bool pairs) {
  return "qt=" + std::to_string(t.qt) + ",ct=" + std::to_string(t.ct) +
         (pairs ? ",pair=" + std::to_string(t.pair) : "");
}

std::vector<std::string> gemm_candidates(const GemmShape& s) {
  const int64_t ext = s.row;
  std::vector<std::string> keys{gemm_key(choose_gemm_tiles(s, ""), s.pairs)};
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
      for (int64_t qt : {qmax, qmax * 3 / 4, qmax / 2, ceil_div(ext, ceil_div(ext, qmax))})
        keys.push_back(gemm_key({(int)std::max<int64_t>(1, qt), ct, pair}, s.pairs));
    }
  return TileSpace::candidates(keys, s.cap);
}

std::string describe_gemm_tile(const GemmTiles& t, const char* pos, bool pairs) {
  return "[" + gemm_key(t, pairs) + "] register tile 16c0 x " + std::to_string(t.ct) + "c1 x " +
         std::to_string(t.qt) + pos + (t.pair == 2 ? ", bf16 pair dot products" : "") + ", ";
}

}  // namespace tbex::sched
