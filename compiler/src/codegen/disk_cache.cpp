/** The disk cache's key -> entry protocol: look the key up without locking, and on a miss take
 * the entry's build lock, look again (another process may just have published it), compile,
 * link, publish by atomic rename and load. Files, sidecars, eviction and counters are in
 * codegen/disk_cache_entry.h; hashing, files, processes and compilers in support/. */
#include "codegen/disk_cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "codegen/disk_cache_entry.h"
#include "support/compilers.h"
#include "support/files.h"
#include "support/hash.h"
#include "support/process.h"
#include "tbex/cache.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/log.h"

namespace tbex::disk {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string fmt_ms(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", ms);
  return b;
}

bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

/** Files removed on scope exit (a build's intermediates). */
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const std::string& p : paths) ::unlink(p.c_str());
  }
  /** A temp name next to `path`, removed with this object. */
  std::string add(const std::string& path) { return paths.emplace_back(support::temp_name(path)); }
};

/** Runs an emitter; false with `why` when it throws (Halide's or the allocator's errors: the
 * caller falls back to the in-memory JIT, which reports a real compile error itself). */
template <class F, class... A>
bool emitted(const F& f, std::string& bytes, std::string& why, A&&... args) {
  try {
    bytes = f(std::forward<A>(args)...);
    return true;
  } catch (const std::exception& e) {
    why = std::string("emitting the object failed: ") + e.what();
    return false;
  }
}

/** `bytes` into the temp file `path`; the directory is made again if `cache clear` removed it. */
std::string write_object(const std::string& path, const std::string& bytes) {
  std::string why = support::write_file(path, bytes);
  if (why.empty() || errno != ENOENT) return why;
  if (std::string err = support::make_parent_dirs(path); !err.empty()) return err;
  return support::write_file(path, bytes);
}

/** `lock` (a file in `dir`) taken, the directory made first. `cache clear` may remove the
 * directory between the two (it keeps only held locks): made again, a few times, before giving
 * up with `why`. While held, the lock file keeps the directory from being removed. */
std::unique_ptr<support::FileLock> lock_in(const std::string& dir, const std::string& lock,
                                           std::string& why) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    if ((why = support::make_dirs(dir)) != "") return nullptr;
    auto l = std::make_unique<support::FileLock>(lock);
    if (l->held()) return l;
    why = l->error();
    if (exists(dir)) return nullptr;  // not a vanished directory: a real failure
  }
  return nullptr;
}

/** The prebuilt runtime object for `runtime_id` beside the binary holding this code (see
 * prebuilt_runtime_name), or "". */
std::string prebuilt_runtime(const std::string& runtime_id) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&prebuilt_runtime), &info) || !info.dli_fname) return "";
  char* real = ::realpath(info.dli_fname, nullptr);
  if (!real) return "";
  std::string dir = real;
  std::free(real);
  dir = dir.substr(0, dir.rfind('/'));
  const std::string name = prebuilt_runtime_name(runtime_id);
  for (const std::string& d : {dir + "/runtime/", dir + "/../runtime/"})
    if (exists(d + name)) return d + name;
  return "";
}

/** <dir>/runtime/<key of fields>.o, an object every entry links: written from `make` once
 * (under its lock) and published by rename; `fresh` (the last link failed) writes it again.
 * "" with `why` if it cannot be made. */
std::string shared_object(const Fields& fields, const std::function<std::string()>& make,
                          const std::string& what, bool fresh, std::string& why) {
  const std::string dir = cache_dir() + "/runtime";
  const std::string obj = dir + "/" + key_of(fields) + ".o";
  if (!fresh && exists(obj)) return obj;
  auto lock = lock_in(dir, obj.substr(0, obj.size() - 2) + ".lock", why);
  if (!lock) return "";
  if (!fresh && exists(obj)) return obj;
  auto t0 = Clock::now();
  std::string bytes;
  if (!emitted(make, bytes, why)) return "";
  if ((why = support::write_atomic(obj, bytes)) != "") return "";
  log_cache("  " + what + " written in " + fmt_ms(ms_since(t0)));
  return obj;
}

/** The runtime object every entry links: the prebuilt one, else <dir>/runtime/<key>.o, compiled
 * once (under its lock) and published by rename. `fresh` (the last one failed to link) skips the
 * prebuilt object and compiles a new one. "" with `why` if it cannot be made. */
std::string runtime_object(const Emitters& emit, bool fresh, std::string& why) {
  if (!fresh) {
    if (std::string pre = prebuilt_runtime(emit.runtime_id); !pre.empty()) {
      log_cache("  Halide runtime: prebuilt " + pre);
      return pre;
    }
  }
  Fields f = base_fields();
  f.emplace_back("runtime", emit.runtime_id);
  return shared_object(f, emit.runtime, "Halide runtime for " + emit.runtime_id, fresh, why);
}

/** Compiles, links and publishes the entry (caller holds the build lock); "" or why it could
 * not. */
std::string build(const std::string& key, const Paths& p, const Fields& fields, const Emitters& emit) {
  std::vector<std::string> cxx = support::cxx_compiler();
  if (cxx.empty()) return "no C++ compiler found ($CXX, c++, g++, clang++ on PATH)";
  const std::string fn = fn_name_of(key);
  TempFiles tmp;
  const std::string obj = tmp.add(p.dir + "/" + key + ".o");
  const std::string vers = tmp.add(p.dir + "/" + key + ".map");
  const std::string so = tmp.add(p.so);
  auto t0 = Clock::now();
  std::string bytes, why;
  if (!emitted(emit.kernel, bytes, why, fn)) return why;
  if (std::string err = write_object(obj, bytes); !err.empty()) return err;
  bytes.clear();
  const double emit_ms = ms_since(t0);
  // Only the entry point and the runtime setters are exported: each .so keeps its own runtime.
  if (std::string err = support::write_atomic(
          vers, "{ global: " + fn + "_argv; " + fn +
                    "_metadata; halide_set_custom_do_par_for; halide_set_error_handler;"
                    " halide_set_custom_malloc; halide_set_custom_free; local: *; };\n");
      !err.empty())
    return err;
  auto t1 = Clock::now();
  std::string err;
  for (bool fresh : {false, true}) {  // a stale or damaged runtime object: make it again, once
    const std::string runtime = runtime_object(emit, fresh, err);
    if (runtime.empty()) return err;
    Fields kf = base_fields();
    kf.emplace_back("object", "tbex kernels");
    const std::string kernels = shared_object(kf, emit.kernels, "tbex kernels object", fresh, err);
    if (kernels.empty()) return err;
    std::vector<std::string> link = cxx;
    // The version script's path goes through -Xlinker whole: -Wl, would split a cache directory
    // with a comma in its name into two linker arguments.
    link.insert(link.end(), {"-shared", "-o", so, obj, runtime, kernels, "-Xlinker",
                             "--version-script=" + vers, "-Wl,-z,now", "-Wl,--as-needed"});
    try {
      support::run_tool(link, "CXX");
      err.clear();
      break;
    } catch (const UserError& e) {
      err = e.what();
    }
  }
  const double link_ms = ms_since(t1);
  if (!err.empty()) return err;
  const double compile_ms = ms_since(t0);
  const int fd = ::open(so.c_str(), O_RDONLY | O_CLOEXEC);
  std::string hex;
  int64_t size = 0;
  const bool hashed = fd >= 0 && support::sha256_fd(fd, hex, size);
  if (fd >= 0) ::close(fd);
  if (!hashed) return "cannot read " + so;
  // .so first, sidecar second: a reader seeing a new .so with an old sidecar finds a mismatch,
  // takes the lock and waits for this build.
  if (::rename(so.c_str(), p.so.c_str()) != 0)
    return "cannot publish " + p.so + ": " + std::strerror(errno);
  if (std::string e = support::write_atomic(p.json, sidecar_text(key, fn, fields, size, hex, compile_ms));
      !e.empty())
    return e;
  log_cache("  compile " + fmt_ms(emit_ms) + " (Halide + LLVM), link " + fmt_ms(link_ms) + " (" +
            cxx[0] + "), " + std::to_string(size) + " bytes");
  return "";
}

std::shared_ptr<Library> fallback(const std::string& what, const std::string& why) {
  count(Event::kFallback);
  log_cache("fallback to the in-memory JIT for " + what + ": " + why);
  log::warn_once("cache-fallback",
                 "the kernel cache in " + cache_dir() + " cannot be used (" + why +
                     "): kernels are compiled in memory and again in every process. Set "
                     "TBEX_CACHE_DIR to a writable directory, or TBEX_CACHE=0 to compile in "
                     "memory without this warning.");
  return nullptr;
}

}  // namespace

std::shared_ptr<Library> load_or_build(const Fields& fields, const std::string& what,
                                       const Emitters& emit) {
  if (!cache_enabled()) return nullptr;
  auto t0 = Clock::now();
  const std::string key = key_of(fields);
  const Paths p = paths_of(cache_dir(), key);
  const bool force = knobs::get_bool("TBEX_ALWAYS_COMPILE");
  std::string why;
  if (!force && exists(p.so) && exists(p.json)) {
    if (auto lib = load_entry(key, p, why)) {
      count(Event::kHit);
      log_cache("hit " + key.substr(0, 16) + " " + what + ": loaded in " + fmt_ms(ms_since(t0)));
      return lib;
    }
  }
  auto lock = lock_in(p.dir, p.lock, why);
  if (!lock) return fallback(what, why);
  const double wait_ms = ms_since(t0);
  bool rebuild = false;
  if (!force && (exists(p.so) || exists(p.json))) {
    // Rechecked under the lock: another process may just have published it.
    if (auto lib = load_entry(key, p, why)) {
      count(Event::kHit);
      log_cache("hit " + key.substr(0, 16) + " " + what + ": loaded after waiting " +
                fmt_ms(wait_ms) + " for another compile");
      return lib;
    }
    rebuild = true;
    log_cache("rebuild " + key.substr(0, 16) + " " + what + ": " + why);
    ::unlink(p.so.c_str());
    ::unlink(p.json.c_str());
  } else {
    log_cache(std::string(force ? "forced compile (TBEX_ALWAYS_COMPILE=1) " : "miss ") +
              key.substr(0, 16) + " " + what);
  }
  if (std::string err = build(key, p, fields, emit); !err.empty()) return fallback(what, err);
  count(Event::kCompile);
  if (rebuild) count(Event::kRebuild);
  auto lib = load_entry(key, p, why);
  if (!lib) return fallback(what, "the fresh entry does not load: " + why);
  log_cache("stored " + key.substr(0, 16) + " " + what + " in " + fmt_ms(ms_since(t0)));
  enforce_cap();  // after loading: the new entry is in use, so never its own victim
  return lib;
}

}  // namespace tbex::disk
