#pragma once
/** The host's measured machine constants: a short microbenchmark suite (< 2 s) run once per
 * machine and stored next to the tuning database, keyed by CPU model + ISA, so the cost model
 * (Machine::of) prices schedules with this CPU's numbers instead of constants fit to another.
 *
 * Units: cycles of the clock a dependent chain of integer adds runs at (one add per cycle on
 * every x86 core), measured with the suite; seconds convert to cycles at that rate. */
#include <cstdint>
#include <string>

#include "support/json.h"

namespace tbex::sched {

/** One vector width's core throughputs (zero when the CPU lacks the width). */
struct WidthRates {
  double fma_per_cycle = 0;        ///< independent vector FMAs retired per cycle
  double fma_latency = 0;          ///< cycles of one FMA in a dependent chain
  double loads_per_cycle = 0;      ///< vector loads from L1 per cycle
  double bcast_fma_per_cycle = 0;  ///< FMAs with a broadcast memory operand per cycle
                                   ///< (512: embedded {1to16}; 256: vbroadcastss + FMA)
  /** FMAs per cycle each fed by its own VBROADCASTSS into a register: what a broadcast that
   * several FMAs share costs beside them (512 only; 256 is bcast_fma_per_cycle). Zen 4 runs a
   * 512-bit broadcast on its vector pipes: 0.75 against 1.01 embedded; Intel on a load port. */
  double reg_bcast_fma_per_cycle = 0;
  /** 4-byte loads per cycle (512 only): the loads folded {1to16} broadcasts make, which Zen 4
   * issues beside its one 512-bit load a cycle (a dot fed by a broadcast of its own: 1 vector +
   * 8 broadcasts per 8 dots ran at the dot rate). */
  double small_loads_per_cycle = 0;
};

struct Calibration {
  std::string cpu_model;  ///< /proc/cpuinfo "model name"
  /** "family 23 model 1 stepping 2": a VM's model name hides the core ("AMD EPYC" is Zen 1, 3
   * and 4 alike, and Zen 1 and 3 have the same ISA flags with one 256-bit FMA a cycle against
   * two), the CPUID signature tells them apart. */
  std::string cpu_signature;
  std::string isa;        ///< the vector ISA flags that matter to tbex, space-separated
  double ghz = 0;         ///< the dependent-add clock
  WidthRates w256, w512;
  int threads = 1;        ///< every core (max_threads()): the *_mt bandwidths and the fork ran at it
  /** Read bandwidth, bytes per cycle per core, from L1, L2, L3, DRAM: one thread alone, and
   * each of `threads` threads streaming at once. */
  double bw1[4] = {0, 0, 0, 0}, bw_mt[4] = {0, 0, 0, 0};
  double parallel_for_cycles = 0;  ///< an empty parallel-for over the pool, fork to join
  /** Cycles from one AMX-BF16 tile multiply (TDPBF16PS, 16 x 16 fp32 += 16 x 32 x 16 bf16) to
   * the next on the same accumulator tile, the rate of a schedule with one tile register per
   * output (all Halide 21 lowers); 0 where the CPU has no AMX-BF16 or the OS refused the tile
   * state. */
  double tile_multiply_cycles = 0;
  /** 512-bit VDPBF16PS (AVX512_BF16: 16 lanes x 2 bf16 products) retired per cycle, independent;
   * 0 where the CPU lacks it. Sapphire Rapids: 0.46 (a quarter of its FMA rate), which makes the
   * pair form slower there than fp32 FMAs on converted operands. */
  double bf16_dot_per_cycle = 0;
  /** Cycles of one VDPBF16PS in a dependent chain (0 where the CPU lacks it): Zen 5 reads 6
   * against its FMA's 4, so a dot tile needs more accumulators than an FMA tile to keep both
   * pipes busy. */
  double bf16_dot_latency = 0;
  /** Cycles one thread loses starting a short run read from DRAM (a 4 KiB page at a time, in
   * an order the prefetchers cannot guess) beyond its bytes at the streaming rate (bw1[3]):
   * the latency before the prefetchers take over. What a chunk of panels read in place costs
   * per block beside its bytes. */
  double dram_run_start_cycles = 0;
  /** FMAs per cycle each of `threads` threads retired while all ran at once, over one thread's
   * rate alone (0: not measured: one thread, or no FMA unit to probe with): about 1 when every thread had a core of its
   * own, 1 / threads when the host ran them on one core (a guest's vCPUs placed on the two SMT
   * threads of a core for a while, or a pool thread that did not get a CPU). The "all threads"
   * readings of such a suite are of a shared core: on Zen 5 (KVM) every one of them read half
   * the next suite's, L1 to DRAM. Probed before and after each suite's threaded readings, the
   * lower kept. */
  double thread_share = 0;
  /** Cores' worth of CPU time this machine's other processes used while the suite ran (from
   * /proc/stat, less this process's own): what else shared the cores. */
  double other_cores = 0;
  double seconds = 0;              ///< how long the suite took
};

/** Whether Linux runs SMT on this host (/sys/devices/system/cpu/smt/active): then threads
 * sharing a core is the machine's normal state, not the host's passing placement. */
bool host_smt_active();

/** Whether `c` is stored (and a stored one used): not where its threads shared cores
 * (thread_share below 0.8) while no other process of this machine ran (other_cores under 0.1),
 * the host's placement of its vCPUs, so the next process measures again instead of pricing every
 * later ranking's threads at half a core. Kept: one thread, no share measured, a host whose SMT
 * makes sharing its normal state, and a suite that ran beside this machine's own load (then the
 * sharing is that load's; measuring again would only meet it again: ctest -j2). */
bool keeps_calibration(const Calibration& c);

/** The host's data (or unified) cache of `level` (1-3): its bytes, and how many logical CPUs
 * share it. Read from Linux's /sys/devices/system/cpu/cpu0/cache (what lscpu shows); else
 * sysconf's size, taken as shared by every CPU for level 3 (glibc's sysconf reads 256 MB of L3
 * on a KVM guest whose /sys and lscpu say 32 MB). {0, 1} when neither knows. */
struct CacheInfo {
  int64_t bytes = 0;
  int sharing = 1;
};
CacheInfo host_cache(int level);

/** "model name | CPUID signature | ISA flags": a stored calibration with another key is
 * re-measured. */
std::string host_key();
/** The key of a calibration's own fields (host_key() for one measured here). */
std::string key_of(const Calibration& c);

/** Runs the suite now, in rounds (up to 3, within about 1.2 s; more, within 1.8 s, while no
 * round's threads had cores of their own while nothing else ran) whose fastest readings it keeps (fastest_of): no
 * storage, and no key (cpu_model, cpu_signature, isa are load_or_measure's). */
Calibration measure_host();

/** a with each reading replaced by b's where b's is the faster: the higher rate or bandwidth,
 * the lower latency or cost (of those measured: 0 where the CPU lacks the feature). */
Calibration fastest_of(const Calibration& a, const Calibration& b);

/** Where the host's calibration lives: beside TBEX_TUNING_DB when set, else
 * <cache dir>/machine.json. */
std::string calibration_path();

/** The calibration stored at `path` when it holds this host's key, else a fresh measurement
 * written there atomically (a missing, corrupt or foreign file is re-measured; TBEX_CACHE=0
 * measures without writing; one keeps_calibration refuses is this process's only). `measured` tells which happened. */
Calibration load_or_measure(const std::string& path, bool* measured = nullptr);

/** The process's calibration of the host (load_or_measure once per path), or nullptr when
 * TBEX_CALIBRATE=0. `remeasure`: the stored file is removed and the suite runs now (`python -m
 * tbex machine --remeasure`); `measured` tells whether this call ran it. */
const Calibration* host_calibration(bool remeasure = false, bool* measured = nullptr);

json::Value to_json(const Calibration& c);
/** UserError(param = path) when the document is not a calibration. */
Calibration calibration_from_json(const json::Value& v, const std::string& path);

}  // namespace tbex::sched
