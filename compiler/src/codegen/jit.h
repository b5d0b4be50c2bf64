#pragma once
/** JIT compilation of a select() decision, through the in-process kernel cache (bounded, LRU)
 * and the on-disk cache. The public tbex::compile() (tune layer) adds TBEX_TUNE on top. */
#include <memory>
#include <string>
#include <vector>

#include "tbex/kernel.h"

namespace tbex::codegen {

/** Selects for `request` at num_threads() on the host and returns the compiled kernel. */
std::shared_ptr<const Kernel> jit_compile(const Problem& problem, const CompileOptions& request);

/** The strides (elements, outermost first) of a C-contiguous tensor of `shape`: what an empty
 * TensorArg::strides means. */
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);

/** Writes the Halide runtime object cached kernels link into `dir` (made if missing) under its
 * prebuilt name (disk::prebuilt_runtime_name) and returns its path; UserError if it cannot. */
std::string write_prebuilt_runtime(const std::string& dir);

}  // namespace tbex::codegen
