// The on-disk kernel cache through the C++ API: a kernel dropped from the in-process cache comes
// back from disk without compiling, corrupt entries are rebuilt, TBEX_CACHE=0 writes nothing,
// TBEX_ALWAYS_COMPILE=1 recompiles, no C++ compiler falls back to the in-memory JIT, the keys,
// and the size cap (least recently used first, never an entry in use). Outcomes are read from
// tbex::cache_stats() and the files, never timings.
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "codegen/disk_cache.h"
#include "codegen/objects.h"
#include "tbex/cache.h"
#include "test_util.h"

namespace tbex::test {
namespace {

/** Files of the cache directory ending in `suffix` (entries sit one level down). */
std::vector<std::string> cache_files(const std::string& suffix) {
  std::vector<std::string> out;
  const std::string root = cache_dir();
  DIR* d = opendir(root.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string sub = root + "/" + e->d_name;
    if (e->d_name[0] == '.') continue;
    DIR* s = opendir(sub.c_str());
    if (!s) continue;
    while (dirent* f = readdir(s)) {
      std::string n = f->d_name;
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(sub + "/" + n);
    }
    closedir(s);
  }
  closedir(d);
  return out;
}

/** Replaces `path` by its first `keep` bytes. Written as a new file renamed over the old one:
 * this process still has the old file mapped (truncating a loaded .so in place is fatal to
 * whoever has it loaded; tests/python/test_cache.py truncates in place from other processes). */
void replace_truncated(const std::string& path, size_t keep) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string tmp = path + ".damaged";
  std::ofstream(tmp, std::ios::binary) << bytes.substr(0, keep);
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
}

class DiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tbex_cache_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("TBEX_CACHE_DIR", dir_.c_str(), 1);
    unsetenv("TBEX_CACHE");
    unsetenv("TBEX_ALWAYS_COMPILE");
    clear_kernel_cache();
    ParaDict para;
    para.strides = {1, 1, 1};
    para.pads = {0, 0, 0, 0, 0, 0};
    para.dilations = {1, 1, 1, 1, 1};
    para.res_dtype = "float32";
    problem_ = make_backprop_filter_problem({1, 2, 1, 8, 8, 16}, DType::kFloat32, {1, 2, 1, 6, 6, 16},
                                            DType::kFloat32, {16, 1, 16, 3, 3}, para);
    x_ = encode(random_eighths(count(problem_.input_shapes()[0]), 1), DType::kFloat32);
    dy_ = encode(random_eighths(count(problem_.input_shapes()[1]), 2), DType::kFloat32);
  }
  void TearDown() override {
    clear_kernel_cache();
    for (const char* s : {".so", ".json", ".lock"})
      for (const auto& f : cache_files(s)) unlink(f.c_str());
    unsetenv("TBEX_CACHE");
    unsetenv("TBEX_ALWAYS_COMPILE");
  }

  /** compile() (after dropping the in-process cache) and run. */
  std::vector<float> compile_and_run() {
    clear_kernel_cache();
    auto k = compile(problem_);
    std::vector<float> out(count(problem_.output_shape()), -7.0f);
    k->run_dense({x_.data(), dy_.data()}, out.data());
    return out;
  }

  std::vector<float> in_memory_result() {
    setenv("TBEX_CACHE", "0", 1);
    auto r = compile_and_run();
    unsetenv("TBEX_CACHE");
    return r;
  }

  std::string dir_;
  Problem problem_;
  std::vector<uint8_t> x_, dy_;
};

TEST_F(DiskCache, SecondCompileLoadsFromDisk) {
  const CacheStats s0 = cache_stats();
  const auto first = compile_and_run();
  EXPECT_EQ(cache_stats().compiles, s0.compiles + 1);
  EXPECT_EQ(cache_files(".so").size(), 1u);
  EXPECT_EQ(cache_files(".json").size(), 1u);
  const auto second = compile_and_run();
  EXPECT_EQ(cache_stats().hits, s0.hits + 1);
  EXPECT_EQ(cache_stats().compiles, s0.compiles + 1);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, in_memory_result());
}

// A directory name with a comma and '=' (as a tile variant's key has) is one linker argument:
// the kernel is linked and loaded from disk, not compiled in memory again.
TEST_F(DiskCache, DirectoryWithACommaInItsName) {
  const std::string odd = dir_ + "/ct=4,nt=4";
  ASSERT_EQ(mkdir(odd.c_str(), 0755), 0);
  setenv("TBEX_CACHE_DIR", odd.c_str(), 1);
  const CacheStats s0 = cache_stats();
  const auto first = compile_and_run();
  const auto second = compile_and_run();
  EXPECT_EQ(cache_stats().fallbacks, s0.fallbacks);
  EXPECT_EQ(cache_stats().hits, s0.hits + 1);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, in_memory_result());
  clear_kernel_cache();
  for (const char* s : {".so", ".json", ".lock"})
    for (const auto& f : cache_files(s)) unlink(f.c_str());
  setenv("TBEX_CACHE_DIR", dir_.c_str(), 1);
}

TEST_F(DiskCache, TruncatedSharedObjectIsRebuilt) {
  const auto good = compile_and_run();
  const auto so = cache_files(".so");
  ASSERT_EQ(so.size(), 1u);
  replace_truncated(so[0], 1000);
  const CacheStats s0 = cache_stats();
  EXPECT_EQ(compile_and_run(), good);
  EXPECT_EQ(cache_stats().rebuilds, s0.rebuilds + 1);
  struct stat st{};
  ASSERT_EQ(stat(so[0].c_str(), &st), 0);
  EXPECT_GT(st.st_size, 1000);
}

TEST_F(DiskCache, CorruptSidecarIsRebuilt) {
  const auto good = compile_and_run();
  const auto side = cache_files(".json");
  ASSERT_EQ(side.size(), 1u);
  std::ofstream(side[0]) << "garbage";
  const CacheStats s0 = cache_stats();
  EXPECT_EQ(compile_and_run(), good);
  EXPECT_EQ(cache_stats().rebuilds, s0.rebuilds + 1);
  const CacheStats s1 = cache_stats();
  compile_and_run();
  EXPECT_EQ(cache_stats().hits, s1.hits + 1);  // the rebuilt entry is valid
}

TEST_F(DiskCache, DisabledWritesNothing) {
  setenv("TBEX_CACHE", "0", 1);
  EXPECT_FALSE(cache_enabled());
  const CacheStats s0 = cache_stats();
  compile_and_run();
  EXPECT_EQ(cache_stats().compiles, s0.compiles);
  EXPECT_EQ(cache_stats().hits, s0.hits);
  EXPECT_TRUE(cache_files(".so").empty());
  EXPECT_TRUE(cache_files(".lock").empty());
}

TEST_F(DiskCache, AlwaysCompileRecompiles) {
  const auto good = compile_and_run();
  setenv("TBEX_ALWAYS_COMPILE", "1", 1);
  const CacheStats s0 = cache_stats();
  EXPECT_EQ(compile_and_run(), good);
  EXPECT_EQ(cache_stats().compiles, s0.compiles + 1);
  EXPECT_EQ(cache_stats().hits, s0.hits);
  EXPECT_EQ(cache_files(".so").size(), 1u);
}

TEST_F(DiskCache, NoCompilerFallsBackToJit) {
  const auto good = in_memory_result();
  const std::string path = getenv("PATH") ? getenv("PATH") : "";
  const char* cxx = getenv("CXX");
  const std::string saved_cxx = cxx ? cxx : "";
  setenv("PATH", (dir_ + "/no-bin").c_str(), 1);
  unsetenv("CXX");
  const CacheStats s0 = cache_stats();
  const auto got = compile_and_run();
  setenv("PATH", path.c_str(), 1);
  if (cxx) setenv("CXX", saved_cxx.c_str(), 1);
  EXPECT_EQ(got, good);
  EXPECT_EQ(cache_stats().fallbacks, s0.fallbacks + 1);
  EXPECT_TRUE(cache_files(".so").empty());
}

TEST(CacheDir, FollowsTheEnvironment) {
  setenv("TBEX_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(cache_dir(), "/some/where");
  unsetenv("TBEX_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(cache_dir(), "/xdg/tbex");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(cache_dir(), "/home/u/.cache/tbex");
}

TEST(CacheKey, EveryFieldChangesTheKey) {
  const disk::Fields base = disk::base_fields();
  ASSERT_GE(base.size(), 4u);
  EXPECT_EQ(base[0].first, "tbex");
  EXPECT_EQ(base[2].first, "halide");
  EXPECT_EQ(base[3].first, "llvm");
  EXPECT_NE(base[1].second, "unknown");  // the build-id (or file identity) of this binary
  const std::string k = disk::key_of(base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, disk::key_of(disk::base_fields()));
  for (size_t i = 0; i < base.size(); ++i) {
    disk::Fields f = base;
    f[i].second += "x";
    EXPECT_NE(disk::key_of(f), k) << base[i].first;
  }
}

// The runtime cached kernels link is the target's without its instruction sets: one object (and
// one prebuilt file name) for every x86-64 CPU, whatever features the kernels use.
TEST(CacheRuntime, TargetDropsInstructionSets) {
  const Halide::Target spr("x86-64-linux-avx512_sapphirerapids-user_context-large_buffers");
  const Halide::Target avx2("x86-64-linux-avx2-fma-f16c-user_context");
  const Halide::Target r = codegen::runtime_target(spr);
  for (auto f : {Halide::Target::SSE41, Halide::Target::AVX2, Halide::Target::FMA,
                 Halide::Target::AVX512, Halide::Target::AVX512_SapphireRapids})
    EXPECT_FALSE(r.has_feature(f)) << r.to_string();
  EXPECT_EQ(r.os, spr.os);
  EXPECT_EQ(r.arch, spr.arch);
  EXPECT_EQ(r.bits, spr.bits);
  EXPECT_EQ(r.to_string(), codegen::runtime_target(avx2).to_string());
  const std::string name = disk::prebuilt_runtime_name(r.to_string());
  EXPECT_EQ(name.rfind("halide-", 0), 0u) << name;
  EXPECT_NE(name.find("-" + r.to_string() + ".o"), std::string::npos) << name;
}

}  // namespace
}  // namespace tbex::test
