#pragma once
/** Problems whose batched operands exceed what one kernel indexes (2^31 elements): run as a
 * kernel for a slice of the batch, once per slice (batched.cpp). */
#include <memory>

#include "tbex/kernel.h"

namespace tbex::codegen {

/** Whether every operand of `p` fits one kernel's indexing (TBEX_KERNEL_MAX_ELEMENTS). */
bool fits_one_kernel(const Problem& p);

/** nullptr when every operand of `p` fits one kernel; else a kernel over batch slices. */
std::shared_ptr<const Kernel> compile_batched(const Problem& p, const CompileOptions& request);

}  // namespace tbex::codegen
