#include "tbex/scratch.h"

#include <cstdlib>
#include <map>
#include <mutex>

namespace tbex {
namespace {

constexpr size_t kAlign = 128;  ///< also the header in front of each block
constexpr uint64_t kMagic = 0x7462657853637231ull;

struct Header {
  size_t capacity;  ///< usable bytes after the header
  uint64_t magic;
};

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  ///< capacity -> base pointer
  size_t cached = 0;
  ScratchStats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: kernels may free during static destruction
  return *c;
}

void release(void* base) { std::free(base); }

}  // namespace

void* scratch_alloc(size_t bytes) {
  const size_t cap = (bytes + kAlign - 1) / kAlign * kAlign;
  if (cap >= kScratchMinCached) {
    Cache& c = cache();
    std::lock_guard<std::mutex> l(c.mu);
    auto it = c.free_blocks.lower_bound(cap);
    if (it != c.free_blocks.end() && it->first <= 2 * cap) {
      void* base = it->second;
      c.cached -= it->first;
      c.free_blocks.erase(it);
      ++c.stats.reuses;
      return static_cast<char*>(base) + kAlign;
    }
  }
  void* base = nullptr;
  if (posix_memalign(&base, kAlign, cap + kAlign) != 0 || !base) return nullptr;
  auto* h = static_cast<Header*>(base);
  h->capacity = cap;
  h->magic = kMagic;
  if (cap >= kScratchMinCached) {
    Cache& c = cache();
    std::lock_guard<std::mutex> l(c.mu);
    ++c.stats.allocations;
  }
  return static_cast<char*>(base) + kAlign;
}

void scratch_free(void* p) {
  if (!p) return;
  void* base = static_cast<char*>(p) - kAlign;
  auto* h = static_cast<Header*>(base);
  if (h->magic != kMagic) std::abort();  // not ours: a heap corruption, never a silent leak
  const size_t cap = h->capacity;
  if (cap < kScratchMinCached) return release(base);
  Cache& c = cache();
  std::unique_lock<std::mutex> l(c.mu);
  // Keep it if it fits the budget, after dropping the smallest blocks if need be.
  if (cap > kScratchMaxCached) {
    l.unlock();
    return release(base);
  }
  while (c.cached + cap > kScratchMaxCached && !c.free_blocks.empty()) {
    auto it = c.free_blocks.begin();
    c.cached -= it->first;
    release(it->second);
    c.free_blocks.erase(it);
  }
  c.free_blocks.emplace(cap, base);
  c.cached += cap;
}

ScratchStats scratch_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  ScratchStats s = c.stats;
  s.cached_bytes = (int64_t)c.cached;
  return s;
}

void scratch_trim() {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  for (auto& [cap, base] : c.free_blocks) release(base);
  c.free_blocks.clear();
  c.cached = 0;
}

}  // namespace tbex
