#include "lower/tuning_db.h"

#include <sys/stat.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "support/files.h"
#include "support/json.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/log.h"
#include "tbex/version.h"

namespace tbex {
namespace tuning {
namespace {

/** One stored entry: its key and what was measured. */
struct Row {
  Key key;
  TuningEntry entry;
  double default_ms = -1;
};

const char kFormat[] = "tbex-tuning-1";
const char kParam[] = "tuning database";

Row row_of(const json::Value& e) {
  auto str = [&](const char* k) { return json::as_string(json::member(e, k, kParam), k); };
  auto number = [&](const char* k) { return json::as_number(json::member(e, k, kParam), k); };
  Row r;
  r.key = Key{str("problem"), str("target"), str("tbex"), (int)json::as_int(json::member(e, "threads", kParam), "threads")};
  r.entry = TuningEntry{str("schedule"), str("variant"), number("ms"), str("date"), r.key.threads,
                        r.key.target};
  r.default_ms = number("default_ms");
  return r;
}

json::Value json_of(const Row& r) {
  // Times to 0.1 us: the file stays readable and nothing finer is measured.
  auto round4 = [](double ms) { return std::round(ms * 1e4) / 1e4; };
  return {{"problem", r.key.problem},     {"threads", r.key.threads},
          {"target", r.key.target},       {"tbex", r.key.tbex},
          {"schedule", r.entry.schedule}, {"variant", r.entry.variant},
          {"ms", round4(r.entry.ms)},     {"default_ms", round4(r.default_ms)},
          {"date", r.entry.date}};
}

/** The rows of `text`; none (with a log line) when it is not a database tbex wrote. */
std::vector<Row> parse(const std::string& path, const std::string& text) {
  std::vector<Row> rows;
  if (text.empty()) return rows;
  try {
    const json::Value v = json::parse(text, kParam);
    const json::Value& entries = json::member(v, "entries", kParam);
    if (json::as_string(json::member(v, "format", kParam), "format") != kFormat || !entries.is_array())
      throw UserError(code::kValue, kParam, std::string("not a ") + kFormat + " file");
    for (const json::Value& e : entries) rows.push_back(row_of(e));
  } catch (const UserError& e) {
    rows.clear();
    log::print("tune", "tuning database " + path + " is corrupt, ignored (" + e.what() +
                           "); the next tune rewrites it");
  }
  return rows;
}

std::string serialize(const std::vector<Row>& rows) {
  json::Value entries = json::Value::array();
  for (const Row& r : rows) entries.push_back(json_of(r));
  return json::to_text({{"format", kFormat}, {"entries", entries}});
}

bool same(const Key& a, const Key& b) {
  return a.problem == b.problem && a.target == b.target && a.tbex == b.tbex && a.threads == b.threads;
}

/** The parsed file, reparsed only when its mtime or size changes (selection reads it often). */
std::vector<Row> load(const std::string& path) {
  static std::mutex mu;
  static std::string c_path;
  static int64_t c_mtime = -1, c_size = -1;
  static std::vector<Row> c_rows;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return {};
  const int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  std::lock_guard<std::mutex> l(mu);
  if (path != c_path || mtime != c_mtime || st.st_size != c_size) {
    c_rows = parse(path, support::read_text(path));
    c_path = path, c_mtime = mtime, c_size = st.st_size;
  }
  return c_rows;
}

}  // namespace

Key key_of(const Problem& problem, int threads, const std::string& target) {
  return Key{problem.canonical(), target, TBEX_VERSION_STRING, threads};
}

bool lookup(const std::string& path, const Key& key, TuningEntry& entry) {
  for (const Row& r : load(path))
    if (same(r.key, key)) return entry = r.entry, true;
  return false;
}

std::string store(const std::string& path, const Key& key, const TuningEntry& entry,
                  double default_ms) {
  if (std::string err = support::make_parent_dirs(path); !err.empty()) return err;
  support::FileLock lock(path + ".lock");
  if (!lock.held()) return lock.error();
  // Read, modify, write under the lock: concurrent tuners keep each other's entries.
  std::vector<Row> rows;
  for (const Row& r : parse(path, support::read_text(path)))
    if (!same(r.key, key)) rows.push_back(r);
  rows.push_back(Row{key, entry, default_ms});
  return support::write_atomic(path, serialize(rows));
}

}  // namespace tuning

std::string tuning_db_path() {
  if (std::string p = knobs::get_string("TBEX_TUNING_DB"); !p.empty()) return p;
  return knobs::cache_dir() + "/tuning.json";
}

}  // namespace tbex
