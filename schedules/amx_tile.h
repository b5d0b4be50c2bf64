#pragma once
/** What the AMX-BF16 schedules (dx_amx, dw_amx) share: where they apply and the tile register.
 *
 * Halide 21 lowers an accumulator stored in MemoryType::AMXTile to tile instructions only in a
 * fixed shape: one 16 x 16 fp32 tile per allocation (so one accumulator per output tile: no
 * blocking), its update one vectorized multiply-add over (K, lanes, rows) with unpredicated
 * loads whose offsets sit inside one index of each operand, 32-bit index arithmetic, and reads
 * out of the tile only as plain row copies. docs/arithmetic.md gives the contract. */
#include <string>
#include <vector>

#include "Halide.h"
#include "ops/ops.h"
#include "schedules/cost_model.h"
#include "schedules/registry.h"

namespace tbex::sched {

/** "" when every buffer a tile kernel indexes (`bytes`, the largest) fits the 32-bit offsets it
 * compiles with (lower::Lowered::target drops LargeBuffers), else why not. */
std::string amx_offsets_why_not(double bytes);

/** "" when dX's AMX tiles apply to p's inputs (bf16, output channels in pairs: a tile row holds
 * channel pairs), else why not: what dx_amx and dx_amx_blocked ask first. */
std::string amx_dx_pairs_why_not(const Problem& p);

/** "" when dW's AMX tiles (dw_amx, dw_amx_blocked) apply to p, else why not: bf16 inputs, whole
 * tiles of output channels, rows of at least 6 positions per tile multiply, offsets that fit. */
std::string amx_dw_why_not(const Problem& p);

/** The blocked tile kernels' costs (tbex_amx_dx, tbex_amx_dw: 2 x 2 blocks) in dependent tile
 * multiplies (Machine::tile_multiply_cycles), as measured on Sapphire Rapids by calling
 * tbex_amx_dx on staged buffers (c2: 2048 visits of 54 steps 4.48 ms, b_c3d: 7168 of 108 steps
 * 30.0 ms; c1 and a 32^3 layer of 32 channels, 27 steps, ran 1.49 and 1.37 us a visit, 20%
 * above this line): a multiply with its operands streamed as the kernel streams them (from L1
 * and L2) 1.94, so no memory term is added; a visit's drain (its stores and the next visit's
 * zeroing or loads wait for the multiplies in flight) 54. */
constexpr double kBlockMultiplyCost = 1.94, kBlockDrainCost = 54;

/** Cycles an element of the dX kernels' dy staging costs (tile_kernel.h stage_row): a 32-byte
 * load and store per 16 channels. */
constexpr double kStageCopyCycles = 1.0 / 16;

/** Prices `n`'s steps and visits as a one-accumulator tile loop (Halide's: dx_amx, dw_amx) runs
 * them: both operand tiles loaded per multiply from L2, twice the loads of the blocked kernels'
 * multiply (kBlockMultiplyCost), and per visit the tile drained through a store to the stack
 * and added to the sums (a quarter of the blocked kernels' four-tile drain). Measured, one
 * thread: c2 dW bf16 15.0 ms against 9.8 for dw_amx_blocked on the same staged x (Emerald
 * Rapids with AMX); 11.7 ms on Sapphire Rapids, where the model, pricing a multiply at the
 * unit's rate and no drain, had said 4.4. A loop storing its tiles straight to the output
 * (`drains` false: dx_amx's strided scatter form) has no stack round trip to drain. */
void price_one_accumulator(LoopNest& n, const Machine& m, bool drains = true);

/** A schedule of AMX tile multiplies: it applies only where the target has AMX-BF16 and this
 * process may use it, and its kernels need the tile permission (AOT wrappers ask for it). */
template <class Algorithm>
class AmxTileSchedule : public Schedule<Algorithm> {
 public:
  std::string why_not_on(const Halide::Target& t) const override {
    return has_amx_bf16(t) ? ""
                           : "the target has no AMX-BF16 (avx512_sapphirerapids), or the OS did "
                             "not grant this process the AMX tile state";
  }
  bool uses_amx_tiles() const override { return true; }
};

/** The cost model's step of one AMX tile multiply: its two operand tiles loaded (`a_rows` rows
 * of the first, kk / 2 rows of 64 bytes of the second), no vector FMAs, one accumulator, which
 * is a tile register (no vector one), so a step takes the dependent multiply chain of `m`. */
RegisterTile amx_step(int a_rows, int kk, const Machine& m);

/** The lanes an AMX kernel's multiply-adds fill: useful ones / executed ones (visits x steps x
 * a 16-lane x `rows` tile x kk), at most 1. */
double amx_lane_use(const Problem& p, const LoopNest& n, int rows, int kk);

/** `acc` (lanes `j` innermost, rows `i`) as one tile register computed at `at` of `owner`,
 * always 16 rows (rows past what the owner needs are computed and dropped); its update one tile
 * multiply per `kk` of the reduction `k`, walking `outer` (the rest of the reduction, innermost
 * first) outside. Its consumers read it through a tile store to the stack, rows padded to 32
 * lanes (unpadded, Halide flattens the 16 x 16 store to one run, which is not a tile store). */
void amx_tile(Halide::Func acc, Halide::Func owner, const Halide::VarOrRVar& at, const Halide::Var& j,
              const Halide::Var& i, const Halide::RVar& k, int kk,
              const std::vector<Halide::VarOrRVar>& outer);

/** dX's tile weights (ops::DxAlgorithm::wzk or wzc: (e, lane, row), 64-byte rows of 16 lane
 * pairs, the layout a tile multiply reads) staged at root. */
void stage_tile_weights(Halide::Func w);

}  // namespace tbex::sched
