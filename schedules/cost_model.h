#pragma once
/** The analytic cost model: predicts a schedule's run time from the problem, the tile choice and
 * the machine, without compiling or running anything, so "auto" can rank every schedule x tile
 * variant of a problem in microseconds.
 *
 * Every tbex schedule is a register tile streamed over a reduction (a GEMM micro-kernel) plus
 * staging and output passes. The model prices:
 *  - the hot loop per reduction step: vector FMAs, loads/broadcasts, the FMA latency chain of
 *    each accumulator, and spills when the tile needs more vector registers than the file holds;
 *  - the tile prologue/epilogue (zeroing, storing, adding partial sums) per visit of a tile;
 *  - memory: where the data a tile visit streams lives (L1, L2, L3 or DRAM, from its footprint
 *    and the footprint of a reduction chunk) and what that level's bandwidth allows;
 *  - parallel balance: whole work units per thread (the slowest thread decides);
 *  - lane use: FMA lanes that compute padding (few valid channels, ragged tiles) still cost;
 *  - passes over memory: staging (conversion to fp32, zero padding) and output stages.
 * Times are cycles of one core; ms() converts at Machine::ghz. */
#include <cstdint>
#include <string>

#include "Halide.h"

namespace tbex::sched {

/** Whether `target` computes dot products of bf16 pairs natively (VDPBF16PS, AVX512_BF16: Halide's
 * avx512_zen4, avx512_zen5 and avx512_sapphirerapids targets), two products per fp32 lane and
 * instruction. */
bool has_bf16_dot(const Halide::Target& target);
/** `target` without the features that carry AVX512_BF16 (Zen 4, Zen 5, Sapphire Rapids): the
 * fp32 FMA form for bf16. Halide 21's Zen 5 host target has both Zen features; with only Zen 4's
 * removed, LLVM still turned the pair form's fp32 FMAs into VDPBF16PS. */
Halide::Target without_bf16_dot(const Halide::Target& target);
/** Whether `target`'s bf16 pair dot products beat fp32 FMAs on converted operands: native
 * (has_bf16_dot) and, by the host's calibration, more than half the FMA rate (two products per
 * lane each). Sapphire Rapids runs VDPBF16PS at a quarter of its FMA rate: the pair form is then
 * twice as slow (g dX bf16: 36 ms with FMAs, 74 with pairs), and the schedules keep to FMAs. */
bool bf16_dots_pay(const Halide::Target& target);

/** Whether kernels for `target` may multiply bf16 tiles on AMX (TDPBF16PS): Halide's
 * avx512_sapphirerapids target, whose CPUs have AMX-BF16, and, for code that runs on this host,
 * the OS's grant of the tile state to this process (tbex/amx.h). AOT code for another machine is
 * not asked here: its wrapper asks where it runs. */
bool has_amx_bf16(const Halide::Target& target);

/** Architectural vector registers of `target`: 32 with AVX-512, else 16. */
int vector_registers(const Halide::Target& target);
/** Machine vectors one 16-lane tile vector (c0) takes: 1 with AVX-512, 2 with AVX2. */
int vectors_per_c0(const Halide::Target& target);

/** The most 16-lane accumulators an fp32 FMA register tile of `target` holds without spilling, when
 * `operands` other 16-lane vectors (loaded rows) stay live in a reduction step. AVX-512 (32 zmm,
 * one per 16 lanes): 16 whatever the operands (with the taps unrolled outside the channels,
 * Halide's code keeps every broadcast live and 24 spilled; dw_tiled runs its channels outside the
 * taps and holds 24 for three kw taps). Narrower vectors take 16 / lanes registers per 16-lane
 * vector; with AVX2's 16 ymm, one register for the broadcast and the rest for the operands and
 * accumulators: 6 beside one operand (12 ymm: qt=6 x ct=1 ran the seed dX 2.6x and c2 dX 2.5x
 * faster than the 16 that fit AVX-512 and spilled here), 2 beside 2 operands' worth of ct=2 rows.
 * At least 1. */
int tile_accumulators(const Halide::Target& target, int operands);

/** What the model knows of the machine. Vector width and register count come from the target;
 * cache sizes from the host (sysconf). Throughputs, latency, clock and bandwidths are the host's
 * measured ones (schedules/calibrate.h) when the target runs on the host and TBEX_CALIBRATE is
 * on; else (AOT for another machine) the defaults below, Zen 4/5 and Ice Lake class values. */
struct Machine {
  int lanes = 16;            ///< fp32 lanes per vector
  int vregs = 32;            ///< architectural vector registers
  int usable_vregs = 30;     ///< what Halide's code keeps live without spilling: the file less
                             ///< address and loop registers (the stem dX tile, 18 accumulators +
                             ///< 12 weights + 1 dy vector, compiled without spills)
  double fma_pipes = 2;      ///< vector FMAs per cycle
  double load_pipes = 2;     ///< vector loads (or broadcasts) per cycle
  double issue = 4;          ///< vector ops per cycle, all kinds
  double fma_latency = 4;    ///< cycles
  double ghz = 3.85;         ///< cycles per ns: calibrated, the dependent-add clock; else
                             ///< peak FLOP/s / (2 x 16 lanes x 2 pipes) of the fitted CPU
  int64_t l1 = 48 << 10, l2 = 1 << 20, l3 = 16 << 20;  ///< bytes per core
  double l2_bw = 64, l3_bw = 24;  ///< bytes per cycle per core
  double dram_bw = 4;  ///< bytes per cycle one core streams (read + write), what a staging
                       ///< pass over memory achieves (calibrated: the measured read rate)
  double copy_bytes_per_cycle = 16;  ///< a streaming pass that reads and writes (staging);
                                     ///< issue and this stay constants when calibrated
  /** Per core when every thread of a parallel loop streams at once (shared L3 and DRAM). */
  double l3_bw_mt = 24, dram_bw_mt = 4;
  double fork_cycles = 0;  ///< fork + join of one parallel loop (0: not priced)
  /** Cycles from one AMX-BF16 tile multiply to the next on the same accumulator (the AMX
   * schedules keep one tile register per output): the chain, 19 on Sapphire Rapids as the
   * calibration suite measures it. */
  double tile_multiply_cycles = 19;
  /** bf16 pair dot products (VDPBF16PS, one per 16 lanes) per cycle; 0: at fma_pipes (the
   * uncalibrated assumption, right on Zen 4). */
  double dot_pipes = 0;
  /** Cycles of one dot product in a dependent chain; 0: fma_latency (uncalibrated). Zen 5:
   * 6 against the FMA's 4, which left d dW bf16's 8-accumulator tile latency-bound (0.66 ms
   * against 0.54 for the 16-accumulator one the model had ranked below it). */
  double dot_latency = 0;
  /** FMAs per cycle whose broadcast operand is folded in (AVX-512 `{1to16}`: each also takes a
   * load port); 0: at fma_pipes. 1.62 against 1.87 plain on Sapphire Rapids. */
  double folded_fma_pipes = 0;
  /** Cycles of the multiply pipes a broadcast into a register takes beside the FMAs or dots it
   * feeds (a broadcast several of them share; one feeding a single FMA or dot is folded into
   * it). 0 where a broadcast is a load (Intel); Zen 4 0.33 at 512 bits, Zen 1 0.06-0.13 at
   * 256 (calibrated). */
  double register_broadcast_cycles = 0;
  /** 4-byte loads per cycle, the folded broadcasts' loads: bf16 dot tiles count them against
   * this beside the vector loads' load_pipes (FMA tiles measured otherwise: cost_model.cpp);
   * 0: broadcasts count as vector loads (uncalibrated). Zen 4: ~1.9 beside its one 512-bit
   * load a cycle. */
  double small_load_pipes = 0;
  /** Cycles a short run read from DRAM (one block's rows of a chunk read in place) costs beyond
   * its bytes: the calibrated Calibration::dram_run_start_cycles (Zen 4: 800-1100); 0 (not
   * priced) uncalibrated. */
  double dram_run_start = 0;
  bool calibrated = false;  ///< the rates above were measured on this host

  /** Bytes a tile visit may touch and still find them in L1 on its next step and on the next
   * tile's visit: three quarters of L1 (the rest holds the stack, staging lines and what the
   * prefetchers bring). */
  int64_t l1_visit_bytes() const { return l1 * 3 / 4; }

  static Machine of(const Halide::Target& target);
};

/** The register tile of a hot loop: per reduction step. */
struct RegisterTile {
  double fmas = 1;        ///< vector FMAs
  double loads = 1;       ///< vector loads and broadcasts
  int accumulators = 1;   ///< vector accumulators
  int operands = 1;       ///< other vector registers live in a step (loaded rows, broadcasts)
  double extra_ops = 0;   ///< other vector ops per step (e.g. a conversion left in the loop)
  double broadcasts = 0;  ///< of `loads`, the scalar broadcasts: one machine load at any width
                          ///< (the other loads are 16-lane vectors: two ymm loads on AVX2)
  double unit_cycles = 0;  ///< cycles a step occupies a unit beside the vector ports (an AMX
                           ///< tile multiply)
  bool dots = false;       ///< the multiply-adds are bf16 pair dot products (Machine::dot_pipes)
};

/** A schedule's loop nest as the model sees it. */
struct LoopNest {
  RegisterTile tile;
  double steps_per_visit = 1;  ///< reduction steps a tile runs before leaving registers
  double visits = 1;           ///< (tile, reduction chunk) visits in total
  /** Visits of a shorter tile besides those: the last tile of a row that the loops peel off
   * with the row's remainder (fewer accumulators, so its steps may wait on the FMA latency);
   * same steps and operand bytes per visit as `tile`'s. */
  RegisterTile tail;
  double tail_visits = 0;
  double visit_bytes = 0;      ///< operand bytes a visit streams (distinct cache lines)
  int64_t visit_footprint = 0; ///< distinct bytes one visit touches
  int64_t chunk_footprint = 0; ///< distinct bytes all tiles of one reduction chunk touch
  int64_t units = 1;           ///< independent parallel work units (whole per thread)
  int threads = 1;
  double pass_bytes = 0;       ///< staging / output passes over memory, bytes read + written
  double pass_ops = 0;         ///< vector ops of those passes beyond the copy (conversions)
  double lane_use = 1;         ///< useful FMA lanes / executed FMA lanes
  int tile_lanes = 16;         ///< lanes of the tile's vectors (c0 = 16); narrower machines split them
  double visit_cycles = 0;     ///< cycles a visit costs beyond its steps (AMX: the accumulators'
                               ///< drain, zeroing and stores waiting on the multiplies)
  double executed = 1;         ///< share of the steps the loops run: taps reading padding are
                               ///< left out (inside_tap_share)
  /** Bytes the loops read again from beyond the L2 between the hot loop's visits (a window
   * one pass leaves behind for the next), and the footprint of that window: priced beside the
   * passes, from L3 or DRAM. */
  double reread_bytes = 0;
  int64_t reread_footprint = 0;
  /** Bytes the loops read once each from beyond the L2 beside the hot loop, not overlapped
   * with it (panels converted chunk by chunk as the tiles reach them), from DRAM where
   * `streams_from_dram`, else from the L3. */
  double stream_bytes = 0;
  bool streams_from_dram = false;
  /** Short runs the loops read from DRAM where they lie (a chunk's rows of one block of panels
   * larger than the L3, read in place): each costs Machine::dram_run_start beside its bytes,
   * the wait before the prefetchers stream it; fewer, longer runs wait less. */
  double dram_runs = 0;
  /** Bytes stored once each, in bursts the hot loop does not overlap (rows of partial sums
   * copied out of L1 once their chunks are summed): each line costs a read for ownership and a
   * write-back at the bandwidth of the level those bytes fit, beside the passes. */
  double burst_write_bytes = 0;
};

/** Useful / executed FMA lanes: `flops` (2 per multiply-add) over the nest's vector FMAs. */
double lane_use_of(double flops, const LoopNest& nest);

struct Estimate {
  bool modeled = false;   ///< false: the schedule is not modeled (comparison-only entries)
  double cycles = 0;      ///< predicted wall time (cycles of one core)
  double compute = 0;     ///< hot loop, per thread
  double memory = 0;      ///< traffic beyond L1 of the hot loop, per thread
  double passes = 0;      ///< staging and output passes, per thread
  double balance = 1;     ///< parallel efficiency of the hot loop
  double lane_use = 1;
  int registers = 0;      ///< vector registers the tile needs (accumulators + operands)
  const char* level = "L1";  ///< where the hot loop's streamed operands come from
  double ms(const Machine& m) const { return cycles / (m.ghz * 1e6); }
  /** "2.31 ms (compute 1.9e6 cyc, L2 4.0e5, passes 1.0e5; 16 regs, lanes 100%, balance 98%)" */
  std::string str(const Machine& m) const;
};

/** Evaluates a loop nest on a machine. */
Estimate evaluate(const LoopNest& nest, const Machine& m);

/** For entries the model does not price (Halide's autoschedulers, by name only). */
Estimate unmodeled();

/** A serial scalar loop executing `flops` / 2 multiply-adds (the reference schedules: every
 * output entry, padding lanes included, sums its whole reduction), plus its stages written to
 * memory. */
Estimate scalar_estimate(double flops, double pass_bytes, const Machine& m);

/** Parallel efficiency of `units` whole work units over `threads`. */
double balance_of(int64_t units, int threads);

}  // namespace tbex::sched
