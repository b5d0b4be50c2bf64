#include "codegen/objects.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "support/files.h"
#include "tbex/amx_dw.h"
#include "tbex/amx_dx.h"
#include "tbex/amx_dx_cols.h"
#include "tbex/errors.h"

namespace tbex::codegen {

extern const unsigned char kKernelsObject[];  // generated: cmake/embed_object.cmake
extern const size_t kKernelsObjectSize;

std::string object_bytes(const Halide::Module& m) {
  const Halide::Buffer<uint8_t> b = m.compile_to_buffer();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size_in_bytes());
}

std::string runtime_object_bytes(const Halide::Target& t) {
  // A module without NoRuntime links the runtime in; its one function keeps it a valid module.
  Halide::Func anchor("tbex_runtime_anchor");
  anchor() = 0;
  return object_bytes(anchor.compile_to_module({}, "tbex_runtime_anchor", t.without_feature(Halide::Target::NoRuntime)));
}

Halide::Target runtime_target(const Halide::Target& t) {
  using T = Halide::Target;
  Halide::Target base = t;
  for (T::Feature f : {T::SSE41, T::AVX, T::AVX2, T::AVXVNNI, T::FMA, T::FMA4, T::F16C, T::AVX512,
                       T::AVX512_KNL, T::AVX512_Skylake, T::AVX512_Cannonlake,
                       T::AVX512_SapphireRapids, T::AVX512_Zen4, T::AVX512_Zen5, T::AVX10_1,
                       T::X86APX, T::ARMDotProd, T::ARMFp16, T::SVE, T::SVE2})
    base = base.without_feature(f);
  base.processor_tune = T::ProcessorGeneric;
  Halide::Target common;
  if (!base.get_runtime_compatible_target(t, common))
    throw InternalError("no runtime target common to " + t.to_string() + " and " + base.to_string());
  return common;
}

std::map<std::string, Halide::JITExtern> jit_externs() {
  return {{"tbex_amx_dx", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dx))},
          {"tbex_amx_dx_cols", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dx_cols))},
          {"tbex_amx_dw", Halide::JITExtern(Halide::ExternCFunction(&tbex_amx_dw))}};
}

std::string kernels_object_bytes() {
  return std::string(reinterpret_cast<const char*>(kKernelsObject), kKernelsObjectSize);
}

void write_object(const std::string& path, const std::string& bytes) {
  if (std::string why = support::write_file(path, bytes); !why.empty())
    throw UserError(code::kValue, path, why);
}

void write_static_library(const std::vector<std::string>& objects, const Halide::Target& t,
                          const std::string& archive) {
  namespace fs = std::filesystem;
  uintmax_t need = 1 << 20;  // headers and the symbol index
  for (const std::string& o : objects) need += fs::file_size(o);
  const std::string dir = fs::path(archive).parent_path().string();
  struct statvfs st;
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &st) != 0)
    throw UserError(code::kValue, archive, "cannot inspect " + dir + ": " + std::strerror(errno));
  const uintmax_t room = uintmax_t(st.f_bavail) * st.f_frsize;
  user_check(room >= 2 * need, code::kValue, archive.c_str(),
             "only " + std::to_string(room) + " bytes free in " + dir + "; the static library needs about " +
                 std::to_string(need));
  std::error_code ec;
  fs::remove(archive, ec);  // the archive writer appends to an existing file
  Halide::create_static_library(objects, t, archive);
}

}  // namespace tbex::codegen
