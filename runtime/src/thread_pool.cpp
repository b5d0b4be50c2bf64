#include "tbex/thread_pool.h"

#include "tbex/errors.h"
#include "tbex/knobs.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace tbex {
namespace {

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

/** TBEX_NUM_THREADS, else all cores. The pool starts inside kernels' parallel loops (C frames of
 * AOT code an exception must not cross), so a bad value is reported on stderr, not thrown. */
int initial_threads() {
  try {
    const long long n = knobs::get_int("TBEX_NUM_THREADS");
    user_check(n >= 0 && n <= 4096, code::kRange, "TBEX_NUM_THREADS",
               "TBEX_NUM_THREADS=" + std::to_string(n) + " is not a thread count (0 = all cores)");
    if (n > 0) return (int)n;
  } catch (const UserError& e) {
    std::fprintf(stderr, "[tbex] %s; using all %d cores\n", e.what(), hardware_threads());
  }
  return hardware_threads();
}

/** A job: indices are claimed one at a time from `next`, so uneven tasks still balance. */
struct Job {
  void* ctx;
  int (*task)(void*, int, uint8_t*);
  uint8_t* closure;
  int end;
  std::atomic<int> next{0};
  std::atomic<int> status{0};
  std::atomic<int> active{0};
};

thread_local bool t_in_pool_task = false;

/** How long a worker, and the caller waiting for its workers, poll before sleeping on a
 * condition variable. A kernel runs its staging, main and output loops back to back, each a
 * parallel loop; woken from sleep for each, a worker joined tens of microseconds late (a 0.6 ms
 * bf16 dX at 2 threads spent ~5% in the kernel's wake-up paths and ran only 1.4x its 1-thread
 * time). OpenMP runtimes poll the same way (longer) before blocking. */
constexpr std::chrono::microseconds kSpin{200};

/** Polls `done` (a cheap check) until it is true or kSpin has passed; its last value. */
template <class Done>
bool spin_until(Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return done();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

class Pool {
 public:
  ~Pool() { resize(0); }

  void resize(int workers) {
    std::unique_lock<std::mutex> run_lock(run_mu_);
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_.store(true);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    stop_.store(false);
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker(); });
  }

  int workers() const { return (int)threads_.size(); }

  int run(void* ctx, int (*task)(void*, int, uint8_t*), int min, int extent, uint8_t* closure) {
    if (extent <= 0) return 0;
    if (t_in_pool_task || threads_.empty() || extent == 1) return serial(ctx, task, min, extent, closure);
    std::unique_lock<std::mutex> run_lock(run_mu_);  // one parallel loop at a time
    Job job;
    job.ctx = ctx;
    job.task = task;
    job.closure = closure;
    job.next = min;
    job.end = min + extent;
    {
      std::lock_guard<std::mutex> l(mu_);
      job_ = &job;
      generation_.fetch_add(1);
    }
    cv_.notify_all();
    work(job);
    {
      std::lock_guard<std::mutex> l(mu_);
      job_ = nullptr;  // no new worker joins after this point
    }
    if (!spin_until([&] { return job.active.load() == 0; })) {
      std::unique_lock<std::mutex> l(mu_);
      done_cv_.wait(l, [&] { return job.active.load() == 0; });
    }
    return job.status.load();
  }

 private:
  static int serial(void* ctx, int (*task)(void*, int, uint8_t*), int min, int extent,
                    uint8_t* closure) {
    for (int i = min; i < min + extent; ++i)
      if (int s = task(ctx, i, closure)) return s;
    return 0;
  }

  static void work(Job& job) {
    bool was = t_in_pool_task;
    t_in_pool_task = true;
    for (int i; (i = job.next.fetch_add(1)) < job.end;) {
      int s = job.task(job.ctx, i, job.closure);
      if (s) {
        int zero = 0;
        job.status.compare_exchange_strong(zero, s);
      }
    }
    t_in_pool_task = was;
  }

  void worker() {
    uint64_t seen = 0;
    for (;;) {
      Job* job;
      spin_until([&] { return stop_.load() || generation_.load() != seen; });
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_.load() || (job_ && generation_.load() != seen); });
        if (stop_.load()) return;
        seen = generation_.load();
        job = job_;
        job->active.fetch_add(1);
      }
      work(*job);
      {
        std::lock_guard<std::mutex> l(mu_);
        job->active.fetch_sub(1);
      }
      done_cv_.notify_all();
    }
  }

  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> threads_;
  Job* job_ = nullptr;  // guarded by mu_
  std::atomic<uint64_t> generation_{0};  // written under mu_; polled without it
  std::atomic<bool> stop_{false};
};

Pool& pool() {
  static Pool* p = [] {
    auto* q = new Pool();  // leaked on purpose: workers must outlive static destructors
    q->resize(initial_threads() - 1);
    return q;
  }();
  return *p;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) n = hardware_threads();
  if (n - 1 != pool().workers()) pool().resize(n - 1);
}

int num_threads() { return pool().workers() + 1; }

int max_threads() { return hardware_threads(); }

int parallel_for(void* ctx, int (*task)(void*, int, uint8_t*), int min, int extent,
                 uint8_t* closure) {
  return pool().run(ctx, task, min, extent, closure);
}

SerialScope::SerialScope() : was_(t_in_pool_task) { t_in_pool_task = true; }
SerialScope::~SerialScope() { t_in_pool_task = was_; }

}  // namespace tbex
