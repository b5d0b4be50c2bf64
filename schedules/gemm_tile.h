#pragma once
/** The register tile of an output-stationary GEMM micro-kernel, as dx_tiled and fwd_tiled use it:
 * QT positions along a row x CT 16-lane channel blocks, QT*CT vector accumulators; per reduction
 * step CT weight vectors are loaded and QT values broadcast. The tile space (keys qt, ct; the
 * schedule's TBEX_*_TILE knob), the own choice, the variant rules and the tuner's candidates are
 * declared here once. */
#include <string>
#include <vector>

#include "schedules/registry.h"
#include "schedules/tile_space.h"

namespace tbex::sched {

struct GemmTiles {
  int qt = 8;    ///< positions along the row per register tile
  int ct = 1;    ///< 16-channel blocks per register tile
  int pair = 1;  ///< reduction steps per instruction: 2 = dot products of bf16 pairs
  /** Taps along the row per reduction step: 1, or all of them (GemmShape::row_taps) unrolled
   * inside each step, so a value broadcast for one position feeds its FMA for every tap whose
   * window covers it (qt + taps - 1 broadcasts for qt * taps FMAs, where one tap at a time
   * loads one per FMA: the load ports, not the FMA pipes, bounded those tiles). What stays live
   * beside the accumulators: row_taps_operands. */
  int kwt = 1;
  /** Taps per reduction chunk (one of GemmShape::chunk_taps; all of them: no chunks). With
   * chunks, acc keeps the row's tiles in L1 and the tiles of a row run chunk by chunk, each
   * adding its partial sums there, so the weights of one chunk (every output channel at those
   * taps) stay in L1 for every tile of the row instead of streaming from L2 per tile. */
  int kt = 0;
  /** Output rows per group whose channel blocks run inside the group (0: no groups, every
   * block passes over all rows of a depth slice). Each block's pass reads the slice's dy rows;
   * where they overflow the L2 the next block reads them again from L3 or DRAM, and a group of
   * rows keeps them in L2 across the blocks instead, reading the blocks' weights once per group
   * (GemmShape::slice_dy_bytes). */
  int hb = 0;
};

/** What a schedule's GEMM tile is drawn from. */
struct GemmShape {
  const char* schedule;     ///< "dx_tiled"
  const char* knob;         ///< "TBEX_DX_TILE": the override of (qt, ct)
  int64_t row;              ///< positions along the tile's row (qt is at most this)
  const char* row_name;     ///< for messages: "the positions along w"
  int64_t blocks;           ///< channel blocks ct must divide
  const char* blocks_name;  ///< for messages: "C1"
  int64_t group_blocks;     ///< blocks per real group: candidates keeping a tile in one first
  bool cover_row;           ///< own qt: the narrowest tile covering the row in the fewest
                            ///< tiles (else the widest that fits the accumulators)
  size_t cap;               ///< most candidates listed
  bool pairs = false;          ///< the algorithm has a pair form (ops::bf16_pairs): key "pair"
  bool pairs_default = false;  ///< ... and the target's bf16 pairs beat FMAs (bf16_dots_pay)
  Halide::Target target;       ///< its register file bounds the tile (tile_accumulators)
  /** Taps along the row a tile can unroll with shared broadcasts (GemmTiles::kwt, key "kwt"):
   * the kernel width where the row's positions are unit-stride, else 1 (no key). */
  int row_taps = 1;
  int row_dilation = 1;  ///< the taps' spacing along the row
  /** Taps per reduction chunk a tile may take (GemmTiles::kt, key "kt"), ascending, the last
   * all of them (a kernel row, a depth slice, all); empty where the schedule has no chunked form.
   * k_bytes: the weight bytes one tap holds per channel block (every output channel's row). */
  std::vector<int> chunk_taps;
  int64_t k_bytes = 0;
  /** Output rows a depth slice has where its tiles may run in groups of rows (GemmTiles::hb,
   * key "hb"); 0: no row groups. slice_dy_bytes: the dy rows one depth slice's pass of a channel
   * block reads (one real group's channels). */
  int64_t slice_rows = 0;
  int64_t slice_dy_bytes = 0;
};

/** Whether a tile's row taps run every tap of a position before the next position
 * (RowTaps::kTapsInner) rather than each tap over the whole tile (kTapsOuter): where one vector
 * holds 16 lanes (AVX-512's 32 zmm). Each tap over the tile keeps the window's broadcasts live
 * beside the accumulators, since each serves every tap: c2 dX f32's [qt=16,ct=1,kwt=3] (18
 * broadcasts beside 16 accumulators) spilled and ran 1.8x slower than taps inside the positions
 * (Zen 5, 1 thread, interleaved: 52.7 against 28.9 ms; c1 [qt=12,ct=2,kwt=3] 100 against 65,
 * spill stores in its loop 71 against 5; tiles that fit either way ran level or up to 10%
 * faster, b_c3d [qt=8,ct=2,kwt=3,kt=3] 85-89 against 86-94 ms at 2 threads). With AVX2's two
 * ymm per 16 lanes every tap's weight rows would take 2 x ct x taps of the 16 ymm: there each
 * tap runs over the tile, loading its weights right before its FMAs. */
bool taps_inside_positions(const Halide::Target& target);

/** The vector registers (in 16-lane units) a tile of t.qt x t.ct with `taps` row taps per step,
 * `dilation` apart, keeps live beside its accumulators, for tiles whose ct blocks span `spanned`
 * real groups (each its own dy broadcasts), in the order taps_inside_positions gives. Taps
 * inside the positions: every tap's weight rows, and the broadcasts a position's taps still
 * reach ((taps - 1) x dilation + 1 per group): c1 dX [qt=12,ct=2,kwt=3] (24 accumulators + 6 +
 * 3 = 33) spills 4 times per step and ran 5% behind [qt=8,ct=2] (25). Each tap over the tile:
 * one tap's weight rows and the window's broadcasts; c2 dX on a Zen 3 (AVX2),
 * [qt=4,ct=1,kwt=3] holds 8 accumulators, 2 weight and 6 broadcast ymm without a spill (perf
 * annotate). The one count both the tile choice and the estimate use. */
int row_taps_operands(const GemmTiles& t, int taps, int dilation, int spanned,
                      const Halide::Target& target);

/** The real groups a tile of ct blocks spans where a group has `group_blocks` blocks. */
inline int spanned_groups(int64_t group_blocks, int ct) {
  return group_blocks >= ct ? 1 : (int)((ct + group_blocks - 1) / group_blocks);
}

/** Whether t splits the reduction into chunks of t.kt taps. */
bool chunked(const GemmShape& s, const GemmTiles& t);

/** Channel blocks of one real group that pass over a depth slice's dy rows one after another
 * (1 for tiles spanning real groups: each block reads its own group's dy). */
inline int64_t block_passes(const GemmShape& s, const GemmTiles& t) {
  return s.group_blocks > t.ct ? s.group_blocks / t.ct : 1;
}

/** Output rows per group of a tile that runs in row groups (GemmTiles::hb). */
constexpr int kGroupRows = 8;

/** Whether row groups are a choice for t: two or more of its real group's blocks take turns on
 * a depth slice of more rows than one group holds. */
inline bool row_groups_apply(const GemmShape& s, const GemmTiles& t) {
  return s.slice_rows > kGroupRows && block_passes(s, t) >= 2;
}

/** Whether a depth slice's dy rows overflow twice the L2, so that the next block's pass over the
 * slice reads them again from L3 or DRAM (within twice the L2, half of them are still there). */
inline bool slice_dy_overflows_l2(const GemmShape& s, const Machine& m) {
  return s.slice_dy_bytes > 2 * m.l2;
}

/** Whether `bytes` of a tile's weights (one chunk's, or all of them unchunked) stay in L1 across
 * the tiles of a row, each visit bringing in its share: unchunked, within the L1 (what own_kt
 * leaves unchunked); a chunk, within Machine::l1_visit_bytes (the row of partial sums shares the
 * L1 with it, what own_kt sizes chunks by). */
bool weights_stay_in_l1(const Machine& m, double bytes, bool chunks);

/** The schedule's own choice, then the knob's override (only without a variant), then the
 * fields `variant` sets (UserError when ct does not divide the blocks or qt exceeds the row). */
GemmTiles choose_gemm_tiles(const GemmShape& s, const std::string& variant);

/** "qt=..,ct=.." (and ",pair=.." where s has a pair form, ",kwt=.." where it has row taps,
 * ",kt=.." where it has reduction chunks, ",hb=.." where it has row groups: the slice's rows
 * for none) */
std::string gemm_key(const GemmTiles& t, const GemmShape& s);

/** "" (the own choice) first, then per CT (a divisor of the blocks up to 4; those keeping a tile
 * inside one real group first) the widest tile without spills on the target, 3/4 and 1/2 of it,
 * and the narrowest tile covering a row in as few tiles; each tile that fits the row taps both
 * with and without them (its own choice first). */
std::vector<std::string> gemm_candidates(const GemmShape& s);

/** "[<gemm_key>] register tile 16c0 x <ct>c1 x <qt><pos>, " (", bf16 pair dot products",
 * ", row taps unrolled", ", reduction in chunks of <kt> taps, row of partial sums in L1",
 * ", channel blocks inside groups of <hb> rows") */
std::string describe_gemm_tile(const GemmTiles& t, const GemmShape& s, const char* pos);

/** A schedule whose tiles come from a GEMM tile space: it always applies; its candidates and its
 * estimate follow from shape() and the cost of given tiles. */
template <class Algorithm>
class GemmTiledSchedule : public Schedule<Algorithm> {
 public:
  std::string why_not(const Problem&) const override { return ""; }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    return gemm_candidates(shape_for(p, ctx));
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    const GemmShape s = shape_for(p, ctx);
    return estimate_tiles(p, ctx, s, choose_gemm_tiles(s, ctx.variant));
  }
  /** The tiles for `p` and ctx.variant. */
  GemmTiles tiles(const Problem& p, const Context& ctx) const {
    return choose_gemm_tiles(shape_for(p, ctx), ctx.variant);
  }
  /** shape() with its pair form for ctx's target. */
  GemmShape shape_for(const Problem& p, const Context& ctx) const {
    GemmShape s = shape(p);
    s.pairs = pairs(p);
    s.pairs_default = s.pairs && bf16_dots_pay(ctx.target);
    s.target = ctx.target;
    return s;
  }

 protected:
  virtual GemmShape shape(const Problem& p) const = 0;
  /** Whether the schedule computes `p` with its algorithm's pair form (bf16 dot products). */
  virtual bool pairs(const Problem&) const { return false; }
  /** describe_gemm_tile of the tiles for `p` and ctx.variant. */
  std::string describe_tiles(const Problem& p, const Context& ctx, const char* pos) const {
    const GemmShape s = shape_for(p, ctx);
    return describe_gemm_tile(choose_gemm_tiles(s, ctx.variant), s, pos);
  }
  /** The cost model's view of the schedule with tiles `t` drawn from `s` (shape_for). */
  virtual Estimate estimate_tiles(const Problem& p, const Context& ctx, const GemmShape& s,
                                  const GemmTiles& t) const = 0;
};

}  // namespace tbex::sched
