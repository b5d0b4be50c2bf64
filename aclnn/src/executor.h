#pragma once
/** aclOpExecutor: a planned op that runs once. The second phase of the two-phase API
 * (workspace checks, run-once, synchronous or on a stream) is the same for every op. */
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "aclnn/acl_meta.h"

struct aclOpExecutor {
  std::string api;  ///< the second-phase entry point that may run it, e.g. "aclnnConvolutionBackward"
  uint64_t workspace_bytes = 0;
  /** Runs on the caller's workspace (at least workspace_bytes); throws on failure. */
  std::function<void(void* workspace, uint64_t workspace_size)> run;
};

namespace tbex::aclnn {

/** Makes e live and returns its handle. */
aclOpExecutor* register_executor(std::unique_ptr<aclOpExecutor> e);

/** The second phase: checks the executor, workspace and stream (errors leave the executor
 * live), then consumes the executor and runs it now (null stream) or queues it. */
aclnnStatus run_executor(const char* api, void* workspace, uint64_t workspace_size,
                         aclOpExecutor* executor, aclrtStream stream);

}  // namespace tbex::aclnn
