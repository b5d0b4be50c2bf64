#include "schedules/gemm_tile.h"

#include <algorithm>

#include "schedules/tiling.h"
#include "tbex/problem.h"

namespace tbex::sched {
namespace {

/** The most accumulators a tile keeps: 24 spill the register file. */
constexpr int kAccumulators = 16;

TileSpace space_of(const GemmShape& s) { return TileSpace(s.schedule, {"qt", "ct"}, s.knob, 2); }

}  // namespace

GemmTiles choose_gemm_tiles(const GemmShape& s, const std::string& variant) {
  GemmTiles t;
  t.ct = largest_divisor_upto(s.blocks, 4);
  const int64_t qmax = std::max(1, kAccumulators / t.ct);
  // Covering: fewest tiles along the row, then the narrowest that still covers it in that many
  // (a row of 17 is 3 tiles of 6, not 2 of 8 and a shifted third recomputing 7 positions).
  t.qt = s.cover_row ? (int)ceil_div(s.row, ceil_div(s.row, qmax))
                     : (int)std::max<int64_t>(1, std::min<int64_t>(qmax, s.row));
  const TileSpace space = space_of(s);
  const VariantFields f = space.resolve(variant, {{"qt", &t.qt}, {"ct", &t.ct}});
  space.require(s.blocks % (f.count("ct") ? t.ct : 1) == 0 && (!f.count("qt") || t.qt <= s.row),
                variant,
                "ct must divide " + std::string(s.blocks_name) + " (" + std::to_string(s.blocks) +
                    ") and qt be at most " + s.row_name + " (" + std::to_string(s.row) + ")");
  return t;
}

std::string gemm_key(const GemmTiles& t) {
  return "qt=" + std::to_string(t.qt) + ",ct=" + std::to_string(t.ct);
}

std::vector<std::string> gemm_candidates(const GemmShape& s) {
  const int64_t ext = s.row;
  std::vector<std::string> keys{gemm_key(choose_gemm_tiles(s, ""))};
  std::vector<int> cts;
  for (bool in_group : {true, false})
    for (int ct = 4; ct >= 1; --ct)
      if (s.blocks % ct == 0 && (s.group_blocks % ct == 0) == in_group) cts.push_back(ct);
  for (int ct : cts) {
    const int64_t qmax = std::min<int64_t>(kAccumulators / ct, ext);
    for (int64_t qt : {qmax, std::min<int64_t>(12 / ct, ext), std::min<int64_t>(8 / ct, ext),
                       ceil_div(ext, ceil_div(ext, qmax))})
      keys.push_back(gemm_key({(int)std::max<int64_t>(1, qt), ct}));
  }
  return TileSpace::candidates(keys, s.cap);
}

std::string describe_gemm_tile(const GemmTiles& t, const char* pos) {
  return "[" + gemm_key(t) + "] register tile 16c0 x " + std::to_string(t.ct) + "c1 x " +
         std::to_string(t.qt) + pos + ", ";
}

}  // namespace tbex::sched
