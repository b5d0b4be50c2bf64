/** dw_tiled: the dense dW GEMM. M = output channels (n), N = input channels x taps (c0, kw, ...),
 * K = N*Do*Ho*Wo. A register tile of NT output channels x KWT kw taps x 16 input lanes (c0, one
 * AVX-512 vector per kw) streams K in chunks of CH output rows (of DB output depth slices), so
 * the x and dy rows a chunk touches stay in L2 while every output tile is updated from them
 * (split_dw_reduction: intm holds one chunk's partial sums for one tile, in registers). A chunk
 * stages the padded x rows its slices' kd taps read once, so neighbouring slices share them
 * (fp32 x of dense rows is read in place instead: x_in_place_applies).
 * Output tiles are split across threads (outermost parallel loop), so there is no cross-thread
 * reduction. With few tiles, or where staging x dominates (every tile group stages every chunk),
 * the reduction is split instead into a fixed number of parts (dw_parts), each a thread's whole
 * unit staging only its share of x, summed at the end; the part count never depends on the
 * threads, so results do not either. bf16 inputs take dot products of pairs (key "pair"): of
 * output rows (2) or, where the batch is even, of batch entries (3: each x row staged once). */
#include <sstream>

#include "schedules/dw_tiled_tiles.h"
#include "schedules/loops.h"
#include "schedules/registry.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

using namespace Halide;
using namespace dw_tiled;

class DwTiled final : public DwSchedule {
 public:
  std::string name() const override { return "dw_tiled"; }
  std::string why_not(const Problem& p) const override { return dw_accumulator_why_not(p); }
  /** The next block's x over the block's tiles; the next chunk's over the chunk's tiles and
   * each tile's rows (spread_tiles' tile loop, DwReduction::rows): a few lines at the top of
   * each row keep the memory path busy under the FMAs. Zen 5, the seed's dW f32 (1 thread,
   * AOT, interleaved, medians): 5.5 ms with the chunk's prefetch in one burst, 4.95 over the
   * tiles, 4.35 over tiles and rows. Per block over tiles and rows measured level (c2, d, g dW
   * bf16), so blocks keep their tiles. */
  std::vector<std::vector<std::string>> spread_prefetches_over() const override {
    return {{kBlockTiles}, {kChunkTiles, kChunkRows}};
  }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const DwTiles t = choose_tiles(p, ctx);
    std::ostringstream s;
    s << "[" << key_of(p, ctx.target, t) << "] register tile 16c0 x " << t.nt << "n x " << t.kwt
      << "kw, "
      << (t.pair == kDwRowPairs     ? "bf16 pair dot products over row pairs, "
          : t.pair == kDwBatchPairs ? "bf16 pair dot products over batch pairs, "
                                    : "")
      << t.tiles
      << " tiles over " << ctx.threads << " threads, K chunks of " << t.ch
      << (t.pair == kDwRowPairs ? " row pairs" : " rows") << " x " << p.geo.out[2] << " cols, "
      << (t.stage_x ? "" : stage_x_rows(p) ? "x read in place, " : "x read in place (sparse rows), ")
      << (t.db > 1 ? "x staged once for " + std::to_string(t.db) + " depth slices, " : "")
      << (!t.prefetch_x              ? ""
          : x_per_block_applies(t) ? "next block of x prefetched over this block's tiles, "
                                   : "next chunk of x prefetched, ")
      << (x_per_block_applies(t) ? "x staged per input block, " : "")
      << (t.parts > 1 ? "reduction split in " + std::to_string(t.parts) + " parts, " : "")
      << (p.in_dtype == DType::kFloat32 ? "dy read in place"
          : t.pair == kDwRowPairs       ? "dy staged as bf16 row pairs"
          : t.pair == kDwBatchPairs     ? "dy staged as bf16 batch pairs"
                                        : "dy staged to fp32");
    return s.str();
  }
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    return candidates_of(p, ctx);
  }
  Estimate estimate(const Problem& p, const Context& ctx) const override {
    return estimate_of(p, ctx, choose_tiles(p, ctx));
  }

  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override {
    const DwTiles t = choose_tiles(p, ctx);
    if (t.pair == kDwRowPairs) a.use_pairs();
    if (t.pair == kDwBatchPairs) {
      internal_check(a.batch_pairs, "dw_tiled pair=3 on a problem without the batch pair form");
      a.use_batch_pairs();
    }
    const Var c0 = a.c0, n = a.n, kw = a.kw;
    DwReduction red = tiled_dw_reduction(a, p, t.parts, t.ch);
    Var no("no"), ni("ni"), kwo("kwo"), kwi("kwi");
    Stage s = red.body.update();
    s.split(n, no, ni, t.nt)
        .split(kw, kwo, kwi, t.kwt)
        .reorder(c0, ni, kwi, no, kwo, a.kh, a.c1g, a.kd, a.g, red.chunk, red.mid, red.outer);
    // db > 1: the depth loop split, its inner db slices inside the chunk loop (between the tiles
    // and the chunk), so the chunk's staging covers them all.
    std::vector<VarOrRVar> in_chunk;
    if (t.db > 1) {
      RVar mo("rdoo"), mi("rdoi");
      s.split(red.mid, mo, mi, t.db);
      in_chunk.push_back(mi);
      red.mid = mo;
    }
    // Per input block (x_per_block_applies): the tiles of one block (output channels and taps of
    // one c1g, kd, g) in one loop inside the blocks' loop, each part a thread's; else every tile
    // in one loop, spread over the threads (spread_tiles).
    const bool per_block = x_per_block_applies(t);
    Var tgi(kBlockTiles), blk("blk");
    if (per_block) {
      Var tn("tbn"), bn("blkn");
      s.fuse(no, kwo, tn).fuse(tn, a.kh, tgi).fuse(a.c1g, a.kd, bn).fuse(bn, a.g, blk);
      s.reorder(c0, ni, kwi, tgi, blk, red.chunk, red.mid, red.outer, red.part).parallel(red.part);
    } else {
      tgi = spread_tiles(s, {no, kwo, a.kh, a.c1g, a.kd, a.g}, t.tiles, ctx.threads, red, t.parts,
                         {c0, ni, kwi}, in_chunk);
    }
    s.vectorize(c0).unroll(ni).unroll(kwi);

    // Staging per reduction chunk: the padded fp32 rows of x (and dy, for 16-bit inputs) one
    // chunk needs are built in cache right before every tile of the thread consumes them, so
    // conversion and padding stay out of the hot loop without a pass over memory.
    if (t.pair != 1) {  // (e, c0): one 64-byte row of 16 bf16 pairs
      a.xs.compute_at(per_block ? LoopLevel(red.body, blk) : LoopLevel(red.body, red.chunk))
          .reorder(c0, a.e)
          .vectorize(c0)
          .unroll(a.e);
    } else if (t.stage_x) {
      a.xr.compute_at(red.body, red.chunk).vectorize(c0);
    }
    if (t.prefetch_x) {
      const VarOrRVar unit = per_block ? VarOrRVar(blk) : VarOrRVar(red.chunk);
      s.prefetch(a.x, unit, unit, 1, PrefetchBoundStrategy::NonFaulting);
    }
    if (t.pair != 1) stage_dy_pairs(a, red);
    else if (p.in_dtype != DType::kFloat32) a.dys.compute_at(red.body, red.chunk).vectorize(n, 16);
    red.intm.compute_at(red.body, tgi).vectorize(c0).unroll(n).unroll(kw);
    if (t.pair != 1) {
      red.intm.update()
          .reorder(a.r[4], c0, n, kw, a.r[0], red.rows)
          .atomic()
          .vectorize(a.r[4])
          .vectorize(c0)
          .unroll(n)
          .unroll(kw);
    } else {
      // Channels outside the kw taps: a channel's broadcast serves its kwt FMAs and dies, and
      // the kwt x vectors stay live instead (8n x 3kw: 24 accumulators + 3 + 1 of the 32 zmm;
      // with the taps outside, LLVM kept all 8 broadcasts live and spilled one per step).
      red.intm.update().reorder(c0, kw, n, a.r[0], red.rows).vectorize(c0).unroll(kw).unroll(n);
    }

    stage_root(a.out, c0, 0, {a.kd, a.g}, {"kdg"});
  }
};

}  // namespace

const DwSchedule* dw_tiled_schedule() { return the<DwTiled>(); }

}  // namespace tbex::sched
