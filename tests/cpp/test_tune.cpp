// Measured tuning and the tuning database: tune() times candidates and stores the fastest; an
// "auto" compile then uses that entry; the tuned kernel computes what the untuned one does; a
// corrupt database is ignored (with a log line) and rewritten by the next tune; TBEX_TUNE=1
// tunes on the first "auto" compile; two variants never share a disk-cache entry, and the
// entries of several kernels load side by side in one process.
// No timed assertions: which candidate wins depends on the machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tbex/cache.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex {
namespace {

using test::count;
using test::encode;
using test::random_eighths;

const int kThreadsSet = (set_num_threads(2), 2);

/** A fresh path under the test temp dir, unique to this process and `name`. */
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tbex_tune_" + std::to_string(::getpid()) + "_" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/** A small dW problem (dw_tiled has several variants for it); `cout` varies it per test. */
Problem small_dw(int64_t cout) {
  ParaDict para;
  para.strides = std::vector<int64_t>{1, 1, 1};
  para.pads = std::vector<int64_t>{0, 0, 1, 1, 1, 1};
  para.dilations = std::vector<int64_t>{1, 1, 1, 1, 1};
  return make_backprop_filter_problem({2, 3, 2, 8, 8, 16}, DType::kFloat32,
                                      {2, 1, (cout + 15) / 16, 8, 8, 16}, DType::kFloat32,
                                      {cout, 3, 32, 3, 3}, para);
}

std::vector<float> run(const Kernel& k, const std::vector<std::vector<uint8_t>>& in) {
  std::vector<const void*> ptrs;
  for (const auto& b : in) ptrs.push_back(b.data());
  std::vector<float> out(count(k.problem().output_shape()));
  k.run_dense(ptrs, out.data());
  return out;
}

std::vector<std::vector<uint8_t>> inputs_of(const Problem& p) {
  std::vector<std::vector<uint8_t>> in;
  uint32_t seed = 3;
  for (const auto& s : p.input_shapes()) in.push_back(encode(random_eighths(count(s), seed++), DType::kFloat32));
  return in;
}

/** Sets an environment variable for the scope, restoring the old value after. */
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const std::string& v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    setenv(n, v.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

TEST(Tune, PicksACandidateStoresItAndAutoUsesIt) {
  const std::string db = temp_path("db.json");
  ScopedEnv env("TBEX_TUNING_DB", db);
  const Problem p = small_dw(48);
  const auto in = inputs_of(p);
  clear_kernel_cache();
  TuningEntry e;
  ASSERT_FALSE(find_tuning(p, e));
  auto untuned = compile(p);
  const std::vector<float> want = run(*untuned, in);

  TuneOptions o;
  o.max_candidates = 4;
  o.seconds = 0.01;
  o.schedules = {"dw_direct", "dw_tiled", "reference"};
  const TuneResult r = tune(p, o);
  ASSERT_FALSE(r.schedule.empty());
  EXPECT_GT(r.ms, 0);
  int timed = 0;
  bool winner_listed = false;
  for (const auto& c : r.candidates) {
    EXPECT_TRUE(c.error.empty()) << c.schedule << " [" << c.variant << "]: " << c.error;
    timed += c.ms > 0;
    winner_listed |= c.schedule == r.schedule && c.variant == r.variant && c.ms > 0;
  }
  EXPECT_GE(timed, 6);  // dw_direct, dw_tiled's own choice + 3 variants, reference
  EXPECT_TRUE(winner_listed);

  ASSERT_TRUE(find_tuning(p, e));
  EXPECT_EQ(e.schedule, r.schedule);
  EXPECT_EQ(e.variant, r.variant);
  EXPECT_EQ(e.threads, 2);
  EXPECT_FALSE(e.target.empty());
  EXPECT_NE(read_file(db).find(p.canonical()), std::string::npos);

  clear_kernel_cache();
  auto tuned = compile(p);
  EXPECT_EQ(tuned->schedule_name(), r.schedule);
  EXPECT_EQ(tuned->variant(), r.variant);
  const std::vector<float> got = run(*tuned, in);
  test::expect_close(std::vector<double>(got.begin(), got.end()),
                     std::vector<double>(want.begin(), want.end()), 1e-6);
  // Other thread counts are other entries.
  set_num_threads(1);
  EXPECT_FALSE(find_tuning(p, e));
  set_num_threads(2);
  std::remove(db.c_str());
}

TEST(Tune, CorruptDatabaseIsIgnoredAndRewritten) {
  const std::string db = temp_path("corrupt.json");
  ScopedEnv env("TBEX_TUNING_DB", db);
  { std::ofstream(db) << "{\"format\": \"tbex-tuning-1\", \"entries\": [ {\"problem\": 3"; }
  const Problem p = small_dw(32);
  TuningEntry e;
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(find_tuning(p, e));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("corrupt"), std::string::npos) << log;
  clear_kernel_cache();
  EXPECT_EQ(compile(p)->variant(), rank_schedules(p).at(0).variant);  // the cost model's choice

  TuneOptions o;
  o.max_candidates = 2;
  o.seconds = 0.01;
  o.schedules = {"dw_tiled"};
  const TuneResult r = tune(p, o);
  ASSERT_TRUE(find_tuning(p, e));
  EXPECT_EQ(e.variant, r.variant);
  EXPECT_NE(read_file(db).find("\"format\": \"tbex-tuning-1\""), std::string::npos);
  std::remove(db.c_str());
}

TEST(Tune, TuneKnobTunesTheFirstAutoCompile) {
  const std::string db = temp_path("knob.json");
  ScopedEnv env("TBEX_TUNING_DB", db);
  // A forward problem: fwd_tiled and reference are its only own schedules.
  ConvGeometry g;
  g.n = 1, g.cin = 16, g.cout = 32, g.in = {2, 4, 6}, g.out = {2, 4, 6}, g.kernel = {1, 1, 1};
  const Problem p = make_forward_problem(g, DType::kFloat32, DType::kFloat32);
  TuningEntry e;
  ASSERT_FALSE(find_tuning(p, e));
  {
    ScopedEnv tune_env("TBEX_TUNE", "1");
    clear_kernel_cache();
    auto k = compile(p);
    ASSERT_TRUE(find_tuning(p, e));
    EXPECT_EQ(k->schedule_name(), e.schedule);
    EXPECT_EQ(k->variant(), e.variant);
  }
  std::remove(db.c_str());
}

TEST(Tune, VariantsNeverShareADiskCacheEntry) {
  const std::string dir = temp_path("cache");
  ScopedEnv d("TBEX_CACHE_DIR", dir);
  ScopedEnv on("TBEX_CACHE", "1");
  const Problem p = small_dw(64);
  const auto variants = schedule_candidates(p, "dw_tiled");
  ASSERT_GE(variants.size(), 3u);
  clear_kernel_cache();
  const CacheStats before = cache_stats();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(compile(p, CompileOptions{"dw_tiled", variants[i]})->variant(), variants[i]);
  EXPECT_EQ(cache_stats().hits, before.hits);  // each variant missed: no entry of another fits
  // One entry (sidecar <key>.json under <dir>/<key[:2]>/) per variant.
  // (The host calibration, machine.json, lies in <dir> itself when choosing tiles measured it.)
  int entries = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    entries += e.path().extension() == ".json" && e.path().parent_path() != std::filesystem::path(dir);
  EXPECT_EQ(entries, 3);
  // Each loads its own entry (three libraries loaded in one process), also after a reload.
  EXPECT_EQ(cache_stats().fallbacks, before.fallbacks);
  clear_kernel_cache();
  const CacheStats mid = cache_stats();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(compile(p, CompileOptions{"dw_tiled", variants[i]})->variant(), variants[i]);
  EXPECT_EQ(cache_stats().hits - mid.hits, 3);
  EXPECT_EQ(cache_stats().compiles, mid.compiles);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tbex
