#pragma once
/** Object files made in memory and written with checked writes: LLVM's own file output ends the
 * process on a full disk ("LLVM ERROR: IO failure on output stream"), which no caller can catch.
 * Used by the disk cache and by AOT. */
#include <map>
#include <string>
#include <vector>

#include <Halide.h>

namespace tbex::codegen {

/** The module's object file, compiled in memory. */
std::string object_bytes(const Halide::Module& m);

/** An object file holding the Halide runtime for `t` (and one trivial function, its anchor),
 * compiled in memory. */
std::string runtime_object_bytes(const Halide::Target& t);

/** The runtime target kernels of `t` link: `t` without its instruction-set features (Halide's
 * runtime-compatible target of t and the baseline of its architecture). The runtime's
 * allocation, threads and errors use none of them, so one object serves every CPU of the
 * architecture, and it can be built before the machine that runs it is known. */
Halide::Target runtime_target(const Halide::Target& t);

/** tbex's own kernels that generated code calls (extern stages: tbex_amx_dx, tbex_amx_dx_cols
 * and tbex_amx_dw, tbex/amx_dx.h, tbex/amx_dx_cols.h and tbex/amx_dw.h) by
 * symbol name, for the in-memory JIT (this process's copies). */
std::map<std::string, Halide::JITExtern> jit_externs();

/** The object file of those kernels, compiled at build time and embedded in tbex
 * (cmake/embed_object.cmake): every disk-cached kernel links it (AOT users link them from
 * tbex's runtime library). */
std::string kernels_object_bytes();

/** Writes `bytes` to `path`; UserError naming the file when it cannot (a full disk, a
 * read-only directory). */
void write_object(const std::string& path, const std::string& bytes);

/** Halide's static-library writer for `objects` -> `archive`, after checking the filesystem has
 * room for it (that writer, like LLVM's, cannot report a full disk): UserError otherwise. */
void write_static_library(const std::vector<std::string>& objects, const Halide::Target& t,
                          const std::string& archive);

}  // namespace tbex::codegen
