#pragma once
/** Halide loop-nest pieces the schedule families share: staged operands computed at root, the
 * GEMM register tile of an accumulator, dW's reduction split (per-thread partial sums and K
 * chunks) and the spread of fused output tiles over threads. */
#include <string>
#include <vector>

#include "Halide.h"
#include "ops/ops.h"
#include "schedules/tile_space.h"

namespace tbex::sched {

/** `f` computed at root, vectorized along `lanes` (the whole dim when width is 0, else split by
 * width) and its `outer` dims (innermost first) fused into one parallel loop: fused pairwise
 * left to right under `names` (one fewer than the dims; the last is the parallel loop). */
void stage_root(Halide::Func f, const Halide::Var& lanes, int width,
                const std::vector<Halide::Var>& outer, const std::vector<std::string>& names);

/** dX's fp32 weights wz (c0, c1g, n, kw, kh, kd, g) staged at root for a register tile of `ct`
 * input blocks. With fewer blocks than a real group has, a tile reads its blocks' weights only:
 * they are stored block-major (one block's 64-byte rows back to back) instead of one line in every
 * cin1_g * 64 bytes, so the tiles along a row share one L2-resident stream and the rows do not
 * alias in L1's sets (a 1 KB stride). */
void stage_dx_weights(const ops::DxAlgorithm& a, const Problem& p, int ct);

/** A schedule computing only a few-input-channel dX's valid lanes makes the algorithm's
 * out_lanes the pipeline's output (so dxp, acc and wz are computed at those lanes only). */
void use_out_lanes(ops::DxAlgorithm& a, const Problem& p, const std::string& schedule);

/** Where a GEMM tile's taps along the row (GemmTiles::kwt) unroll in its reduction step. */
enum class RowTaps {
  kNone,       ///< one tap per step (kw walks outside the tile with the rest of r)
  kTapsOuter,  ///< each tap over the whole tile: one tap's weight rows and the window's
               ///< broadcasts live
  kTapsInner,  ///< every tap of a position before the next position: all taps' weight rows
               ///< live, a broadcast only while its taps' positions run (gemm_tile.h,
               ///< taps_inside_positions)
};

/** The GEMM register tile: `acc` computed at `at` of `owner`, its 16 c0 lanes vectorized and the
 * tile's positions `pos` and channel blocks `blk` unrolled; the update walks r (n, kw, kh, kd)
 * outside the tile. pairs: r is (e, n2, kw, kh, kd) with the pair e vectorized inside c0, an
 * atomic sum of 2 products per lane (a bf16 dot product). row_taps other than kNone: kw (r[1])
 * unrolled inside n, so a broadcast serves every tap of its window, in the order given.
 * unroll_pairs (pairs, kNone): r[1], the walk over channel pairs, unrolled too. */
void register_tile(Halide::Func acc, Halide::Func owner, const Halide::VarOrRVar& at,
                   const Halide::Var& c0, const Halide::Var& pos, const Halide::Var& blk,
                   const std::vector<Halide::RVar>& r, bool pairs = false,
                   RowTaps row_taps = RowTaps::kNone, bool unroll_pairs = false);
/** The RVars of `r`, innermost first (what register_tile takes). */
std::vector<Halide::RVar> rvars(const Halide::RDom& r);

/** A strided dX's scatter form (DxAlgorithm::use_scatter) in tiles of `qt` phase positions x
 * `ct` input blocks: each tile is stored straight to its 6HD places (every sw-th 64-byte line)
 * while the next ones compute (the whole output written in a pass of its own stalls on memory:
 * the seed dX spent half its time there); batch and depth phases run in parallel (nested when
 * the batch alone is too short for the threads). Returns the loop over a row's tiles, where
 * the tile's accumulator is computed. */
Halide::RVar scatter_tiles(ops::DxAlgorithm& a, int qt, int ct);

/** The loops Halide may partition: every other loop of the pipeline `out` computes is built
 * whole. Halide splits a loop whose body tests its variable against a bound (pads, tails) into
 * edge and steady copies, and nested loops multiply the copies of the unrolled tile body they
 * hold; unpartitioned, a loop computes those bounds at run time (mostly a tap loop's extent).
 * Kept: every loop of the Funcs in `whole` and the `loops` named (a stage, one of its loops).
 * Call last in a schedule's apply, once every loop exists. */
using PartitionedLoops = std::vector<std::pair<Halide::Stage, Halide::VarOrRVar>>;
void partition_only(const Halide::Func& out, const std::vector<Halide::Func>& whole,
                    PartitionedLoops loops);

/** The names of a chunk's loops the lowering can spread a prefetch over (Schedule::
 * spread_prefetches_over): spread_tiles' loop over a thread's tiles, and a tile's rows. */
inline constexpr const char* kChunkTiles = "tgi";
inline constexpr const char* kChunkRows = "rhoi";

/** dW's reduction over (wo, ho, do, b) as the tiled dW schedules stream it. With parts > 1
 * (dw_parts' count) the reduction is first split over batch (or depth) into partial sums
 * indexed by `part`, each a thread's whole work unit (an rfactor; `acc`
 * then adds them up). The tiles' Func is then chunked along ho by ch rows (a second rfactor):
 * intm holds one chunk's partial sums of one tile, in registers. */
struct DwReduction {
  Halide::Func body;     ///< the Func whose update the tiles run in: acc or the partial sums
  Halide::Func intm;     ///< one chunk's partial sums of one tile
  Halide::RVar chunk{"rhoo"};  ///< the chunk loop (ho / ch)
  Halide::RVar rows{kChunkRows};  ///< intm's loop over a chunk's rows
  Halide::RVar mid, outer;     ///< the reduction loops outside a chunk (depth, batch)
  Halide::Var part{"part"};    ///< the partial sums' index (parts > 1)
};
/** The partial sums dW's reduction split gives for `want` parts: over batch (or depth, when the
 * batch is smaller than `want` and than depth), ceil(extent / ceil(extent / want)) of them, the count
 * split_dw_reduction makes; 1 when neither extent reaches 2. A fixed number chosen from the
 * problem, never from the thread count: threads only take whole parts, so the summation order,
 * and the result, is the same for any thread count. */
int dw_parts(const Problem& p, int want, int64_t batch = 0);
/** dw_parts' split as ops::ReductionParts (what the blocked tile form's extern cuts): `parts`
 * of them, over batch or depth as split_dw_reduction cuts them. `batch`: the batch entries the
 * reduction walks (dw_batch_of: its pairs in the batch pair form), 0 for the problem's batch. */
ops::ReductionParts dw_reduction_parts(const Problem& p, int parts, int64_t batch = 0);
/** The parts the dW schedules ask dw_parts for when they split: whole units for 1, 2 or 4
 * threads; each costs one more pass over the (small) output to sum. */
constexpr int kDwSplitParts = 4;
/** The output depth slices one part of dW's reduction walks (split_dw_reduction's depth loop,
 * its split share where `parts` split depth). */
int64_t dw_depth_extent(const Problem& p, int parts, int64_t batch = 0);
/** dw_parts for a variant's parts=`requested`, which must be a count the split yields (else a
 * UserError naming `variant` through `space`, so variant keys stay canonical). */
int dw_parts_of_variant(const Problem& p, const TileSpace& space, const std::string& variant,
                        int requested, int64_t batch = 0);

/** dW's form for `variant` (key "pair"): 2, the pair form (bf16 dot products over row pairs),
 * where dw_pairs_apply and the target's dots pay (bf16_dots_pay), else 1; a variant's pair=2
 * elsewhere compiles Halide's portable lowering (a UserError through `space` where pairs do
 * not apply). Where staging dominates, the pair form stages every x row twice (as a pair's
 * first and second row), which the schedules' estimates charge; with the broadcast pair read
 * as an embedded broadcast (lower/dot_operands.h) it won there too on Zen 4 (seed dW 9.1 -> 7.9
 * ms, 1x1x1 4.4 -> 3.4 ms; 1 thread). */
int dw_pair_of(const Problem& p, const Halide::Target& target, const TileSpace& space,
               const std::string& variant);
/** Whether a dW schedule whose own form is `own_pair` also offers the others as candidates:
 * where pairs apply and the target computes them natively (own_pair != 1: it does). */
bool dw_other_pair_offered(const Problem& p, const Halide::Target& target, int own_pair);
/** dw_pair_of for a schedule that also has the batch pair form (kDwBatchPairs, where
 * dw_batch_pairs_apply): its own choice where row pairs would stage x rows twice (Kh > 1: not
 * ops::pairs_staged_by_output_row) and pairs are the own form. */
int dw_pair_or_batch_pair_of(const Problem& p, const Halide::Target& target, const TileSpace& space,
                             const std::string& variant);

DwReduction split_dw_reduction(Halide::Func acc, const Halide::RDom& r, const Problem& p,
                               int parts, int ch);

/** split_dw_reduction of a.acc over a.r, with the roots every tiled dW schedule gives it: the sum
 * of the partial sums (parts > 1) and the tiles' Func, c0 vectorized. */
DwReduction tiled_dw_reduction(const ops::DwAlgorithm& a, const Problem& p, int parts, int ch);

/** The pair form's dy (DwAlgorithm::dysp) staged per reduction chunk: 16 channels of each of a
 * pair's two rows loaded as vectors and stored interleaved (the rows unrolled inside the channel
 * vector; Halide merges the two strided stores into one). Vectorized along the pair instead,
 * each lane's row index was its own, and Halide gathered every element. */
void stage_dy_pairs(const ops::DwAlgorithm& a, const DwReduction& red);

/** The fused output tiles of a dW update: `dims` (innermost first, the real group last: what
 * tile_stagers counts on) fused into one loop `tile` and split into one group per thread
 * (outermost, tgo: each thread owns whole tiles, so there is no cross-thread reduction); with
 * parts > 1 all tiles run per part and parts are parallel.
 * The loops end up ordered `inner`, tgi, `after`, the reduction outside a chunk, tgo (then the
 * part, outermost, so a thread stages and streams only its part's x). Returns
 * tgi, the loop over a thread's tiles. */
Halide::Var spread_tiles(Halide::Stage s, const std::vector<Halide::VarOrRVar>& dims,
                         int64_t tiles, int threads, const DwReduction& red, int parts,
                         std::vector<Halide::VarOrRVar> inner,
                         const std::vector<Halide::VarOrRVar>& after);

/** How many copies of its staged operands spread_tiles' tiles make per call, in units of one
 * copy: with parts > 1 each part stages its own share (1); else each thread stages, chunk by
 * chunk, the blocks its own tiles read. The tiles are fused with the real group outermost, so
 * a thread's contiguous share of them covers only its own groups where there are at least as
 * many groups as threads (e1 dW, 4 groups over 2 threads: each thread stages half of x, and
 * [nt=4,kwt=3,ch=7] unsplit measured 2.12 ms against 2.19 split in 4 parts, which the model had
 * ranked first when it counted every thread staging all of x). */
double tile_stagers(int64_t tiles, int threads, int parts, int64_t real_g);

}  // namespace tbex::sched
