#include "tune/tuning_db.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "codegen/disk_cache.h"
#include "codegen/files.h"
#include "frontend/json.h"
#include "tbex/log.h"
#include "lower/select.h"
#include "tbex/cache.h"
#include "tbex/errors.h"

namespace tbex {
namespace tuning {
namespace {

/** One stored entry: its key and what was measured. */
struct Row {
  Key key;
  TuningEntry entry;
  double default_ms = -1;
};

struct Db {
  std::vector<Row> rows;
  bool corrupt = false;
};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if ((unsigned char)c < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

const std::string kFormat = "tbex-tuning-1";

/** The rows of `text`; corrupt (with a log line) when it is not a database tbex wrote. */
Db parse(const std::string& path, const std::string& text) {
  Db db;
  if (text.empty()) return db;
  try {
    const json::Value v = json::parse(text, "tuning database");
    const json::Value* fmt = v.find("format");
    const json::Value* entries = v.find("entries");
    if (!fmt || fmt->as_string("format") != kFormat || !entries ||
        entries->kind != json::Value::Kind::kArray)
      throw UserError("", "tuning database", "not a " + kFormat + " file");
    for (const json::Value& e : entries->array) {
      auto str = [&](const char* k) {
        const json::Value* f = e.find(k);
        if (!f) throw UserError("", "tuning database", std::string("entry without \"") + k + "\"");
        return f->as_string(k);
      };
      auto number = [&](const char* k) {
        const json::Value* f = e.find(k);
        if (!f || f->kind != json::Value::Kind::kNumber)
          throw UserError("", "tuning database", std::string("entry without number \"") + k + "\"");
        return f->number;
      };
      Row r;
      r.key = Key{str("problem"), str("target"), str("tbex"), (int)number("threads")};
      r.entry = TuningEntry{str("schedule"), str("variant"), number("ms"), str("date"),
                            r.key.threads, r.key.target};
      r.default_ms = number("default_ms");
      db.rows.push_back(r);
    }
  } catch (const UserError& e) {
    db.rows.clear();
    db.corrupt = true;
    log::print("tune", "tuning database " + path + " is corrupt, ignored (" + e.what() +
                           "); the next tune rewrites it");
  }
  return db;
}

std::string serialize(const Db& db) {
  std::string s = "{\n  \"format\": \"" + kFormat + "\",\n  \"entries\": [";
  for (size_t i = 0; i < db.rows.size(); ++i) {
    const Row& r = db.rows[i];
    s += std::string(i ? "," : "") + "\n    {\"problem\": \"" + escape(r.key.problem) +
         "\", \"threads\": " + std::to_string(r.key.threads) + ", \"target\": \"" +
         escape(r.key.target) + "\", \"tbex\": \"" + escape(r.key.tbex) + "\",\n     \"schedule\": \"" +
         escape(r.entry.schedule) + "\", \"variant\": \"" + escape(r.entry.variant) +
         "\", \"ms\": " + num(r.entry.ms) + ", \"default_ms\": " + num(r.default_ms) +
         ", \"date\": \"" + escape(r.entry.date) + "\"}";
  }
  return s + "\n  ]\n}\n";
}

bool same(const Key& a, const Key& b) {
  return a.problem == b.problem && a.target == b.target && a.tbex == b.tbex && a.threads == b.threads;
}

/** The parsed file, reparsed only when its mtime or size changes (compile() reads it often). */
Db load(const std::string& path) {
  static std::mutex mu;
  static std::string c_path;
  static int64_t c_mtime = -1, c_size = -1;
  static Db c_db;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return Db{};
  const int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  std::lock_guard<std::mutex> l(mu);
  if (path != c_path || mtime != c_mtime || st.st_size != c_size) {
    c_db = parse(path, codegen::read_text(path));
    c_path = path, c_mtime = mtime, c_size = st.st_size;
  }
  return c_db;
}

bool make_parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return true;
  const std::string dir = path.substr(0, slash);
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    if (::mkdir(dir.substr(0, i).c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

Key key_of(const Problem& problem, int threads) {
  return Key{problem.canonical(), lower::host_target().to_string(), disk::base_fields()[0].second,
             threads};
}

bool lookup(const std::string& path, const Key& key, TuningEntry& entry) {
  for (const Row& r : load(path).rows)
    if (same(r.key, key)) return entry = r.entry, true;
  return false;
}

std::string store(const std::string& path, const Key& key, const TuningEntry& entry,
                  double default_ms) {
  if (!make_parent(path)) return "cannot create the directory of " + path;
  const std::string lock_path = path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot open " + lock_path + ": " + std::strerror(errno);
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  // Read, modify, write under the lock: concurrent tuners keep each other's entries.
  Db db = parse(path, codegen::read_text(path));
  std::vector<Row> rows;
  for (const Row& r : db.rows)
    if (!same(r.key, key)) rows.push_back(r);
  rows.push_back(Row{key, entry, default_ms});
  db.rows = rows;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::string err;
  {
    std::ofstream f(tmp, std::ios::binary);
    f << serialize(db);
    if (!f.flush()) err = "cannot write " + tmp;
  }
  if (err.empty() && ::rename(tmp.c_str(), path.c_str()) != 0)
    err = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
  if (!err.empty()) ::unlink(tmp.c_str());
  ::close(fd);  // releases the flock
  return err;
}

}  // namespace tuning

std::string tuning_db_path() {
  if (const char* p = std::getenv("TBEX_TUNING_DB"); p && *p) return p;
  return cache_dir() + "/tuning.json";
}

}  // namespace tbex
