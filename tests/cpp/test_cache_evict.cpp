// The disk cache's size cap: prune_cache evicts least recently used entries first, never one a
// process has loaded (a child process holding it here) or is building, a load marks an entry
// used, and publishing past TBEX_CACHE_MAX_MB evicts. Entries made by hand (a .so of chosen size
// and age + a sidecar) test the order exactly; real compiles test the marks and the cap.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "support/files.h"
#include "tbex/cache.h"
#include "test_util.h"

namespace tbex::test {
namespace {

namespace fs = std::filesystem;

bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

class CacheEviction : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tbex_evict_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("TBEX_CACHE_DIR", dir_.c_str(), 1);
    unsetenv("TBEX_CACHE");
    unsetenv("TBEX_ALWAYS_COMPILE");
    unsetenv("TBEX_CACHE_MAX_MB");
    clear_kernel_cache();
  }
  void TearDown() override {
    clear_kernel_cache();
    unsetenv("TBEX_CACHE_MAX_MB");
    unsetenv("TBEX_ALWAYS_COMPILE");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /** An entry made by hand: a .so of `bytes` bytes last used `age_s` seconds ago + a sidecar;
   * returns the .so's path. */
  std::string fake_entry(const std::string& name, size_t bytes, int age_s) {
    const std::string key = sha256_hex(name);
    const std::string sub = dir_ + "/" + key.substr(0, 2);
    fs::create_directories(sub);
    const std::string so = sub + "/" + key + ".so";
    std::ofstream(so, std::ios::binary) << std::string(bytes, 'x');
    std::ofstream(sub + "/" + key + ".json") << "{\"key\": \"" << key << "\"}\n";
    const timespec t{std::time(nullptr) - age_s, 0};
    const timespec times[2] = {t, t};
    EXPECT_EQ(::utimensat(AT_FDCWD, so.c_str(), times, 0), 0);
    return so;
  }

  static std::string sidecar(const std::string& so) { return so.substr(0, so.size() - 3) + ".json"; }
  static int64_t entry_bytes(const std::string& so) {
    return (int64_t)fs::file_size(so) + (int64_t)fs::file_size(sidecar(so));
  }

  std::string dir_;
};

TEST_F(CacheEviction, LeastRecentlyUsedGoFirst) {
  // Ages out of creation (and key) order: the order must come from the last use.
  const std::string a = fake_entry("a", 1000, 10), b = fake_entry("b", 1000, 40),
                    c = fake_entry("c", 1000, 20), d = fake_entry("d", 1000, 30);
  const int64_t one = entry_bytes(a);
  const CacheStats s0 = cache_stats();
  const PruneResult r = prune_cache(2 * one + one / 2);
  EXPECT_EQ(r.evicted, 2);
  EXPECT_EQ(r.evicted_bytes, 2 * one);
  EXPECT_EQ(r.kept, 2);
  EXPECT_EQ(r.kept_bytes, 2 * one);
  EXPECT_EQ(r.in_use, 0);
  EXPECT_EQ(cache_stats().evictions, s0.evictions + 2);
  EXPECT_FALSE(exists(b));  // 40 s
  EXPECT_FALSE(exists(sidecar(b)));
  EXPECT_FALSE(exists(d));  // 30 s
  EXPECT_TRUE(exists(c) && exists(sidecar(c)));
  EXPECT_TRUE(exists(a) && exists(sidecar(a)));
  // Under the cap already: nothing more goes.
  EXPECT_EQ(prune_cache(2 * one).evicted, 0);
  EXPECT_EQ(prune_cache(0).evicted, 2);
  EXPECT_FALSE(exists(a) || exists(c));
}

TEST_F(CacheEviction, EntryHeldByAnotherProcessSurvives) {
  const std::string held = fake_entry("held", 1000, 100);  // the oldest: first in line
  const std::string other = fake_entry("other", 1000, 50);
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the entry as a process that loaded it does
    const int fd = ::open(held.c_str(), O_RDONLY);
    const bool ok = fd >= 0 && ::flock(fd, LOCK_SH) == 0;
    char c = ok ? '1' : '0';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(release[0], &c, 1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  const PruneResult r = prune_cache(0);
  EXPECT_EQ(r.evicted, 1);
  EXPECT_EQ(r.in_use, 1);
  EXPECT_EQ(r.kept, 1);
  EXPECT_TRUE(exists(held) && exists(sidecar(held)));
  EXPECT_FALSE(exists(other));
  ASSERT_EQ(write(release[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // Released: now it goes.
  EXPECT_EQ(prune_cache(0).evicted, 1);
  EXPECT_FALSE(exists(held));
  for (int fd : {ready[0], ready[1], release[0], release[1]}) close(fd);
}

TEST_F(CacheEviction, EntryBeingBuiltSurvives) {
  const std::string so = fake_entry("building", 1000, 100);
  {
    support::FileLock building(so.substr(0, so.size() - 3) + ".lock");
    ASSERT_TRUE(building.held());
    const PruneResult r = prune_cache(0);
    EXPECT_EQ(r.evicted, 0);
    EXPECT_EQ(r.in_use, 1);
    EXPECT_TRUE(exists(so));
  }
  EXPECT_EQ(prune_cache(0).evicted, 1);
}

/** Two small dW problems (different shapes, so different entries). */
Problem small_problem(int64_t hw) {
  ParaDict para;
  para.strides = {1, 1, 1};
  para.pads = {0, 0, 0, 0, 0, 0};
  para.dilations = {1, 1, 1, 1, 1};
  para.res_dtype = "float32";
  return make_backprop_filter_problem({1, 1, 1, hw, hw, 16}, DType::kFloat32,
                                      {1, 1, 1, hw - 2, hw - 2, 16}, DType::kFloat32,
                                      {16, 1, 16, 3, 3}, para);
}

/** The .so files of the cache (entries sit one level down; runtime/ holds no .so). */
std::vector<std::string> shared_objects(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& f : fs::recursive_directory_iterator(root))
    if (f.path().extension() == ".so") out.push_back(f.path().string());
  return out;
}

TEST_F(CacheEviction, LoadMarksUsedAndLoadedEntriesStay) {
  const Problem a = small_problem(8), b = small_problem(9);
  compile(a);
  const auto a_so = shared_objects(dir_);
  ASSERT_EQ(a_so.size(), 1u);
  compile(b);
  clear_kernel_cache();
  const CacheStats s0 = cache_stats();
  auto kernel_a = compile(a);  // from disk: marks a used after b was built
  EXPECT_EQ(cache_stats().hits, s0.hits + 1);
  // Loaded by this process: nothing goes.
  const PruneResult held = prune_cache(0);
  EXPECT_EQ(held.evicted, 1);  // b: built here, but no longer loaded
  EXPECT_EQ(held.in_use, 1);
  ASSERT_EQ(shared_objects(dir_), a_so);
  kernel_a.reset();
  clear_kernel_cache();
  compile(b);  // rebuilt: the newest
  clear_kernel_cache();
  const int64_t total = prune_cache(INT64_MAX).kept_bytes;
  const PruneResult r = prune_cache(total - 1);  // one entry must go: the least recently used
  EXPECT_EQ(r.evicted, 1);
  EXPECT_EQ(r.in_use, 0);
  const auto left = shared_objects(dir_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_NE(left[0], a_so[0]);
}

TEST_F(CacheEviction, PublishingPastTheCapEvicts) {
  const std::string old1 = fake_entry("old1", 1100 * 1024, 200), old2 = fake_entry("old2", 1100 * 1024, 100);
  const Problem p = small_problem(8);
  setenv("TBEX_CACHE_MAX_MB", "0", 1);  // no cap
  const CacheStats s0 = cache_stats();
  compile(p);
  EXPECT_EQ(cache_stats().compiles, s0.compiles + 1);
  EXPECT_EQ(cache_stats().evictions, s0.evictions);
  EXPECT_TRUE(exists(old1) && exists(old2));
  EXPECT_EQ(cache_max_bytes(), 0);
  setenv("TBEX_CACHE_MAX_MB", "1", 1);
  EXPECT_EQ(cache_max_bytes(), 1 << 20);
  setenv("TBEX_ALWAYS_COMPILE", "1", 1);
  clear_kernel_cache();
  const auto kernel = compile(p);  // publishes again, then enforces the cap
  EXPECT_EQ(cache_stats().compiles, s0.compiles + 2);
  EXPECT_EQ(cache_stats().evictions, s0.evictions + 2);  // each fake alone exceeds 1 MiB
  EXPECT_FALSE(exists(old1) || exists(old2));
  EXPECT_EQ(shared_objects(dir_).size(), 1u);  // the new entry: in use, never its own victim
  setenv("TBEX_CACHE_MAX_MB", "-5", 1);
  EXPECT_THROW(cache_max_bytes(), UserError);
}

}  // namespace
}  // namespace tbex::test
