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

/** Writes DIR/NAME.cpp and DIR/NAME.h for `l` compiled for `target` and returns their paths
 * (source first). The kernel is `extern "C" int NAME(halide_buffer_t*...)` with the arguments
 * of l.args followed by the output, plus Halide's NAME_argv and NAME_metadata. */
std::vector<std::string> emit_cpp_source(const lower::Lowered& l, const std::string& name,
                                         const Halide::Target& target, const std::string& dir);

}  // namespace tbex::codegen
