// The worker pool: every index of a parallel loop runs exactly once, on loops back to back (the
// workers still polling from the last one) and after a pause longer than their polling (asleep),
// across pool sizes; the first failing status is returned; nested loops run serially.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tbex/thread_pool.h"

namespace tbex {
namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> nested{0};
  explicit Counts(int n) : hits(n) {}
};

int count(void* ctx, int i, uint8_t*) {
  auto* c = static_cast<Counts*>(ctx);
  c->hits[i].fetch_add(1);
  if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));  // uneven tasks
  return 0;
}

void expect_each_once(const Counts& c, const char* what) {
  for (size_t i = 0; i < c.hits.size(); ++i) ASSERT_EQ(c.hits[i].load(), 1) << what << " index " << i;
}

class PoolSize : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { before_ = num_threads(); }
  void TearDown() override { set_num_threads(before_); }
  int before_ = 1;
};

TEST_P(PoolSize, EveryIndexOnceBackToBackAndAfterSleep) {
  set_num_threads(GetParam());
  ASSERT_EQ(num_threads(), GetParam());
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 37;
    Counts c(n);
    ASSERT_EQ(parallel_for(&c, count, 0, n, nullptr), 0);
    expect_each_once(c, "back to back");
    // Now and then a pause longer than the workers poll: they sleep and must be woken.
    if (round % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int fail_at_three(void*, int i, uint8_t*) { return i == 3 ? 42 : 0; }

TEST_P(PoolSize, ReturnsAFailingStatus) {
  set_num_threads(GetParam());
  EXPECT_EQ(parallel_for(nullptr, fail_at_three, 0, 8, nullptr), 42);
  EXPECT_EQ(parallel_for(nullptr, fail_at_three, 4, 8, nullptr), 0);
}

int outer(void* ctx, int i, uint8_t*) {
  auto* c = static_cast<Counts*>(ctx);
  Counts inner(5);
  if (parallel_for(&inner, count, 0, 5, nullptr) != 0) return 1;
  for (auto& h : inner.hits)
    if (h.load() != 1) return 2;
  c->hits[i].fetch_add(1);
  return 0;
}

TEST_P(PoolSize, NestedLoopsRunSerially) {
  set_num_threads(GetParam());
  Counts c(16);
  ASSERT_EQ(parallel_for(&c, outer, 0, 16, nullptr), 0);
  expect_each_once(c, "outer");
}

INSTANTIATE_TEST_SUITE_P(Threads, PoolSize, ::testing::Values(1, 2, 3, 8));

}  // namespace
}  // namespace tbex
