#include "codegen/disk_cache.h"

// Halide.h before <elf.h> (via <link.h>): its ELF enums share names with elf.h's macros.
#include "Halide.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "codegen/files.h"
#include "tbex/log.h"
#include "tbex/cache.h"

extern char** environ;

namespace tbex {
namespace {

using codegen::read_text;

std::atomic<int64_t> n_hits{0}, n_compiles{0}, n_rebuilds{0}, n_fallbacks{0};

bool env_is(const char* name, const char* value) {
  const char* s = std::getenv(name);
  return s && std::strcmp(s, value) == 0;
}

}  // namespace

CacheStats cache_stats() {
  return CacheStats{n_hits.load(), n_compiles.load(), n_rebuilds.load(), n_fallbacks.load()};
}

std::string cache_dir() {
  if (const char* d = std::getenv("TBEX_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tbex";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/tbex";
}

bool cache_enabled() { return !env_is("TBEX_CACHE", "0"); }

namespace disk {
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

void log_cache(const std::string& line) {
  if (log::enabled("cache")) log::print("cache", line);
}

// ---- SHA-256 (FIPS 180-4) ----
struct Sha256 {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block[64];
  size_t fill = 0;
  uint64_t bits = 0;

  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void compress(const uint8_t* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }

  void update(const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    bits += (uint64_t)n * 8;
    while (n > 0) {
      if (fill == 0 && n >= 64) {
        compress(p), p += 64, n -= 64;
        continue;
      }
      size_t take = std::min(n, 64 - fill);
      std::memcpy(block + fill, p, take);
      fill += take, p += take, n -= take;
      if (fill == 64) compress(block), fill = 0;
    }
  }

  std::string hex() {
    uint64_t total = bits;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill != 56) update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = (uint8_t)(total >> (56 - 8 * i));
    update(len, 8);
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (uint32_t v : h)
      for (int i = 28; i >= 0; i -= 4) s += digits[(v >> i) & 15];
    return s;
  }
};

/** sha256 and size of an open file's bytes, read from the start; false on a read error. */
bool sha256_fd(int fd, std::string& hex, int64_t& size) {
  Sha256 s;
  std::vector<uint8_t> buf(1 << 16);
  for (int64_t off = 0;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    s.update(buf.data(), (size_t)n);
    off += n;
  }
  hex = s.hex();
  struct stat st{};
  if (::fstat(fd, &st) != 0) return false;
  size = st.st_size;
  return true;
}

bool sha256_file(const std::string& path, std::string& hex, int64_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = sha256_fd(fd, hex, size);
  ::close(fd);
  return ok;
}

// ---- the identity of the tbex build: GNU build-id of the binary holding this code ----
struct BuildIdSearch {
  uintptr_t addr;
  std::string id;
};

int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<BuildIdSearch*>(data);
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph.p_memsz) mine = true;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const uint8_t* name = p + sizeof(ElfW(Nhdr));
      const uint8_t* desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char* digits = "0123456789abcdef";
        for (uint32_t k = 0; k < n->n_descsz; ++k)
          s->id += std::string{digits[desc[k] >> 4], digits[desc[k] & 15]};
        return 1;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

/** The build-id of this binary, else its path, size and modification time: a rebuilt tbex (new
 * schedules, new lowering) never reuses an older build's kernels. */
std::string tbex_build() {
  BuildIdSearch s{reinterpret_cast<uintptr_t>(&find_build_id), ""};
  dl_iterate_phdr(find_build_id, &s);
  if (!s.id.empty()) return "build-id:" + s.id;
  Dl_info info{};
  struct stat st{};
  if (dladdr(reinterpret_cast<void*>(&find_build_id), &info) && info.dli_fname &&
      ::stat(info.dli_fname, &st) == 0)
    return std::string("file:") + info.dli_fname + ":" + std::to_string(st.st_size) + ":" +
           std::to_string((long long)st.st_mtime);
  return "unknown";
}

// ---- files ----
bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

bool make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    std::string part = dir.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string temp_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd()) + "." +
         std::to_string(counter++);
}

/** Writes `text` to a temp file next to `path` and renames it over `path`. */
bool publish_text(const std::string& path, const std::string& text) {
  const std::string tmp = temp_name(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f.flush()) {
      ::unlink(tmp.c_str());
      return false;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if ((unsigned char)c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += c;
  }
  return o;
}

/** The raw value of a top-level "name": "string" or "name": number field of a sidecar tbex
 * wrote (one field per line); "" if absent. */
std::string json_field(const std::string& text, const std::string& name) {
  const std::string tag = "\n  \"" + name + "\": ";
  size_t p = text.find(tag);
  if (p == std::string::npos) return "";
  p += tag.size();
  size_t e = text.find_first_of(",\n", p);
  if (e == std::string::npos) return "";
  std::string v = text.substr(p, e - p);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

// ---- the linker ----
std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

/** $CXX (its first word), else c++, g++ or clang++ on PATH; "" if none. */
std::string find_cxx() {
  if (const char* cxx = std::getenv("CXX"); cxx && *cxx) {
    std::string first = std::string(cxx).substr(0, std::string(cxx).find(' '));
    if (std::string p = find_in_path(first); !p.empty()) return p;
  }
  for (const char* c : {"c++", "g++", "clang++"})
    if (std::string p = find_in_path(c); !p.empty()) return p;
  return "";
}

/** Runs argv (no shell) with output to `log_path`; "" on success, else the reason. */
std::string run_tool(const std::vector<std::string>& args, const std::string& log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return "cannot run " + args[0] + ": " + std::strerror(rc);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return args[0] + " failed (status " + std::to_string(status) + "): " + read_text(log_path);
}

// ---- entries ----
struct Paths {
  std::string dir, so, json, lock;
};

Paths paths_of(const std::string& key) {
  Paths p;
  p.dir = cache_dir() + "/" + key.substr(0, 2);
  p.so = p.dir + "/" + key + ".so";
  p.json = p.dir + "/" + key + ".json";
  p.lock = p.dir + "/" + key + ".lock";
  return p;
}

std::string fn_name_of(const std::string& key) { return "tbex_" + key.substr(0, 24); }

/** Opens the .so and finds its entry points; nullptr and `why` otherwise. With fd >= 0 the
 * library is loaded through /proc/self/fd, i.e. exactly the file that was checksummed (a file
 * renamed over `so` meanwhile is not picked up, and an older build of the same path still loaded
 * in this process is not reused by name). */
std::shared_ptr<Library> open_library(const std::string& so, const std::string& fn, std::string& why,
                                      int fd = -1) {
  // A private copy of the descriptor, kept open by the Library: a number reused after close
  // would make dlopen return the library first loaded through the same /proc/self/fd name.
  const int own = fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  const std::string via = "/proc/self/fd/" + std::to_string(own);
  const bool by_fd = own >= 0 && ::access(via.c_str(), R_OK) == 0;
  void* h = ::dlopen((by_fd ? via : so).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (own >= 0) ::close(own);
    const char* e = ::dlerror();
    why = std::string("dlopen failed: ") + (e ? e : "?");
    return nullptr;
  }
  auto lib = std::make_shared<Library>();
  lib->handle = h;
  lib->fd = own;
  lib->path = so;
  lib->argv = reinterpret_cast<int (*)(void**)>(::dlsym(h, (fn + "_argv").c_str()));
  lib->set_do_par_for = reinterpret_cast<void* (*)(void*)>(::dlsym(h, "halide_set_custom_do_par_for"));
  lib->set_error_handler = reinterpret_cast<void* (*)(void*)>(::dlsym(h, "halide_set_error_handler"));
  lib->set_malloc = reinterpret_cast<void* (*)(void*)>(::dlsym(h, "halide_set_custom_malloc"));
  lib->set_free = reinterpret_cast<void* (*)(void*)>(::dlsym(h, "halide_set_custom_free"));
  if (!lib->argv || !lib->set_do_par_for || !lib->set_error_handler || !lib->set_malloc ||
      !lib->set_free) {
    why = "missing symbol " + fn + "_argv or a runtime setter";
    return nullptr;  // ~Library closes it
  }
  return lib;
}

/** The entry if its sidecar matches `key` and the .so's size and sha256, and it loads. */
std::shared_ptr<Library> validate(const std::string& key, const Paths& p, std::string& why) {
  const std::string side = read_text(p.json);
  if (side.empty()) return why = "sidecar missing or empty", nullptr;
  if (json_field(side, "key") != key) return why = "sidecar key mismatch (corrupt sidecar)", nullptr;
  const int fd = ::open(p.so.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return why = "shared object missing or unreadable", nullptr;
  std::string hex;
  int64_t size = 0;
  std::shared_ptr<Library> lib;
  if (!sha256_fd(fd, hex, size))
    why = "shared object unreadable";
  else if (json_field(side, "so_size") != std::to_string(size))
    why = "size mismatch (truncated?): " + std::to_string(size) + " bytes, sidecar says " +
          json_field(side, "so_size");
  else if (json_field(side, "so_sha256") != hex)
    why = "sha256 mismatch (corrupt)";
  else
    lib = open_library(p.so, json_field(side, "function"), why, fd);
  ::close(fd);
  return lib;
}

std::string sidecar_text(const std::string& key, const std::string& fn, const Fields& fields,
                         int64_t size, const std::string& sha, double compile_ms) {
  auto get = [&](const char* name) {
    for (const auto& f : fields)
      if (f.first == name) return f.second;
    return std::string();
  };
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  std::string s = "{\n";
  s += "  \"key\": \"" + key + "\",\n";
  s += "  \"function\": \"" + fn + "\",\n";
  s += "  \"problem\": \"" + json_escape(get("problem")) + "\",\n";
  s += "  \"schedule\": \"" + json_escape(get("schedule")) + "\",\n";
  s += "  \"schedule_requested\": \"" + json_escape(get("schedule_requested")) + "\",\n";
  s += "  \"threads\": " + (get("threads").empty() ? std::string("0") : get("threads")) + ",\n";
  s += "  \"so_size\": " + std::to_string(size) + ",\n";
  s += "  \"so_sha256\": \"" + sha + "\",\n";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", now);
  s += "  \"created\": " + std::string(buf) + ",\n";
  std::snprintf(buf, sizeof buf, "%.1f", compile_ms);
  s += "  \"compile_ms\": " + std::string(buf) + ",\n";
  s += "  \"fields\": {";
  for (size_t i = 0; i < fields.size(); ++i)
    s += std::string(i ? "," : "") + "\n    \"" + json_escape(fields[i].first) + "\": \"" +
         json_escape(fields[i].second) + "\"";
  s += "\n  }\n}\n";
  return s;
}

/** An exclusive flock on `path` (created if missing) for the object's lifetime; fd < 0 if the
 * file cannot be opened. */
struct FileLock {
  int fd = -1;
  explicit FileLock(const std::string& path) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~FileLock() {
    if (fd >= 0) ::close(fd);  // releases the flock
  }
};

/** <dir>/runtime/<key>.o, compiled once (under its lock) and published by rename; `fresh` forces
 * a new one (the old one failed to link). "" with `why` if it cannot be made. */
std::string runtime_object(const Emitters& emit, bool fresh, std::string& why) {
  Fields f = base_fields();
  f.emplace_back("runtime", emit.runtime_id);
  const std::string dir = cache_dir() + "/runtime";
  const std::string obj = dir + "/" + key_of(f) + ".o";
  if (!fresh && exists(obj)) return obj;
  if (!make_dirs(dir)) return why = "cannot create " + dir, "";
  FileLock lock(obj.substr(0, obj.size() - 2) + ".lock");
  if (!fresh && exists(obj)) return obj;
  auto t0 = Clock::now();
  const std::string tmp = temp_name(obj);
  try {
    emit.runtime(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), obj.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return why = "cannot publish " + obj, "";
  }
  log_cache("  Halide runtime for " + emit.runtime_id + " compiled in " + fmt_ms(ms_since(t0)));
  return obj;
}

/** Compiles, links and publishes the entry (caller holds the lock); "" or why it could not. */
std::string build(const std::string& key, const Paths& p, const Fields& fields, const Emitters& emit,
                  double& compile_ms) {
  const std::string cxx = find_cxx();
  if (cxx.empty()) return "no C++ compiler found ($CXX, c++, g++, clang++ on PATH)";
  const std::string fn = fn_name_of(key);
  const std::string obj = temp_name(p.dir + "/" + key + ".o");
  const std::string vers = temp_name(p.dir + "/" + key + ".map");
  const std::string so_tmp = temp_name(p.so);
  const std::string tool_log = temp_name(p.dir + "/" + key + ".log");
  auto cleanup = [&] {
    for (const auto& f : {obj, vers, so_tmp, tool_log}) ::unlink(f.c_str());
  };
  auto t0 = Clock::now();
  try {
    emit.kernel(obj, fn);
  } catch (...) {
    cleanup();
    throw;
  }
  const double emit_ms = ms_since(t0);
  // Only the entry point and the runtime setters are exported: each .so keeps its own runtime.
  if (!publish_text(vers, "{ global: " + fn + "_argv; " + fn +
                              "_metadata; halide_set_custom_do_par_for; halide_set_error_handler;"
                              " halide_set_custom_malloc; halide_set_custom_free; local: *; };\n"))
    return cleanup(), "cannot write in " + p.dir;
  auto t1 = Clock::now();
  std::string err;
  for (bool fresh : {false, true}) {  // a stale or damaged runtime object: make it again, once
    const std::string runtime = runtime_object(emit, fresh, err);
    if (runtime.empty()) return cleanup(), err;
    err = run_tool({cxx, "-shared", "-o", so_tmp, obj, runtime, "-Wl,--version-script=" + vers,
                    "-Wl,-z,now", "-Wl,--as-needed"},
                   tool_log);
    if (err.empty()) break;
  }
  const double link_ms = ms_since(t1);
  if (!err.empty()) return cleanup(), err;
  std::string hex;
  int64_t size = 0;
  if (!sha256_file(so_tmp, hex, size)) return cleanup(), "cannot read " + so_tmp;
  compile_ms = ms_since(t0);
  // .so first, sidecar second: a reader seeing a new .so with an old sidecar finds a mismatch,
  // takes the lock and waits for this build.
  if (::rename(so_tmp.c_str(), p.so.c_str()) != 0)
    return cleanup(), "cannot publish " + p.so + ": " + std::strerror(errno);
  if (!publish_text(p.json, sidecar_text(key, fn, fields, size, hex, compile_ms)))
    return cleanup(), "cannot write " + p.json;
  cleanup();
  log_cache("  compile " + fmt_ms(emit_ms) + " (Halide + LLVM), link " + fmt_ms(link_ms) + " (" +
            cxx + "), " + std::to_string(size) + " bytes");
  return "";
}

std::shared_ptr<Library> fallback(const std::string& what, const std::string& why) {
  ++n_fallbacks;
  log_cache("fallback to the in-memory JIT for " + what + ": " + why);
  return nullptr;
}

}  // namespace

Library::~Library() {
  if (handle) ::dlclose(handle);
  if (fd >= 0) ::close(fd);
}

Fields base_fields() {
  static const Fields base = [] {
    Fields f;
#ifdef TBEX_VERSION
    f.emplace_back("tbex", TBEX_VERSION);
#else
    f.emplace_back("tbex", "unknown");
#endif
    f.emplace_back("tbex_build", tbex_build());
    f.emplace_back("halide", std::to_string(HALIDE_VERSION_MAJOR) + "." +
                                 std::to_string(HALIDE_VERSION_MINOR) + "." +
                                 std::to_string(HALIDE_VERSION_PATCH));
    f.emplace_back("llvm", std::to_string(Halide::Internal::get_llvm_version()));
    return f;
  }();
  return base;
}

std::string sha256_hex(const void* data, size_t n) {
  Sha256 s;
  s.update(data, n);
  return s.hex();
}

std::string key_of(const Fields& fields) {
  std::string text;
  for (const auto& f : fields) text += f.first + "=" + f.second + "\n";
  return sha256_hex(text.data(), text.size());
}

std::shared_ptr<Library> load_or_build(const Fields& fields, const std::string& what,
                                       const Emitters& emit) {
  if (!cache_enabled()) return nullptr;
  auto t0 = Clock::now();
  const std::string key = key_of(fields);
  const Paths p = paths_of(key);
  const bool force = env_is("TBEX_ALWAYS_COMPILE", "1");
  std::string why;
  if (!force && exists(p.so) && exists(p.json)) {
    if (auto lib = validate(key, p, why)) {
      ++n_hits;
      log_cache("hit " + key.substr(0, 16) + " " + what + ": loaded in " + fmt_ms(ms_since(t0)));
      return lib;
    }
  }
  if (!make_dirs(p.dir)) return fallback(what, "cannot create " + p.dir + ": " + std::strerror(errno));
  FileLock lock(p.lock);
  if (lock.fd < 0) return fallback(what, "cannot open " + p.lock + ": " + std::strerror(errno));
  const double wait_ms = ms_since(t0);
  bool rebuild = false;
  if (!force && (exists(p.so) || exists(p.json))) {
    // Rechecked under the lock: another process may just have published it.
    if (auto lib = validate(key, p, why)) {
      ++n_hits;
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
  double compile_ms = 0;
  if (std::string err = build(key, p, fields, emit, compile_ms); !err.empty())
    return fallback(what, err);
  ++n_compiles;
  if (rebuild) ++n_rebuilds;
  const int fd = ::open(p.so.c_str(), O_RDONLY | O_CLOEXEC);
  auto lib = open_library(p.so, fn_name_of(key), why, fd);
  if (fd >= 0) ::close(fd);
  if (!lib) return fallback(what, "the fresh entry does not load: " + why);
  log_cache("stored " + key.substr(0, 16) + " " + what + " in " + fmt_ms(ms_since(t0)));
  return lib;
}

}  // namespace disk
}  // namespace tbex
