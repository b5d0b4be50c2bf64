/** The disk cache's keys: the identity of the tbex build that compiles, and the hash of the
 * fields. */
// Halide.h before <elf.h> (via <link.h>): its ELF enums share names with elf.h's macros.
#include "Halide.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <cstring>

#include "codegen/disk_cache.h"
#include "support/hash.h"
#include "tbex/cache.h"
#include "tbex/version.h"

namespace tbex {

std::string sha256_hex(const std::string& bytes) { return support::sha256_hex(bytes); }

namespace disk {
namespace {

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

/** The GNU build-id of the binary holding this code, else its path, size and modification
 * time: a rebuilt tbex (new schedules, new lowering) never reuses an older build's kernels. */
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

}  // namespace

Fields base_fields() {
  static const Fields base = [] {
    Fields f;
    f.emplace_back("tbex", TBEX_VERSION_STRING);
    f.emplace_back("tbex_build", tbex_build());
    f.emplace_back("halide", std::to_string(HALIDE_VERSION_MAJOR) + "." +
                                 std::to_string(HALIDE_VERSION_MINOR) + "." +
                                 std::to_string(HALIDE_VERSION_PATCH));
    f.emplace_back("llvm", std::to_string(Halide::Internal::get_llvm_version()));
    return f;
  }();
  return base;
}

std::string prebuilt_runtime_name(const std::string& runtime_id) {
  return "halide-" + std::to_string(HALIDE_VERSION_MAJOR) + "." +
         std::to_string(HALIDE_VERSION_MINOR) + "." + std::to_string(HALIDE_VERSION_PATCH) +
         "-llvm" + std::to_string(Halide::Internal::get_llvm_version()) + "-" + runtime_id + ".o";
}

std::string key_of(const Fields& fields) {
  std::string text;
  for (const auto& f : fields) text += f.first + "=" + f.second + "\n";
  return support::sha256_hex(text);
}

}  // namespace disk
}  // namespace tbex
