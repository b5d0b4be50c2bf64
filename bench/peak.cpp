// peak: measured FP32 FMA throughput of this machine, in GFLOP/s, for given thread counts.
//
//   g++ -O2 -pthread peak.cpp -o peak
//   ./peak 1 2        -> one JSON line per thread count
//   ./peak -q 2       -> quick probe (~0.2 s): is the machine giving us 2 full cores right now?
//                        (reports the mean of its trials, not the best: on a shared host the
//                        second vCPU may sit on the first one's SMT sibling or be time-sliced)
//   ./peak -m 2       -> memory probe (~0.2 s): read bandwidth of 2 threads streaming their own
//                        64 MB buffers (past the caches), GB/s, best of its trials. The FMA
//                        probe cannot see a neighbour that shares only the memory path (or a
//                        core's caches and load ports): memory-bound kernels slow down while
//                        the FMA rate stays whole.
//
// Each thread runs chains of FMAs of the widest vector the CPU has (512-bit with AVX-512, else
// 256-bit AVX2 + FMA, chosen at run time) on NACC independent accumulators (enough to cover FMA
// latency x FMA ports on current cores: 4 cycles x 2 ports = 8 needed, we use 16 on AVX-512 and
// 12 on AVX2, whose 16 registers also hold the two operands). One FMA on L floats counts as 2L
// FLOPs. Result = best of several trials.

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

namespace {

constexpr int NACC512 = 16, NACC256 = 12;

// Runs `iters` rounds of independent FMAs; returns a value depending on all of them so the
// work cannot be removed.
__attribute__((noinline, target("avx512f,fma"))) float fma_chain512(long iters, float seed) {
    __m512 a = _mm512_set1_ps(0.999999f);
    __m512 b = _mm512_set1_ps(1e-6f * seed);
    __m512 acc[NACC512];
    for (int i = 0; i < NACC512; ++i) acc[i] = _mm512_set1_ps(seed + 0.001f * i);
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < NACC512; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < NACC512; ++i) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((noinline, target("avx2,fma"))) float fma_chain256(long iters, float seed) {
    __m256 a = _mm256_set1_ps(0.999999f);
    __m256 b = _mm256_set1_ps(1e-6f * seed);
    __m256 acc[NACC256];
    for (int i = 0; i < NACC256; ++i) acc[i] = _mm256_set1_ps(seed + 0.001f * i);
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int i = 0; i < NACC256; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    __m256 s = acc[0];
    for (int i = 1; i < NACC256; ++i) s = _mm256_add_ps(s, acc[i]);
    alignas(32) float v[8];
    _mm256_store_ps(v, s);
    float r = 0;
    for (float x : v) r += x;
    return r;
}

const bool kHas512 = __builtin_cpu_supports("avx512f");

/** FLOPs of one round of fma_chain (all accumulators, 2 per lane). */
double flops_per_round() { return kHas512 ? NACC512 * 32.0 : NACC256 * 16.0; }

float fma_chain(long iters, float seed) {
    return kHas512 ? fma_chain512(iters, seed) : fma_chain256(iters, seed);
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
}

void pin(int cpu) {
#ifdef __linux__
    unsigned n = std::thread::hardware_concurrency();
    if (n == 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % n, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#else
    (void)cpu;
#endif
}

// Runs body(t) on nthreads threads pinned to CPUs 0..n-1, released together (after each
// thread's prepare(t)); returns the wall time of the slowest.
template <class Prepare, class Body>
double run_together(int nthreads, Prepare prepare, Body body) {
    std::atomic<int> ready {0};
    std::atomic<bool> go {false};
    std::vector<double> t_end(nthreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < nthreads; ++t) {
        ts.emplace_back([&, t] {
            pin(t);
            prepare(t);
            ready++;
            while (!go.load()) {}
            body(t);
            t_end[t] = now_s();
        });
    }
    while (ready.load() < nthreads) {}
    const double t0 = now_s();
    go = true;
    for (auto &th : ts) th.join();
    double tmax = 0;
    for (double te : t_end) tmax = std::max(tmax, te - t0);
    return tmax;
}

// One trial: all threads start together, each does `iters` rounds; wall time of the slowest.
double trial(int nthreads, long iters, volatile float *sink) {
    return run_together(nthreads, [](int) {},
                        [&](int t) { sink[t] = fma_chain(iters, 1.0f + t); });
}

// Streams `floats` floats of `buf` with 256-bit loads into 4 independent sums (the loads, not
// the adds, bound the loop).
__attribute__((noinline, target("avx2"))) float stream_sum(const float *buf, size_t floats) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 32 <= floats; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(buf + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(buf + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(buf + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(buf + i + 24));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    alignas(32) float v[8];
    _mm256_store_ps(v, s);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

// Read GB/s of n threads, each streaming its own buffer `trials` times after a touch pass;
// the best trial (all threads start together; wall time of the slowest).
double memory_gbps(int nthreads, int trials, volatile float *sink) {
    constexpr size_t kFloats = (64u << 20) / sizeof(float);
    std::vector<float *> bufs(nthreads, nullptr);
    auto release = [&] {
        for (auto *b : bufs) std::free(b);
    };
    for (auto &b : bufs) {
        b = static_cast<float *>(std::aligned_alloc(64, kFloats * sizeof(float)));
        if (!b) {
            release();
            return 0.0;
        }
    }
    double best = 1e30;
    for (int k = 0; k <= trials; ++k) {  // trial 0 touches the pages (not timed)
        const double t = run_together(
            nthreads,
            [&](int i) {
                if (k == 0) std::fill(bufs[i], bufs[i] + kFloats, 1.0f);
            },
            [&](int i) { sink[i] = stream_sum(bufs[i], kFloats); });
        if (k > 0) best = std::min(best, t);
    }
    release();
    return (double)nthreads * kFloats * sizeof(float) / best / 1e9;
}

}  // namespace

int main(int argc, char **argv) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        std::fprintf(stderr, "peak: this CPU has neither AVX-512 nor AVX2 + FMA\n");
        return 2;
    }
    std::vector<int> counts;
    bool quick = false, memory = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "-q") quick = true;
        else if (std::string(argv[i]) == "-m") memory = true;
        else counts.push_back(std::atoi(argv[i]));
    }
    std::vector<float> sinkv(256);
    if (memory) {
        if (counts.empty()) counts.push_back(1);
        for (int n : counts) {
            if (n < 1 || n > 256) continue;
            std::printf("{\"threads\":%d,\"read_gbps\":%.2f}\n", n, memory_gbps(n, 3, sinkv.data()));
        }
        return 0;
    }
    const double trial_s = quick ? 0.04 : 0.15;
    const int trials = quick ? 4 : 5;
    if (counts.empty()) counts.push_back(1);
    for (int n : counts) {
        if (n < 1 || n > 256) continue;
        // Calibrate: aim for trial_s per trial.
        long iters = 1 << 18;
        double t = trial(n, iters, sinkv.data());
        while (t < trial_s / 3) {
            iters *= 2;
            t = trial(n, iters, sinkv.data());
        }
        iters = (long)(iters * (trial_s / t)) + 1;
        double best = 1e30, sum = 0;
        for (int k = 0; k < trials; ++k) {
            double tk = trial(n, iters, sinkv.data());
            best = std::min(best, tk);
            sum += tk;
        }
        if (quick) best = sum / trials;  // mean time for the probe
        double flops = (double)n * iters * flops_per_round();
        std::printf("{\"threads\":%d,\"gflops\":%.2f,\"gflops_per_thread\":%.2f,\"sec\":%.4f}\n",
                    n, flops / best / 1e9, flops / best / 1e9 / n, best);
    }
    return 0;
}
