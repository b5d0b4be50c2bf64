#pragma once
/** Ahead-of-time kernels: a Problem compiled to files a C or C++ program links without tbex's
 * compiler, Halide or LLVM.
 *
 * A kernel NAME is emitted without the Halide runtime (Target::NoRuntime), so many kernels share
 * one runtime (emit_aot_runtime). What a user links: NAME.a + the runtime's .a +
 * libtbex_runtime.a, whose aot_runtime object (pulled in only by the kernel wrappers) installs
 * tbex's thread pool as the Halide runtime's do_par_for: tbex::set_num_threads and
 * TBEX_NUM_THREADS control AOT kernels exactly as they do JIT kernels. */
#include <iosfwd>
#include <string>
#include <vector>

#include "tbex/problem.h"

namespace tbex {

struct AotOptions {
  std::string name;     ///< C identifier: the kernel's function name and the files' stem
  std::string out_dir;  ///< created when missing
  /** Any of "static_library" (NAME.a, with the dense-pointer wrapper), "object" (NAME.o, the
   * Halide kernel alone), "header" (NAME.h), "cpp" (C++ source of the kernel). */
  std::vector<std::string> emit{"static_library", "header"};
  /** "host" or anything Halide::Target parses, e.g. "x86-64-linux-avx2-fma-f16c". */
  std::string target = "host";
  std::string schedule = "auto";  ///< "auto" or a registry name: decided by select() as for the JIT
  std::string variant;            ///< a tile variant of the named schedule ("" = its own choice)
  /** Emit only the shared Halide runtime (NAME.a + NAME.o); the problem is not used. */
  bool runtime_only = false;
};

/** Writes the kernel's files and NAME.manifest.json; returns the paths written. UserError for a
 * bad name, emit kind, target or schedule (param names which). */
std::vector<std::string> emit_aot(const Problem& problem, const AotOptions& options);

/** The shared Halide runtime for NoRuntime kernels of `options.target`: NAME.a, NAME.o and
 * NAME.manifest.json. */
std::vector<std::string> emit_aot_runtime(const AotOptions& options);

/** The tbexc command line (argv without the program name): emits and prints the files written
 * to `out`; returns 0, or 2 after printing a UserError (code, param, message) to `err`. `prog`
 * is the command's name in the usage text and messages. */
int aot_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
             const std::string& prog = "tbexc");

}  // namespace tbex
