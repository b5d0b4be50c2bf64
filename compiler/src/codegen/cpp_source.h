#pragma once
/** C++ source output: a scheduled pipeline as readable, standalone C++ (NAME.cpp + NAME.h).
 *
 * Starts from Halide's C backend and makes its output build warning-free and fast under g++ and
 * clang (see cpp_source.cpp for what the raw output gets wrong). The files need no Halide or
 * LLVM to build: only a C++17 compiler and, at link time, a Halide runtime object. */
#include <string>
#include <vector>

#include "Halide.h"
#include "lower/pipeline.h"

namespace tbex::codegen {

/** The target a C++ source kernel's schedule is chosen for: `t` without the bf16 dot-product
 * features (Halide's C backend has no bf16 type or dot product), so bf16 inputs get the fp32 FMA
 * form (pair=1), the same arithmetic contract (docs/arithmetic.md). */
Halide::Target cpp_source_target(const Halide::Target& t);

/** Writes DIR/STEM.cpp and DIR/NAME.h (Halide's declarations) for `l` compiled for `target` and
 * returns their paths (source first); STEM is `file_stem`, or NAME when empty. The kernel is
 * `extern "C" int NAME(halide_buffer_t*...)` with the arguments of l.args followed by the
 * output, plus Halide's NAME_argv and NAME_metadata. */
std::vector<std::string> emit_cpp_source(const lower::Lowered& l, const std::string& name,
                                         const Halide::Target& target, const std::string& dir,
                                         const std::string& file_stem = "");

}  // namespace tbex::codegen
