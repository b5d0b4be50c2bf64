#pragma once
/** dw_tiled's tiles: the tile space (keys nt, kwt, ch, parts, pair, db, x; TBEX_DW_TILE), the
 * schedule's own choice and the variant rules, the candidates the model ranks and the tuner
 * times, and the cost model's view of a tile. dw_tiled.cpp builds the loop nest of a choice. */
#include <cstdint>
#include <string>
#include <vector>

#include "schedules/registry.h"

namespace tbex::sched::dw_tiled {

struct DwTiles {
  int nt = 8;   ///< output channels per register tile
  int kwt = 1;  ///< kw taps per register tile
  int ch = 1;   ///< output rows (ho) per reduction chunk
  int parts = 1;  ///< reduction split into this many partial sums (dw_parts; not the threads)
  bool stage_x = true;  ///< stage padded fp32 rows of x per chunk (stage_x_rows; else x_in_place_applies)
  bool prefetch_x = false;  ///< prefetch the next chunk's (per block: block's) x while this one computes
  int pair = 1;  ///< 2: bf16 dot products of row pairs (ch counts pairs); 3: of batch pairs
  int db = 1;  ///< output depth slices per reduction chunk: x staged once for all their kd taps
  int64_t tiles = 1;
};

/** The loop over one input block's tiles (x_per_block_applies), where the lowering spreads the
 * next block's prefetch (Schedule::spread_prefetches_over). */
inline constexpr const char* kBlockTiles = "tb";

/** Whether tiles `t` stage x per input block of the chunk, not the whole chunk at once (the
 * rule and its measurements: dw_tiled_tiles.cpp). */
bool x_per_block_applies(const DwTiles& t);

/** The tiles for `p`: the schedule's own choice, then TBEX_DW_TILE (only when no variant is
 * given), then the fields `ctx.variant` sets. */
DwTiles choose_tiles(const Problem& p, const Context& ctx);

/** The variant key of tiles `t` (the fields that apply to `p` on `target`). */
std::string key_of(const Problem& p, const Halide::Target& target, const DwTiles& t);

/** The keys the model ranks: the own choice ("") first. */
std::vector<std::string> candidates_of(const Problem& p, const Context& ctx);

/** The cost model's view of dw_tiled with tiles `t`. */
Estimate estimate_of(const Problem& p, const Context& ctx, const DwTiles& t);

}  // namespace tbex::sched::dw_tiled
