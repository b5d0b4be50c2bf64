#include "codegen/disk_cache_entry.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "support/files.h"
#include "support/hash.h"
#include "support/json.h"
#include "tbex/errors.h"

namespace tbex::disk {
namespace {

#if defined(__x86_64__)
constexpr int kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr int kHostMachine = EM_AARCH64;
#else
constexpr int kHostMachine = -1;  // not checked
#endif

/** Whether the file is a whole ELF shared object: dlopen maps its segments and touches them,
 * and a segment past the end of the file is a SIGBUS, not an error (a truncated file whose
 * sidecar was rewritten to match passes the checksum). */
bool elf_whole(int fd, int64_t size, std::string& why) {
  Elf64_Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN || eh.e_phentsize != sizeof(Elf64_Phdr))
    return why = "not a 64-bit ELF shared object", false;
  if (kHostMachine >= 0 && eh.e_machine != kHostMachine)
    return why = "an ELF object for another machine (" + std::to_string(eh.e_machine) + ")", false;
  const uint64_t usize = uint64_t(size);
  auto inside = [&](uint64_t off, uint64_t len) { return off <= usize && len <= usize - off; };
  if (!inside(eh.e_phoff, uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr)) ||
      !inside(eh.e_shoff, uint64_t(eh.e_shnum) * eh.e_shentsize))
    return why = "ELF headers past the end of the file (truncated)", false;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (::pread(fd, &ph, sizeof ph, off_t(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
      return why = "unreadable ELF program header", false;
    if (ph.p_type == PT_LOAD && !inside(ph.p_offset, ph.p_filesz))
      return why = "an ELF segment past the end of the file (truncated)", false;
  }
  return true;
}

/** Opens the .so and finds its entry points; nullptr and `why` otherwise. With fd >= 0 the
 * library is loaded through /proc/self/fd, i.e. exactly the file that was checksummed (a file
 * renamed over `so` meanwhile is not picked up, and an older build of the same path still loaded
 * in this process is not reused by name). */
std::shared_ptr<Library> open_library(const std::string& so, const std::string& fn, std::string& why,
                                      int fd) {
  // A private copy of the descriptor, kept open by the Library: a number reused after close
  // would make dlopen return the library first loaded through the same /proc/self/fd name. The
  // copy shares the open file and so keeps its shared (in-use) flock.
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

/** What load_entry checks in a sidecar. */
struct Sidecar {
  std::string key, function, so_sha256;
  int64_t so_size = -1;
};

bool read_sidecar(const std::string& path, Sidecar& s, std::string& why) {
  const std::string text = support::read_text(path);
  if (text.empty()) return why = "sidecar missing or empty", false;
  try {
    const json::Value v = json::parse(text, "sidecar");
    s.key = json::as_string(json::member(v, "key", "sidecar"), "key");
    s.function = json::as_string(json::member(v, "function", "sidecar"), "function");
    s.so_sha256 = json::as_string(json::member(v, "so_sha256", "sidecar"), "so_sha256");
    s.so_size = json::as_int(json::member(v, "so_size", "sidecar"), "so_size");
  } catch (const UserError& e) {
    return why = std::string("corrupt sidecar: ") + e.what(), false;
  }
  return true;
}

}  // namespace

Library::~Library() {
  if (handle) ::dlclose(handle);
  if (fd >= 0) ::close(fd);
}

Paths paths_of(const std::string& root, const std::string& key) {
  Paths p;
  p.dir = root + "/" + key.substr(0, 2);
  p.so = p.dir + "/" + key + ".so";
  p.json = p.dir + "/" + key + ".json";
  p.lock = p.dir + "/" + key + ".lock";
  return p;
}

std::string fn_name_of(const std::string& key) { return "tbex_" + key.substr(0, 24); }

std::string sidecar_text(const std::string& key, const std::string& fn, const Fields& fields,
                         int64_t so_size, const std::string& so_sha256, double compile_ms) {
  auto get = [&](const char* name) {
    for (const auto& f : fields)
      if (f.first == name) return f.second;
    return std::string();
  };
  const std::string threads = get("threads");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  json::Value all = json::Value::object();
  for (const auto& [name, value] : fields) all[name] = value;
  return json::to_text({{"key", key},
                        {"function", fn},
                        {"problem", get("problem")},
                        {"schedule", get("schedule")},
                        {"schedule_requested", get("schedule_requested")},
                        {"threads", threads.empty() ? 0 : std::stoi(threads)},
                        {"so_size", so_size},
                        {"so_sha256", so_sha256},
                        {"created", std::round(now * 1e3) / 1e3},
                        {"compile_ms", std::round(compile_ms * 10) / 10},
                        {"fields", all}});
}

std::shared_ptr<Library> load_entry(const std::string& key, const Paths& p, std::string& why) {
  Sidecar side;
  if (!read_sidecar(p.json, side, why)) return nullptr;
  if (side.key != key) return why = "sidecar key mismatch (corrupt sidecar)", nullptr;
  const int fd = ::open(p.so.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return why = "shared object missing or unreadable", nullptr;
  // In use from here on: eviction skips the entry (the lock goes with the Library's descriptor).
  support::flock_retry(fd, LOCK_SH);
  std::string hex;
  int64_t size = 0;
  std::shared_ptr<Library> lib;
  if (!support::sha256_fd(fd, hex, size))
    why = "shared object unreadable";
  else if (side.so_size != size)
    why = "size mismatch (truncated?): " + std::to_string(size) + " bytes, sidecar says " +
          std::to_string(side.so_size);
  else if (side.so_sha256 != hex)
    why = "sha256 mismatch (corrupt)";
  else if (elf_whole(fd, size, why))
    lib = open_library(p.so, side.function, why, fd);
  if (lib) ::futimens(fd, nullptr);  // last use, the order eviction goes by
  ::close(fd);
  return lib;
}

}  // namespace tbex::disk
