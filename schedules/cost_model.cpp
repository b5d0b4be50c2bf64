#include "schedules/cost_model.h"

#include "schedules/calibrate.h"
#include "tbex/amx.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace tbex::sched {
namespace {

/** The target's code runs on this machine: same architecture, OS and bits, and every vector ISA
 * feature it uses is the host's (an AVX2 target on an AVX-512 host runs here too). */
bool runs_on_host(const Halide::Target& t) {
  static const Halide::Target host = Halide::get_host_target();
  if (t.arch != host.arch || t.os != host.os || t.bits != host.bits) return false;
  using F = Halide::Target::Feature;
  for (F f : {F::SSE41, F::AVX, F::AVX2, F::FMA, F::F16C, F::AVX512, F::AVX512_Skylake,
              F::AVX512_Cannonlake, F::AVX512_SapphireRapids, F::AVX512_Zen4, F::AVX512_Zen5})
    if (t.has_feature(f) && !host.has_feature(f)) return false;
  return true;
}

/** The measured rates of the target's vector width in place of the defaults. A width the host
 * lacks (or a measurement that came out empty) keeps the default. */
void apply(const Calibration& c, Machine& m) {
  const WidthRates& w = m.lanes >= 16 ? c.w512 : c.w256;
  if (w.fma_per_cycle <= 0 || c.ghz <= 0) return;
  m.fma_pipes = w.fma_per_cycle;
  m.fma_latency = w.fma_latency;
  m.load_pipes = w.loads_per_cycle;
  m.ghz = c.ghz;
  if (c.bw1[1] > 0) {
    m.l2_bw = c.bw1[1], m.l3_bw = c.bw1[2], m.dram_bw = c.bw1[3];
    m.l3_bw_mt = c.bw_mt[2], m.dram_bw_mt = c.bw_mt[3];
  }
  m.fork_cycles = c.parallel_for_cycles;
  if (c.tile_multiply_cycles > 0) m.tile_multiply_cycles = c.tile_multiply_cycles;
  if (m.lanes >= 16 && c.bf16_dot_per_cycle > 0) m.dot_pipes = c.bf16_dot_per_cycle;
  if (m.lanes >= 16 && c.bf16_dot_latency > 0) m.dot_latency = c.bf16_dot_latency;
  m.dram_run_start = c.dram_run_start_cycles;
  if (m.lanes >= 16 && w.small_loads_per_cycle > 0) m.small_load_pipes = w.small_loads_per_cycle;
  if (m.lanes >= 16 && w.bcast_fma_per_cycle > 0) m.folded_fma_pipes = w.bcast_fma_per_cycle;
  // AVX2's VBROADCASTSS into a ymm takes the multiply pipes a little on Zen 1 (FMAs each fed by
  // one: 0.89-0.94 a cycle against 1.0): priced, tiles sharing their broadcasts over more FMAs
  // rank ahead of those that tie on the FMA bound (f dX: [qt=2,ct=2,kt=3] 46.3 ms over
  // [qt=4,ct=1,kt=9] 48.0).
  if (w.reg_bcast_fma_per_cycle > 0)
    m.register_broadcast_cycles =
        std::max(0.0, 1.0 / w.reg_bcast_fma_per_cycle - 1.0 / w.fma_per_cycle);
  m.calibrated = true;
}

}  // namespace

namespace {
/** Halide's target features that carry AVX512_BF16. */
const std::vector<Halide::Target::Feature> kBf16DotFeatures{
    Halide::Target::AVX512_Zen4, Halide::Target::AVX512_Zen5, Halide::Target::AVX512_SapphireRapids};
}  // namespace

bool has_bf16_dot(const Halide::Target& target) { return target.features_any_of(kBf16DotFeatures); }

Halide::Target without_bf16_dot(const Halide::Target& target) {
  Halide::Target t = target;
  for (Halide::Target::Feature f : kBf16DotFeatures) t = t.without_feature(f);
  return t;
}

bool has_amx_bf16(const Halide::Target& target) {
  if (!target.has_feature(Halide::Target::AVX512_SapphireRapids)) return false;
  return !runs_on_host(target) || amx_tiles_permitted();
}

bool bf16_dots_pay(const Halide::Target& target) {
  if (!has_bf16_dot(target)) return false;
  const Machine m = Machine::of(target);
  return m.dot_pipes <= 0 || 2 * m.dot_pipes > m.fma_pipes;
}

int vector_registers(const Halide::Target& target) {
  return target.has_feature(Halide::Target::AVX512) ? 32 : 16;
}

int vectors_per_c0(const Halide::Target& target) {
  return std::max(1, 16 / std::max(1, target.natural_vector_size<float>()));
}

int tile_accumulators(const Halide::Target& target, int operands) {
  if (target.has_feature(Halide::Target::AVX512)) return 16;
  return std::max(1, (vector_registers(target) - 1) / vectors_per_c0(target) - operands);
}

Machine Machine::of(const Halide::Target& target) {
  Machine m;
  m.lanes = std::max(1, target.natural_vector_size<float>());
  m.vregs = vector_registers(target);
  // AVX2's register tiles use the whole file: a broadcast ymm serves two FMAs and dies (the
  // 6 x 2-ymm dX tile + 2 weight rows + 1 broadcast compiled without spills).
  m.usable_vregs = target.has_feature(Halide::Target::AVX512) ? m.vregs - 2 : m.vregs;
  // Without AVX-512 the same two FMA pipes process half the lanes; cycles stay the unit.
  // The host's cache sizes per core, read once (every estimate asks); the L3 is shared.
  static const std::array<int64_t, 3> caches = [] {
    const Machine d;
    const CacheInfo c1 = host_cache(1), c2 = host_cache(2), c3 = host_cache(3);
    return std::array<int64_t, 3>{
        c1.bytes > 0 ? c1.bytes : d.l1, c2.bytes > 0 ? c2.bytes : d.l2,
        std::max<int64_t>(2 << 20, c3.bytes > 0 ? c3.bytes / c3.sharing : d.l3)};
  }();
  m.l1 = caches[0], m.l2 = caches[1], m.l3 = caches[2];
  if (runs_on_host(target)) {
    if (const Calibration* c = host_calibration()) apply(*c, m);
  }
  return m;
}

double balance_of(int64_t units, int threads) {
  if (threads <= 1 || units <= 0) return 1.0;
  const int64_t per_thread = (units + threads - 1) / threads;
  return double(units) / double(per_thread * threads);
}

Estimate evaluate(const LoopNest& n, const Machine& m) {
  Estimate e;
  e.modeled = true;
  // A 16-lane tile vector is 16 / lanes machine vectors (AVX2: two); a broadcast is one load
  // whatever the width (counting it twice made AVX2 prefer 2-block tiles that measured slower).
  const double w = std::max(1.0, double(n.tile_lanes) / m.lanes);
  // The cycles of one visit of `tile`, and the vector registers it needs.
  struct Visit {
    double cycles;
    int registers;
  };
  auto visit_of = [&](RegisterTile t) -> Visit {
    const double vector_loads = (t.loads - t.broadcasts) * w;
    t.fmas *= w, t.loads = vector_loads + t.broadcasts, t.extra_ops *= w;
    t.accumulators = int(t.accumulators * w), t.operands = int(t.operands * w);
    // One reduction step: the busiest port, or the dependency chain of an accumulator.
    const double mul_pipes = t.dots && m.dot_pipes > 0 ? m.dot_pipes : m.fma_pipes;
    const double mul_latency = t.dots && m.dot_latency > 0 ? m.dot_latency : m.fma_latency;
    // A broadcast feeding one FMA or dot only is folded into it as a memory operand (AVX-512;
    // dots: lower/dot_operands.h), FMAs at the folded rate; a broadcast several share is loaded
    // into a register once, on Zen 4 at a cost to the multiply pipes.
    const bool folded = m.folded_fma_pipes > 0 && t.broadcasts > 0 && t.fmas <= t.broadcasts;
    const double fma_cycles =
        t.fmas / (folded && !t.dots ? m.folded_fma_pipes : mul_pipes) +
        (folded ? 0 : t.broadcasts * m.register_broadcast_cycles);
    // Loads: bf16 dots' broadcasts' 4-byte loads at their own rate (small_load_pipes, where
    // calibrated), the vector loads at theirs. Zen 4: g dW bf16's 1 x-pair vector x 8 folded
    // broadcasts ran 5% ahead of the 3-tap tile the shared rate ranked first (27.0 -> 25.6 ms),
    // d dX bf16's 7 x 1 block level with 4 x 4. FMA tiles the same rule picked ran 3-7% slower
    // (a dW f32 16 x 1 over 8 x 3 taps, d dX f32 14 positions, the stem's dX): they keep the
    // shared rate.
    const double load_cycles =
        m.small_load_pipes > 0 && t.dots
            ? std::max(vector_loads / m.load_pipes, t.loads / std::max(m.small_load_pipes, m.load_pipes))
            : t.loads / m.load_pipes;
    double step = std::max({fma_cycles, load_cycles,
                            (t.fmas + t.loads + t.extra_ops) / m.issue,
                            mul_latency * t.fmas / std::max(1, t.accumulators), t.unit_cycles});
    const int registers = t.accumulators + t.operands;
    const int spilled = std::max(0, registers - m.usable_vregs);
    step += spilled;  // a store and a reload per spilled register and step, half a cycle each
    // Entering and leaving a tile: zero / load the accumulators, store them, loop setup.
    return {n.steps_per_visit * n.executed * step + 2.0 * t.accumulators / m.load_pipes + 12 +
                n.visit_cycles,
            registers};
  };
  const Visit full = visit_of(n.tile);
  e.registers = full.registers;
  const double compute_total =
      n.visits * full.cycles + (n.tail_visits > 0 ? n.tail_visits * visit_of(n.tail).cycles : 0);

  // The shared levels deliver less per core when every thread streams.
  const bool shared = n.threads > 1;
  double bw = 0;
  if (n.visit_footprint <= m.l1_visit_bytes()) {
    e.level = "L1";
  } else if (n.chunk_footprint <= m.l2 / 2) {
    // Half the L2: the rest holds the next chunk's staging, outputs and prefetched lines (g dW
    // on Sapphire Rapids: a 1.5 MB chunk of its 2 MB L2 ran 1.18x slower than a 0.8 MB one).
    e.level = "L2", bw = m.l2_bw;
  } else if (n.chunk_footprint <= m.l3) {
    e.level = "L3", bw = shared ? m.l3_bw_mt : m.l3_bw;
  } else {
    e.level = "DRAM", bw = shared ? m.dram_bw_mt : m.dram_bw;
  }
  const double memory_total = bw > 0 ? (n.visits + n.tail_visits) * n.visit_bytes / bw : 0;

  e.balance = balance_of(n.units, n.threads);
  const double per_thread = std::max(1, n.threads) * e.balance;
  e.compute = compute_total / per_thread;
  e.memory = memory_total / per_thread;
  // Passes over more than the L3 holds stream from DRAM.
  const double pass_bw =
      n.pass_bytes > m.l3 ? (shared ? m.dram_bw_mt : m.dram_bw) : m.copy_bytes_per_cycle;
  e.passes = (n.pass_bytes / pass_bw + n.pass_ops / m.issue) / std::max(1, n.threads);
  // Bytes from beyond the L2: streamed ones from the level the nest names, windows read again
  // and bursts of stores from the level their footprint fits (a burst's line: read for
  // ownership, then written back).
  auto l3_or_dram_bw = [&](bool dram) {
    return dram ? (shared ? m.dram_bw_mt : m.dram_bw) : (shared ? m.l3_bw_mt : m.l3_bw);
  };
  auto beyond_l2_bw = [&](int64_t footprint) { return l3_or_dram_bw(footprint > m.l3); };
  if (n.dram_runs > 0) e.passes += n.dram_runs * m.dram_run_start / std::max(1, n.threads);
  if (n.stream_bytes > 0)
    e.passes += n.stream_bytes / l3_or_dram_bw(n.streams_from_dram) / std::max(1, n.threads);
  if (n.reread_bytes > 0)
    e.passes += n.reread_bytes / beyond_l2_bw(n.reread_footprint) / std::max(1, n.threads);
  if (n.burst_write_bytes > 0)
    e.passes += 2 * n.burst_write_bytes / beyond_l2_bw(int64_t(n.burst_write_bytes)) /
                std::max(1, n.threads);
  e.lane_use = n.lane_use;
  // Streaming operands and computing overlap, but not perfectly once the stream is a good part
  // of the compute time: a smooth maximum (the cubic norm: equal parts cost 1.26x either; a
  // stream of a third of the compute, 1%). A plain max let tiles that load 3x the bytes tie
  // with lean ones on this model and measure 1.2-1.4x slower (Sapphire Rapids: the 1x1x1 dW's
  // 4 x 4 tile against 1 x 16, the grouped dX's 4 blocks x 4 positions against 1 x 14).
  const double overlapped = std::cbrt(std::pow(e.compute, 3) + std::pow(e.memory, 3));
  e.cycles = overlapped + e.passes + (n.threads > 1 ? m.fork_cycles : 0);
  return e;
}

double lane_use_of(double flops, const LoopNest& n) {
  const double executed =
      (n.visits * n.tile.fmas + n.tail_visits * n.tail.fmas) * n.steps_per_visit * n.tile_lanes;
  return executed > 0 ? std::min(1.0, flops / 2 / executed) : 1.0;
}

Estimate unmodeled() {
  Estimate e;
  e.cycles = std::numeric_limits<double>::infinity();
  return e;
}

Estimate scalar_estimate(double flops, double pass_bytes, const Machine& m) {
  Estimate e;
  e.modeled = true;
  e.compute = flops / 2 * 1.5;  // scalar multiply-adds, address arithmetic alongside
  e.passes = pass_bytes / m.copy_bytes_per_cycle;
  e.lane_use = 1.0 / m.lanes;
  e.registers = 0;
  e.cycles = e.compute + e.passes;
  return e;
}

std::string Estimate::str(const Machine& m) const {
  if (!modeled) return "not modeled";
  char buf[256];
  snprintf(buf, sizeof buf,
           "%.3g ms predicted (compute %.3g cyc, memory %.3g cyc from %s, passes %.3g cyc; %d "
           "vregs, lanes %.0f%%, balance %.0f%%)",
           ms(m), compute, memory, level, passes, registers, 100 * lane_use, 100 * balance);
  return buf;
}

}  // namespace tbex::sched
