// The support layer: SHA-256 (libcrypto) on the FIPS 180-4 example messages, JSON through
// nlohmann with tbex's UserErrors, the tool runner's typed errors, atomic writes and file locks.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/compilers.h"
#include "support/files.h"
#include "support/hash.h"
#include "support/json.h"
#include "support/process.h"
#include "tbex/errors.h"
#include "test_util.h"

namespace tbex::test {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  char tmpl[] = "/tmp/tbex_support_test.XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d ? d : "/tmp";
}

TEST(Sha256, FipsExampleMessages) {
  // FIPS 180-4 / NIST CSRC example values (tests/python/test_cache.py checks against hashlib).
  EXPECT_EQ(support::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(support::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(support::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(support::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalAndFileAgreeWithOneShot) {
  std::string data;
  for (int i = 0; i < 200000; ++i) data += (char)(i * 131 % 251);
  const std::string want = support::sha256_hex(data);
  support::Sha256 s;
  for (size_t off = 0; off < data.size(); off += 777) s.update(data.data() + off, std::min<size_t>(777, data.size() - off));
  EXPECT_EQ(s.hex(), want);
  const std::string dir = temp_dir(), path = dir + "/blob";
  std::ofstream(path, std::ios::binary) << data;
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string hex;
  int64_t size = 0;
  ASSERT_TRUE(support::sha256_fd(fd, hex, size));
  ::close(fd);
  EXPECT_EQ(hex, want);
  EXPECT_EQ(size, (int64_t)data.size());
  fs::remove_all(dir);
}

TEST(Json, RoundTrip) {
  json::Value v = {{"name", "dw \"quoted\"\n"}, {"shape", std::vector<int64_t>{1, 4, 1, 6, 6, 16}},
                   {"ms", 0.125}, {"nested", {{"k", -3}}}, {"flag", true}, {"none", nullptr}};
  const std::string text = json::to_text(v);
  EXPECT_EQ(text.back(), '\n');
  const json::Value back = json::parse(text, "doc");
  EXPECT_EQ(back, v);
  EXPECT_EQ(json::as_string(json::member(back, "name", "doc"), "name"), "dw \"quoted\"\n");
  EXPECT_EQ(json::as_ints(json::member(back, "shape", "doc"), "shape"),
            (std::vector<int64_t>{1, 4, 1, 6, 6, 16}));
  EXPECT_EQ(json::as_int(json::member(json::member(back, "nested", "doc"), "k", "nested"), "k"), -3);
  EXPECT_EQ(json::as_int(json::parse("7.0", "x"), "x"), 7);  // integral floats are integers
  // Fields keep the order they were written in.
  EXPECT_LT(text.find("\"name\""), text.find("\"shape\""));
  EXPECT_LT(text.find("\"shape\""), text.find("\"ms\""));
}

/** The UserError `f` throws (fails the test when it throws none). */
template <class F>
UserError user_error_of(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e;
  }
  ADD_FAILURE() << "no UserError";
  return UserError("", "", "");
}

TEST(Json, BadDocumentsAreUserErrors) {
  const UserError e = user_error_of([] { json::parse("{\"op\": [1, 2", "json"); });
  EXPECT_EQ(e.param(), "json");
  // The position is where the input ended (12 characters: column 13).
  EXPECT_NE(std::string(e.what()).find("invalid JSON: parse error at line 1, column 13"),
            std::string::npos) << e.what();
  EXPECT_EQ(user_error_of([] { json::parse("", "db"); }).param(), "db");
  EXPECT_EQ(user_error_of([] { json::parse("{} trailing", "db"); }).param(), "db");
  const json::Value v = json::parse(R"({"s": "x", "f": 1.5, "a": [1, "2"]})", "doc");
  EXPECT_EQ(user_error_of([&] { json::as_int(v["f"], "groups"); }).param(), "groups");
  EXPECT_EQ(user_error_of([&] { json::as_ints(v["a"], "strides"); }).param(), "strides");
  EXPECT_EQ(user_error_of([&] { json::as_string(v["f"], "res_dtype"); }).param(), "res_dtype");
  EXPECT_EQ(user_error_of([&] { json::as_number(v["s"], "ms"); }).param(), "ms");
  const UserError m = user_error_of([&] { json::member(v, "shape", "x"); });
  EXPECT_EQ(m.param(), "x");
  EXPECT_NE(std::string(m.what()).find("missing \"shape\""), std::string::npos);
}

TEST(RunTool, ReturnsOutput) {
  EXPECT_EQ(support::run_tool({"sh", "-c", "echo out; echo err >&2"}, "tool"), "out\nerr\n");
}

TEST(RunTool, FailureNamesToolCommandAndOutput) {
  const UserError e = user_error_of(
      [] { support::run_tool({"sh", "-c", "echo the reason; exit 3"}, "CC", "set TBEX_CC"); });
  const std::string m = e.what();
  EXPECT_EQ(e.param(), "CC");
  EXPECT_NE(m.find("sh exited with status 3"), std::string::npos) << m;
  EXPECT_NE(m.find("sh -c 'echo the reason; exit 3'"), std::string::npos) << m;
  EXPECT_NE(m.find("the reason"), std::string::npos) << m;
  EXPECT_NE(m.find("set TBEX_CC"), std::string::npos) << m;
  const UserError missing = user_error_of([] { support::run_tool({"tbex-no-such-tool", "-v"}, "CXX"); });
  EXPECT_EQ(missing.param(), "CXX");
  EXPECT_NE(std::string(missing.what()).find("cannot run tbex-no-such-tool"), std::string::npos);
  const UserError killed = user_error_of([] { support::run_tool({"sh", "-c", "kill -9 $$"}, "CC"); });
  EXPECT_NE(std::string(killed.what()).find("killed by signal 9"), std::string::npos);
}

TEST(Compilers, LookupFollowsTheEnvironment) {
  const char* cc = getenv("CC");
  const std::string saved = cc ? cc : "";
  setenv("CC", "ccache  gcc -m64", 1);
  EXPECT_EQ(support::c_compiler(), (std::vector<std::string>{"ccache", "gcc", "-m64"}));
  setenv("TBEX_CC", "clang", 1);
  EXPECT_EQ(support::c_compiler(), std::vector<std::string>{"clang"});
  unsetenv("TBEX_CC");
  unsetenv("CC");
  EXPECT_EQ(support::c_compiler(), std::vector<std::string>{"cc"});
  if (cc) setenv("CC", saved.c_str(), 1);
  EXPECT_EQ(support::find_program("sh").substr(support::find_program("sh").size() - 3), "/sh");
  EXPECT_EQ(support::find_program("tbex-no-such-tool"), "");
}

TEST(Files, AtomicWriteAndDirectories) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/a/b/c/file.txt";
  EXPECT_EQ(support::make_parent_dirs(path), "");
  EXPECT_EQ(support::write_atomic(path, "one"), "");
  EXPECT_EQ(support::write_atomic(path, "two"), "");
  EXPECT_EQ(support::read_text(path), "two");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir + "/a/b/c"), fs::directory_iterator()), 1);
  EXPECT_NE(support::temp_name(path), support::temp_name(path));
  std::ofstream(dir + "/plain") << "x";
  EXPECT_NE(support::make_dirs(dir + "/plain/sub"), "");  // a file is in the way
  EXPECT_NE(support::write_atomic(dir + "/missing/f", "x"), "");
  fs::remove_all(dir);
}

TEST(Files, WritesPastTheFileSizeLimitReportAndLeaveNothing) {
  // RLIMIT_FSIZE stands in for a full disk: write() fails (EFBIG once SIGXFSZ is ignored).
  const std::string dir = temp_dir();
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string big(64 * 1024, 'x');
  const std::string plain = support::write_file(dir + "/plain", big);
  const std::string atomic = support::write_atomic(dir + "/atomic", big);
  std::string thrown;
  try {
    support::write_text(dir + "/text", big);
  } catch (const UserError& e) {
    thrown = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_NE(plain.find("cannot write " + dir + "/plain"), std::string::npos) << plain;
  EXPECT_NE(atomic.find("cannot write"), std::string::npos) << atomic;
  EXPECT_NE(thrown.find(dir + "/text"), std::string::npos) << thrown;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0);  // no partial or temp file
  fs::remove_all(dir);
}

TEST(Files, MemFileHoldsWhatWasWrittenThroughItsPath) {
  support::MemFile m;
  EXPECT_EQ(m.bytes(), "");
  const std::string text(100000, 'q');
  std::ofstream(m.path()) << text << "end";
  EXPECT_EQ(m.bytes(), text + "end");
  std::ofstream(m.path()) << "short";  // reopened with truncation, as a writer would
  EXPECT_EQ(m.bytes(), "short");
}

TEST(Files, LockExcludesOtherHoldersAndSurvivesDeletion) {
  const std::string dir = temp_dir(), path = dir + "/x.lock";
  {
    support::FileLock held(path);
    ASSERT_TRUE(held.held());
    support::FileLock other(path, support::FileLock::Wait::kTry);  // another open file: excluded
    EXPECT_FALSE(other.held());
    EXPECT_NE(other.error().find("held"), std::string::npos);
    ::unlink(path.c_str());  // deleted while held: a new locker locks a new file
    support::FileLock next(path, support::FileLock::Wait::kTry);
    EXPECT_TRUE(next.held());
  }
  support::FileLock again(path, support::FileLock::Wait::kTry);
  EXPECT_TRUE(again.held());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tbex::test
