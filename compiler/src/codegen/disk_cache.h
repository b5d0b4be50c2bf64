#pragma once
/** Content-addressed on-disk cache of compiled kernels as shared objects.
 *
 * Entry: <dir>/<key[:2]>/<key>.so (the kernel and its own copy of the Halide runtime, linked from
 * <dir>/runtime/<runtime key>.o; exports NAME_argv and the runtime's handler setters only),
 * <key>.json (sidecar: the key fields, size and sha256 of the .so, created time, schedule; used
 * to validate), <key>.lock (flocked only while compiling). key = sha256 of the key fields.
 * Publishing is a write to a temp file in the same directory and an atomic rename, so readers
 * never see a partial file; an invalid entry (checksum mismatch, dlopen or symbol failure) is
 * deleted and rebuilt under the lock. Past TBEX_CACHE_MAX_MB, least recently used entries are
 * evicted, never one a process has loaded (codegen/disk_cache_entry.h). */
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tbex::disk {

using Fields = std::vector<std::pair<std::string, std::string>>;

/** A loaded entry. The .so stays mapped while this lives. */
struct Library {
  void* handle = nullptr;
  int (*argv)(void** args) = nullptr;  ///< Halide's NAME_argv: args[0] = &user_context, then buffers
  /** The .so's own runtime's setters (halide_set_custom_do_par_for, halide_set_error_handler). */
  void* (*set_do_par_for)(void* fn) = nullptr;
  void* (*set_error_handler)(void* fn) = nullptr;
  void* (*set_malloc)(void* fn) = nullptr;  ///< halide_set_custom_malloc
  void* (*set_free)(void* fn) = nullptr;    ///< halide_set_custom_free
  std::string path;
  /** The descriptor the library was loaded through (/proc/self/fd/N), held open while it is
   * loaded: the dynamic loader matches already-loaded objects by that name, so N must not name
   * another library's file meanwhile; it also holds the entry's shared (in-use) flock. -1 when
   * loaded by path. */
  int fd = -1;
  ~Library();
};

/** The fields every key starts with: tbex version and build, Halide and LLVM versions. */
Fields base_fields();

std::string key_of(const Fields& fields);

/** The file name the runtime object for `runtime_id` ships under beside tbex (runtime/ next to
 * the binary holding this code, or one directory up: the Python package's tbex/runtime/ for
 * _C and bin/tbexc), written at build time by tools/runtime_object.cpp. Named by the Halide and
 * LLVM versions and the runtime target only: the runtime is Halide's code, whatever tbex build
 * links it. The disk cache links it instead of compiling its own (~0.6 s on a fresh cache). */
std::string prebuilt_runtime_name(const std::string& runtime_id);

/** How to write an entry's objects. */
struct Emitters {
  /** The bytes of the kernel's object file defining function `fn_name`, without the runtime.
   * In memory: the cache writes them with checked writes (LLVM's own file output ends the
   * process on a full disk). */
  std::function<std::string(const std::string& fn_name)> kernel;
  /** The bytes of an object file holding the Halide runtime for the kernels' target; compiled
   * once per `runtime_id` (with base_fields()) and kept under <dir>/runtime/, linked into every
   * .so. */
  std::function<std::string()> runtime;
  std::string runtime_id;
  /** The bytes of the object file of tbex's own kernels that generated code calls
   * (codegen::kernels_object_bytes); written once per tbex build under <dir>/runtime/, linked
   * into every .so. */
  std::function<std::string()> kernels;
};

/** The entry for `fields`: loaded if present and valid, else compiled with `emit`, linked and
 * published. nullptr when the disk cache is off or cannot be used (no C++ compiler, unwritable
 * directory, link failure): the caller falls back to the in-memory JIT; the reason is logged under
 * TBEX_LOG=cache. `what` names the kernel in log lines.  A failing `emit`, a full disk or a
 * directory removed meanwhile (`cache clear`) is a fallback too. */
std::shared_ptr<Library> load_or_build(const Fields& fields, const std::string& what,
                                       const Emitters& emit);

}  // namespace tbex::disk
