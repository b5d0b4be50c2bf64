/** The launcher: logical AI cores as threads, at most tbex::num_threads() computing at once. */
#include "tbex/ascendc/launch.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "tbex/errors.h"
#include "tbex/thread_pool.h"

namespace tbex::ascendc {
namespace {

/** Thrown in cores blocked in SyncAll when another core failed (caught by the launcher). */
struct LaunchAborted {};

class Launch {
 public:
  Launch(int64_t cores, int permits) : cores_(cores), free_(permits) {}

  void acquire() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++free_;
    }
    cv_.notify_all();
  }

  /** Barrier over all cores; a core waiting gives its compute turn away. */
  void barrier() {
    std::unique_lock<std::mutex> l(mu_);
    if (failed_) throw LaunchAborted{};
    ++free_;
    cv_.notify_all();
    const uint64_t gen = generation_;
    if (++arrived_ == cores_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return generation_ != gen || failed_; });
    }
    cv_.wait(l, [&] { return free_ > 0 || failed_; });
    if (failed_) throw LaunchAborted{};
    --free_;
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!error_) error_ = e;
      failed_ = true;
    }
    cv_.notify_all();
  }
  std::exception_ptr error() const { return error_; }

 private:
  const int64_t cores_;
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
  int64_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool failed_ = false;
  std::exception_ptr error_;
};

thread_local int64_t t_core = 0;
thread_local int64_t t_cores = 1;
thread_local Launch* t_launch = nullptr;
uint64_t g_tiling_key = 0;

void run_core(Launch& launch, int64_t idx, int64_t cores, const std::function<void()>& body,
              bool serial) {
  t_core = idx;
  t_cores = cores;
  t_launch = &launch;
  launch.acquire();
  try {
    std::optional<SerialScope> one_thread;
    if (serial) one_thread.emplace();
    body();
  } catch (const LaunchAborted&) {
  } catch (...) {
    launch.fail(std::current_exception());
  }
  launch.release();
  t_launch = nullptr;
  t_core = 0;
  t_cores = 1;
}

}  // namespace

void launch_cores(int64_t block_dim, const std::function<void()>& body) {
  check_range(block_dim, 1, 65535, "block_dim", "the number of logical cores");
  const int threads = num_threads();
  Launch launch(block_dim, threads);
  if (block_dim == 1) {
    // One core: its kernels use the whole pool.
    run_core(launch, 0, 1, body, false);
  } else {
    std::vector<std::thread> cores;
    cores.reserve((size_t)block_dim);
    try {
      for (int64_t i = 0; i < block_dim; ++i)
        cores.emplace_back(run_core, std::ref(launch), i, block_dim, std::cref(body), true);
    } catch (const std::system_error& e) {
      launch.fail(std::make_exception_ptr(
          UserError(code::kRange, "block_dim",
                    "cannot start " + std::to_string(block_dim) + " core threads: " + e.what())));
    }
    for (auto& t : cores) t.join();
  }
  if (launch.error()) std::rethrow_exception(launch.error());
}

int64_t core_idx() { return t_core; }
int64_t core_num() { return t_cores; }
void sync_all() {
  if (t_launch) t_launch->barrier();
}

void* gm_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr)
    throw UserError(code::kSize, "GmAlloc", "cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return p;
}
void gm_free(void* p) { std::free(p); }

void set_tiling_key(uint64_t key) { g_tiling_key = key; }
uint64_t tiling_key() { return g_tiling_key; }

}  // namespace tbex::ascendc
