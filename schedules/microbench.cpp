// The calibration suite's kernels (schedules/calibrate.h). Inline assembly, so the compiler
// neither folds nor reorders what is measured; each width's kernels are compiled for that ISA
// (target attribute) and run only when the CPU has it.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cpuid.h>
#include <sys/resource.h>
#include <unistd.h>
#include <immintrin.h>

#include "schedules/calibrate.h"
#include "tbex/amx.h"
#include "tbex/thread_pool.h"

namespace tbex::sched {
namespace {

constexpr int kRounds = 3;              // runs of the suite measure_host takes the fastest of
constexpr double kRoundsSeconds = 1.2;  // no round starts that would end past this
constexpr double kSharedRoundsSeconds = 1.8;  // nor past this while the threads share cores

#define MB_R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define MB_ZERO(k) "vxorps %%xmm" #k ", %%xmm" #k ", %%xmm" #k "\n\t"
#define MB_YREGS                                                                          \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13", "xmm14"

// Every kernel runs `n` iterations of 12 operations (z_dot: 24); all registers start at zero (no
// denormals).
#define MB_KERNEL(name, isa, op)                                                        \
  __attribute__((target(isa))) void name(long n, const float* p) {                      \
    asm volatile(MB_R12(MB_ZERO) MB_ZERO(12) MB_ZERO(13) MB_ZERO(14)                     \
                 "1:\n\t" MB_R12(op) "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"               \
                 : "+r"(n)                                                              \
                 : "r"(p)                                                               \
                 : MB_YREGS, "cc", "memory");                                           \
  }

#define Y_FMA(k) "vfmadd231ps %%ymm13, %%ymm14, %%ymm" #k "\n\t"
#define Y_CHAIN(k) "vfmadd231ps %%ymm13, %%ymm14, %%ymm0\n\t"
#define Y_LOAD(k) "vmovups " #k "*32(%1), %%ymm" #k "\n\t"
#define Y_BCAST(k) \
  "vbroadcastss " #k "*4(%1), %%ymm12\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm" #k "\n\t"

MB_KERNEL(y_fma, "avx2,fma", Y_FMA)
MB_KERNEL(y_chain, "avx2,fma", Y_CHAIN)
MB_KERNEL(y_load, "avx2,fma", Y_LOAD)
MB_KERNEL(y_bcast, "avx2,fma", Y_BCAST)

#define Z_FMA(k) "vfmadd231ps %%zmm13, %%zmm14, %%zmm" #k "\n\t"
#define Z_CHAIN(k) "vfmadd231ps %%zmm13, %%zmm14, %%zmm0\n\t"
#define Z_LOAD(k) "vmovups " #k "*64(%1), %%zmm" #k "\n\t"
#define Z_BCAST(k) "vfmadd231ps " #k "*4(%1)%{1to16%}, %%zmm13, %%zmm" #k "\n\t"
#define Z_REG_BCAST(k) \
  "vbroadcastss " #k "*4(%1), %%zmm12\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm" #k "\n\t"

#define Z_DOT(k) "vdpbf16ps %%zmm13, %%zmm14, %%zmm" #k "\n\t"
#define Z_DOT_CHAIN(k) "vdpbf16ps %%zmm13, %%zmm14, %%zmm0\n\t"
// A 4-byte load: the load a folded {1to16} broadcast makes (its multiply aside).
#define Z_SMALL_LOAD(k) "vmovss " #k "*4(%1), %%xmm" #k "\n\t"

MB_KERNEL(z_fma, "avx512f", Z_FMA)
// 24 independent accumulators (zmm0-11, zmm16-27): Zen 5's VDPBF16PS chain takes 6.2 cycles,
// so 12 chains on its two pipes are latency-bound (12 / 6.2 = 1.94 a cycle at most; they read
// 1.86-1.91 where 24 read 2.03-2.07).
#define MB_HI12(X) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27)
#define MB_ZERO_Z(k) "vpxord %%zmm" #k ", %%zmm" #k ", %%zmm" #k "\n\t"
#define MB_KERNEL_Z24(name, isa, op)                                                          \
  __attribute__((target(isa))) void name(long n, const float* p) {                           \
    asm volatile(MB_R12(MB_ZERO) MB_ZERO(12) MB_ZERO(13) MB_ZERO(14) MB_HI12(MB_ZERO_Z)       \
                 "1:\n\t" MB_R12(op) MB_HI12(op) "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"       \
                 : "+r"(n)                                                                   \
                 : "r"(p)                                                                    \
                 : MB_YREGS, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",   \
                   "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "cc", "memory");             \
  }

MB_KERNEL_Z24(z_dot, "avx512f,avx512bf16", Z_DOT)
MB_KERNEL(z_dot_chain, "avx512f,avx512bf16", Z_DOT_CHAIN)
MB_KERNEL(z_chain, "avx512f", Z_CHAIN)
MB_KERNEL(z_load, "avx512f", Z_LOAD)
MB_KERNEL(z_bcast, "avx512f", Z_BCAST)
MB_KERNEL(z_reg_bcast, "avx512f", Z_REG_BCAST)
MB_KERNEL(z_small_load, "avx512f", Z_SMALL_LOAD)

/** 12 dependent integer adds per iteration: 12 cycles on every x86 core. Register operands:
 * Golden Cove (Sapphire Rapids) folds adds of an immediate at rename, several a cycle, which
 * read 23 GHz on a 3.8 GHz core. */
void add_chain(long n) {
  long x = 0, one = 1;
  asm volatile(
      "1:\n\t"
#define A_ADD(k) "add %2, %1\n\t"
      MB_R12(A_ADD)
#undef A_ADD
      "dec %0\n\tjnz 1b\n\t"
      : "+r"(n), "+r"(x)
      : "r"(one)
      : "cc");
}

/** Reads [p, p + bytes) `reps` times with 256-bit loads, 4 lines per iteration. */
__attribute__((target("avx2"))) void stream_read(const char* p, long bytes, int reps) {
  for (int r = 0; r < reps; ++r) {
    long n = bytes / 256;
    const char* q = p;
    asm volatile(
        "1:\n\t"
        "vmovups (%1), %%ymm0\n\tvmovups 32(%1), %%ymm1\n\tvmovups 64(%1), %%ymm2\n\t"
        "vmovups 96(%1), %%ymm3\n\tvmovups 128(%1), %%ymm4\n\tvmovups 160(%1), %%ymm5\n\t"
        "vmovups 192(%1), %%ymm6\n\tvmovups 224(%1), %%ymm7\n\t"
        "add $256, %1\n\tdec %0\n\tjnz 1b\n\tvzeroupper\n\t"
        : "+r"(n), "+r"(q)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "cc", "memory");
  }
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/** Seconds of the fastest of `tries` runs of f(). */
template <typename F>
double best_of(int tries, F f) {
  double best = 1e30;
  for (int i = 0; i < tries; ++i) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

/** Cycles of the fastest of `tries` runs of f(), counted by the dependent-add clock timed right
 * after each run (the fastest of those too: interruptions only add time), so a clock that
 * drifts over the suite (turbo, a guest's share of its host) cancels out. Read against one
 * clock taken at the start, a Zen 4 that does one 512-bit FMA a cycle read 1.02-1.07 of them,
 * and VDPBF16PS 1.02-1.05, from one run of the suite to the next; so, 0.99-1.02 in ten suites
 * of twelve. */
template <typename F>
double cycles_of(int tries, F f) {
  const long adds = 100000;
  double run = 1e30, clock = 1e30;
  for (int i = 0; i < tries; ++i) {
    const double t0 = now();
    f();
    const double t1 = now();
    add_chain(adds);
    run = std::min(run, t1 - t0);
    clock = std::min(clock, now() - t1);
  }
  return run / clock * 12.0 * adds;
}

/** Operations per cycle of a kernel of `ops` operations per iteration (12 but for z_dot). */
double rate(void (*k)(long, const float*), const float* p, int ops = 12) {
  // Runs of 2.4M operations (~0.4 ms), after ~4 ms of warm-up: shorter runs read 1.45 FMAs per
  // cycle on a Zen 3 that does 2.0 (its vector units reach full rate only after a while).
  const long n = 200000;
  for (int i = 0; i < 10; ++i) k(n, p);
  return double(ops) * n / cycles_of(5, [&] { k(n, p); });
}

WidthRates width_rates(void (*fma)(long, const float*), void (*chain)(long, const float*),
                       void (*load)(long, const float*), void (*bcast)(long, const float*),
                       void (*reg_bcast)(long, const float*), const float* p) {
  WidthRates w;
  w.fma_per_cycle = rate(fma, p);
  w.fma_latency = 1.0 / rate(chain, p);
  w.loads_per_cycle = rate(load, p);
  w.bcast_fma_per_cycle = rate(bcast, p);
  w.reg_bcast_fma_per_cycle = rate(reg_bcast, p);
  return w;
}

struct Slice {
  const char* base;
  long bytes;
  int reps;
};

/** Per-core read bytes per cycle with `threads` threads each streaming its own slice. */
double read_bw(const char* buf, long bytes, int threads) {
  const long target = 24l << 20;  // bytes each thread reads per timing
  const int reps = int(std::max(1l, target / bytes));
  std::vector<Slice> slices;
  for (int t = 0; t < threads; ++t) slices.push_back({buf + t * bytes, bytes, reps});
  auto task = [](void*, int idx, uint8_t* closure) {
    const Slice& s = reinterpret_cast<const Slice*>(closure)[idx];
    stream_read(s.base, s.bytes, s.reps);
    return 0;
  };
  auto run = [&] {
    if (threads == 1) return (void)stream_read(buf, bytes, reps);
    parallel_for(nullptr, task, 0, threads, reinterpret_cast<uint8_t*>(slices.data()));
  };
  run();
  return double(bytes) * reps / cycles_of(3, run);
}

/** FMAs per cycle each of `threads` threads of the pool retires while all run `k` at once, over
 * `alone` (one thread's rate): about 1 where each thread has a core of its own, 1 / threads
 * where they share one (Calibration::thread_share). */
double thread_share(void (*k)(long, const float*), const float* p, int threads, double alone) {
  if (threads <= 1 || alone <= 0) return 0;
  struct Job {
    void (*k)(long, const float*);
    const float* p;
    long n;
  } job{k, p, 200000};
  auto task = [](void*, int, uint8_t* closure) {
    const Job& j = *reinterpret_cast<const Job*>(closure);
    j.k(j.n, j.p);
    return 0;
  };
  auto run = [&] { parallel_for(nullptr, task, 0, threads, reinterpret_cast<uint8_t*>(&job)); };
  for (int i = 0; i < 10; ++i) run();  // every thread's vector units at full rate (rate())
  return 12.0 * double(job.n) / cycles_of(3, run) / alone;
}

/** Cycles one thread loses per short run read from DRAM beyond its bytes at `bw` bytes per
 * cycle: 4 KiB pages of [buf, buf + bytes), which nothing has read for a while, in a scattered
 * order (a stride coprime with the page count), three disjoint sets; the fastest set. */
double dram_run_start(const char* buf, long bytes, double bw) {
  const long page = 4096, pages = bytes / page, runs = std::min(2048l, pages / 3);
  if (runs < 64 || bw <= 0) return 0;
  double best = 1e30;
  for (long k = 0; k < 3; ++k)  // each set once: its pages are cold only the first time
    best = std::min(best, cycles_of(1, [&] {
                      for (long i = 0; i < runs; ++i)
                        stream_read(buf + ((3 * i + k) * 7919 % pages) * page, page, 1);
                    }));
  return std::max(0.0, best / runs - page / bw);
}

/** CPUID says AVX512_BF16 (leaf 7 subleaf 1: EAX bit 5). */
bool cpu_has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
}

/** CPUID says AMX-TILE and AMX-BF16 (leaf 7: EDX bits 24 and 22). */
bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d >> 24 & 1) && (d >> 22 & 1);
}

/** Cycles between dependent TDPBF16PS on one accumulator (tmm0 += tmm1 x tmm2, all 16 rows of
 * 64 bytes, operands zero: no denormals). The caller holds the tile permission. */
__attribute__((target("amx-tile,amx-bf16"))) double tile_chain_cycles() {
  alignas(64) unsigned char cfg[64] = {};
  cfg[0] = 1;  // palette 1: colsb (uint16) at byte 16 + 2t, rows at byte 48 + t
  for (int t = 0; t < 3; ++t) cfg[16 + 2 * t] = 64, cfg[48 + t] = 16;
  alignas(64) static const uint16_t zeros[16 * 32] = {};
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));  // GCC 12's _tile_loadconfig reads 8 bytes to its eyes
  _tile_zero(0);
  _tile_loadd(1, zeros, 64);
  _tile_loadd(2, zeros, 64);
  const long n = 2000;
  auto run = [&] {
    for (long i = 0; i < n; ++i) {
#define T_MUL(k) _tile_dpbf16ps(0, 1, 2);
      MB_R12(T_MUL)
#undef T_MUL
    }
  };
  run();
  const double cycles = cycles_of(5, run);
  _tile_release();
  return cycles / (12.0 * n);
}

/** CPU seconds this machine's CPUs have been busy (/proc/stat's first line: user, nice, system,
 * irq, softirq; 0 where it is unreadable) and this process's own (getrusage). */
struct CpuTimes {
  double machine = 0, own = 0;
};
CpuTimes cpu_times() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long v[7] = {};
  if (in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] && cpu == "cpu")
    t.machine = double(v[0] + v[1] + v[2] + v[5] + v[6]) / double(std::max(1l, sysconf(_SC_CLK_TCK)));
  rusage r{};
  if (getrusage(RUSAGE_SELF, &r) == 0)
    t.own = double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
            1e-6 * double(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  if (t.machine <= 0) t.own = 0;  // nothing to subtract from: no other load seen
  return t;
}

/** One run of the suite. */
Calibration measure_once() {
  Calibration c;
  const long n = 2000000;
  add_chain(n / 10);
  c.ghz = 12.0 * n / (best_of(3, [&] { add_chain(n); }) * 1e9);

  // 4 KiB of L1-resident operands, line-aligned: a load crossing a cache line costs two.
  alignas(64) static const float small[1024] = {};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    c.w256 = width_rates(y_fma, y_chain, y_load, y_bcast, y_bcast, small);  // AVX2: no {1to8}
  if (__builtin_cpu_supports("avx512f")) {
    c.w512 = width_rates(z_fma, z_chain, z_load, z_bcast, z_reg_bcast, small);
    c.w512.small_loads_per_cycle = rate(z_small_load, small);
  }
  if (__builtin_cpu_supports("avx512f") && cpu_has_avx512_bf16()) {
    c.bf16_dot_per_cycle = rate(z_dot, small, 24);
    c.bf16_dot_latency = 1.0 / rate(z_dot_chain, small);
  }

  // The memory levels and the fork on a thread of their own, the pool sized to every core
  // meanwhile: the "all threads" readings are the host's whatever size the pool has now (a
  // process whose first ranking ran at TBEX_NUM_THREADS=1 stored 1-thread readings as them, and
  // its 2-thread rankings priced the L3, DRAM and the fork as one thread's), and the caller's
  // own parallel loops may run serially (an Ascend C core under SerialScope).
  std::thread([&c] {
    const int was = num_threads();
    set_num_threads(0);
    c.threads = num_threads();
    // Whether the threads run on cores of their own, before and after their readings.
    const bool z = c.w512.fma_per_cycle > 0;
    auto share = [&] {
      return c.w256.fma_per_cycle > 0 || z
                 ? thread_share(z ? z_fma : y_fma, small, c.threads,
                                z ? c.w512.fma_per_cycle : c.w256.fma_per_cycle)
                 : 0.0;
    };
    const double share_before = share();
    if (__builtin_cpu_supports("avx2")) {
      const CacheInfo c1 = host_cache(1), c2 = host_cache(2);
      const long l1 = c1.bytes > 0 ? long(c1.bytes) : 32l << 10;
      const long l2 = std::max(4 * l1, c2.bytes > 0 ? long(c2.bytes) : 1l << 20);
      const long l3 = long(host_cache(3).bytes);
      const long dram = std::min<long>(256l << 20, std::max<long>(64l << 20, 4 * l3));
      // One buffer, zeroed once (page faults out of the timings); levels read slices of it.
      const long total = dram + 256;
      char* raw = static_cast<char*>(std::malloc(total));
      char* buf =
          reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 255) & ~uintptr_t(255));
      std::memset(buf, 1, dram);
      const int tc[2] = {1, c.threads};
      for (int i = 0; i < 2; ++i) {
        double* bw = i == 0 ? c.bw1 : c.bw_mt;
        const int t = tc[i];
        bw[0] = read_bw(buf, (l1 / 2) & ~255l, t);
        bw[1] = read_bw(buf, (l2 / 2) & ~255l, t);
        // L3: 2-4x past the private L2, within half this thread's share of the L3 (else the
        // L3 is no bigger than the L2s and streams at DRAM speed).
        const long l3_slice = std::min(l3 / t / 2, 4 * l2) & ~255l;
        bw[3] = read_bw(buf, (dram / t) & ~255l, t);
        bw[2] = l3_slice >= 2 * l2 ? read_bw(buf, l3_slice, t) : bw[3];
      }
      // Pages from the eighth to the half of the buffer: read by the DRAM stream above, since
      // then pushed out of the caches by its rest and the L3 slices (the buffer's head).
      c.dram_run_start_cycles = dram_run_start(buf + dram / 8, dram / 2 - dram / 8, c.bw1[3]);
      std::free(raw);
    }

    // Fork and join of an empty parallel-for as wide as the pool.
    auto empty = [](void*, int, uint8_t*) { return 0; };
    const int reps = 200;
    parallel_for(nullptr, empty, 0, c.threads, nullptr);
    c.parallel_for_cycles = cycles_of(3, [&] {
                              for (int i = 0; i < reps; ++i)
                                parallel_for(nullptr, empty, 0, c.threads, nullptr);
                            }) / reps;
    c.thread_share = std::min(share_before, share());
    set_num_threads(was);
  }).join();

  if (cpu_has_amx_bf16() && amx_tiles_permitted()) c.tile_multiply_cycles = tile_chain_cycles();
  return c;
}

}  // namespace

Calibration fastest_of(const Calibration& a, const Calibration& b) {
  Calibration c = a;
  const auto more = [](double& x, double y) { x = std::max(x, y); };
  // Costs: the least seen, of those measured (0: the CPU lacks the feature).
  const auto less = [](double& x, double y) { x = x > 0 && y > 0 ? std::min(x, y) : std::max(x, y); };
  more(c.ghz, b.ghz);
  for (auto [w, v] : {std::pair{&c.w256, &b.w256}, std::pair{&c.w512, &b.w512}}) {
    more(w->fma_per_cycle, v->fma_per_cycle);
    less(w->fma_latency, v->fma_latency);
    more(w->loads_per_cycle, v->loads_per_cycle);
    more(w->bcast_fma_per_cycle, v->bcast_fma_per_cycle);
    more(w->reg_bcast_fma_per_cycle, v->reg_bcast_fma_per_cycle);
    more(w->small_loads_per_cycle, v->small_loads_per_cycle);
  }
  for (int i = 0; i < 4; ++i) more(c.bw1[i], b.bw1[i]), more(c.bw_mt[i], b.bw_mt[i]);
  less(c.parallel_for_cycles, b.parallel_for_cycles);
  more(c.thread_share, b.thread_share);
  less(c.tile_multiply_cycles, b.tile_multiply_cycles);
  more(c.bf16_dot_per_cycle, b.bf16_dot_per_cycle);
  less(c.bf16_dot_latency, b.bf16_dot_latency);
  // 0 here is a reading (no wait beyond the bytes): the least.
  c.dram_run_start_cycles = std::min(a.dram_run_start_cycles, b.dram_run_start_cycles);
  return c;
}

Calibration measure_host() {
  // Rounds of the suite spread over up to a second, the fastest reading of each: a guest shares
  // its cores with the host's other work, which takes whole stretches of time, not single
  // runs. Each run's best of 3-5 tries, one suite at a time, on Zen 5 (KVM), 15 suites: 512-bit
  // loads 1.70-2.00 a cycle, L2 48-63 bytes a cycle (2 threads 14-58), and once FMAs 1.42 a
  // cycle against 2.00 (every rate and its clock from one stretch of 0.3 s).
  const double t0 = now();
  const CpuTimes start = cpu_times();
  // Cores' worth of CPU this machine's other processes used since t0.
  auto others = [&] {
    const CpuTimes t = cpu_times();
    return std::max(0.0, (t.machine - start.machine) - (t.own - start.own)) /
           std::max(1e-3, now() - t0);
  };
  Calibration c = measure_once();
  const double once = now() - t0;
  for (int round = 1; round < kRounds && now() - t0 + once <= kRoundsSeconds; ++round)
    c = fastest_of(c, measure_once());
  c.other_cores = others();
  // No round's threads had cores of their own: more rounds while the budget lasts (the host's
  // placement changes over seconds; measured on Zen 5 (KVM): a whole suite's "all threads"
  // readings at half the next one's).
  while (!keeps_calibration(c) && now() - t0 + once <= kSharedRoundsSeconds) {
    c = fastest_of(c, measure_once());
    c.other_cores = others();
  }
  c.seconds = now() - t0;
  return c;
}

}  // namespace tbex::sched
