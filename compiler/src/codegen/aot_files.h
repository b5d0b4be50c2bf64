#pragma once
/** The text files of an AOT kernel that tbex writes itself: NAME.h (C header of the dense and
 * Halide-buffer entries), NAME_wrapper.c (their definitions) and NAME.manifest.json. */
#include <string>
#include <vector>

#include "tbex/problem.h"

namespace tbex::codegen {

/** What the manifest records besides the problem. */
struct AotBuildInfo {
  std::string name, schedule, variant, schedule_detail, target;
  std::string selected_by;  ///< select()'s source: "requested", "tuning database" or "cost model"
  int threads = 1;  ///< thread count the schedule planned for
  bool amx_tiles = false;  ///< the kernel runs AMX tile instructions: its wrapper asks the OS first
  std::vector<std::string> files;
};

/** Extents the kernel's output buffer has (outermost first): dX's (N, D, C1, H*W, 16) is seen as
 * 6HD, dW's (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16) as 7-D; the dense memory is the same. */
std::vector<int64_t> kernel_output_extents(const Problem& p);

std::string aot_header(const Problem& p, const AotBuildInfo& info);
std::string aot_wrapper_source(const Problem& p, const AotBuildInfo& info);

/** NAME.manifest.json of a kernel; `p` null for a runtime-only emission. */
std::string aot_manifest(const Problem* p, const AotBuildInfo& info);

}  // namespace tbex::codegen
