/** The disk cache's size cap: least recently used entries go first, never one in use (the
 * protocol is in codegen/disk_cache_entry.h). */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <vector>

#include "codegen/disk_cache_entry.h"
#include "support/files.h"
#include "tbex/cache.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"

namespace tbex {
namespace disk {
namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string key;
  Paths paths;
  int64_t bytes = 0;
  int64_t used_ns = 0;  ///< the .so's modification time: its last load or build
};

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit((unsigned char)c); });
}

int64_t file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? (int64_t)st.st_size : 0;
}

/** Every entry with a shared object under `root`, least recently used first. */
std::vector<Entry> scan(const std::string& root) {
  std::vector<Entry> out;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(root, ec)) {
    const std::string sub = d.path().filename().string();
    if (sub.size() != 2 || !is_hex(sub) || !d.is_directory(ec)) continue;
    std::error_code ec2;
    for (const fs::directory_entry& f : fs::directory_iterator(d.path(), ec2)) {
      const std::string name = f.path().filename().string();
      if (name.size() != 64 + 3 || name.compare(64, 3, ".so") != 0) continue;
      Entry e;
      e.key = name.substr(0, 64);
      if (!is_hex(e.key) || e.key.compare(0, 2, sub) != 0) continue;
      e.paths = paths_of(root, e.key);
      struct stat st{};
      if (::stat(e.paths.so.c_str(), &st) != 0) continue;
      e.bytes = (int64_t)st.st_size + file_size(e.paths.json);
      e.used_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
      out.push_back(e);
    }
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.used_ns != b.used_ns ? a.used_ns < b.used_ns : a.key < b.key;
  });
  return out;
}

/** Removes the entry unless a process is building it (its build lock) or has it loaded (a
 * shared lock on the .so); true when removed. Neither lock is waited for. */
bool evict(const Entry& e) {
  support::FileLock build(e.paths.lock, support::FileLock::Wait::kTry);
  if (!build.held()) return false;
  const int fd = ::open(e.paths.so.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool unused = support::flock_retry(fd, LOCK_EX | LOCK_NB);
  if (unused) {
    // The sidecar first: a reader that still finds the .so sees no valid entry.
    ::unlink(e.paths.json.c_str());
    ::unlink(e.paths.so.c_str());
    ::unlink(e.paths.lock.c_str());  // while held: the next locker re-creates it (FileLock)
  }
  ::close(fd);
  return unused;
}

std::string age(int64_t used_ns) {
  const double s = std::max(0.0, (double)std::time(nullptr) - (double)used_ns * 1e-9);
  return s >= 3600 ? std::to_string((int64_t)(s / 3600)) + " h" : std::to_string((int64_t)s) + " s";
}

}  // namespace

void enforce_cap() {
  const int64_t cap = cache_max_bytes();
  if (cap <= 0) return;
  const PruneResult r = prune_cache(cap);
  if (r.evicted > 0 || r.kept_bytes > cap)
    log_cache("size cap " + std::to_string(cap >> 20) + " MiB: evicted " + std::to_string(r.evicted) +
              " entries (" + std::to_string(r.evicted_bytes) + " bytes), " + std::to_string(r.kept) +
              " kept (" + std::to_string(r.kept_bytes) + " bytes, " + std::to_string(r.in_use) +
              " in use)");
}

}  // namespace disk

int64_t cache_max_bytes() {
  const long long mb = knobs::get_int("TBEX_CACHE_MAX_MB");
  user_check(mb >= 0, code::kValue, "TBEX_CACHE_MAX_MB",
             "TBEX_CACHE_MAX_MB=" + std::to_string(mb) + " is negative (0 means no cap)");
  return (int64_t)mb << 20;
}

PruneResult prune_cache(int64_t max_bytes, const std::string& dir) {
  user_check(max_bytes >= 0, code::kValue, "max_bytes", "max_bytes=" + std::to_string(max_bytes) + " is negative");
  const std::string root = dir.empty() ? cache_dir() : dir;
  const std::vector<disk::Entry> entries = disk::scan(root);
  PruneResult r;
  for (const disk::Entry& e : entries) r.kept_bytes += e.bytes;
  for (const disk::Entry& e : entries) {
    if (r.kept_bytes <= max_bytes) break;
    if (!disk::evict(e)) {
      ++r.in_use;
      continue;
    }
    ++r.evicted, r.evicted_bytes += e.bytes, r.kept_bytes -= e.bytes;
    disk::count(disk::Event::kEviction);
    disk::log_cache("evict " + e.key.substr(0, 16) + ": " + std::to_string(e.bytes) +
                    " bytes, last used " + disk::age(e.used_ns) + " ago");
  }
  r.kept = (int64_t)entries.size() - r.evicted;
  return r;
}

}  // namespace tbex
