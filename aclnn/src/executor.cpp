#include "executor.h"

#include <mutex>
#include <unordered_map>

#include "status.h"
#include "stream.h"

namespace tbex::aclnn {
namespace {

// Live executors. Looking a handle up here (never dereferencing it first) is what makes a
// second run, a destroyed executor or a stray pointer an error instead of a crash.
std::mutex registry_mu;
std::unordered_map<aclOpExecutor*, std::shared_ptr<aclOpExecutor>>& registry() {
  static auto* live = new std::unordered_map<aclOpExecutor*, std::shared_ptr<aclOpExecutor>>;
  return *live;  // never destroyed: executors may be released during static destruction
}

const char* kNotLive =
    "executor is not a live executor (it has already run, was destroyed, or was not made by a "
    "...GetWorkspaceSize call)";

/** Takes executor out of the registry after checking it and the workspace (under one lock, so
 * two threads cannot both claim it). */
std::shared_ptr<aclOpExecutor> claim(const char* api, aclOpExecutor* executor, void* workspace,
                                     uint64_t workspace_size) {
  std::lock_guard<std::mutex> lock(registry_mu);
  auto it = registry().find(executor);
  require(it != registry().end(), ACLNN_ERR_PARAM_INVALID, kNotLive);
  const aclOpExecutor& e = *it->second;
  require(e.api == api, ACLNN_ERR_PARAM_INVALID,
          "executor was made for " + e.api + ", not for " + api);
  require(workspace != nullptr || workspace_size == 0, ACLNN_ERR_PARAM_INVALID,
          "workspace is null but workspaceSize is " + std::to_string(workspace_size));
  require(workspace_size >= e.workspace_bytes, ACLNN_ERR_PARAM_INVALID,
          "workspaceSize " + std::to_string(workspace_size) + " is smaller than the " +
              std::to_string(e.workspace_bytes) + " bytes " + api +
              "GetWorkspaceSize reported");
  std::shared_ptr<aclOpExecutor> owned = std::move(it->second);
  registry().erase(it);
  return owned;
}

void give_back(std::shared_ptr<aclOpExecutor> e) {
  std::lock_guard<std::mutex> lock(registry_mu);
  aclOpExecutor* handle = e.get();
  registry().emplace(handle, std::move(e));
}

}  // namespace

aclOpExecutor* register_executor(std::unique_ptr<aclOpExecutor> e) {
  std::shared_ptr<aclOpExecutor> owned(std::move(e));
  give_back(owned);
  return owned.get();
}

aclnnStatus run_executor(const char* api, void* workspace, uint64_t workspace_size,
                         aclOpExecutor* executor, aclrtStream stream) {
  return guarded(api, [&] {
    require_not_null(executor, "executor");
    std::shared_ptr<Stream> queue;
    if (stream) {
      queue = find_stream(stream);
      require(queue != nullptr, ACLNN_ERR_PARAM_INVALID,
              "stream is not a live stream (made by aclrtCreateStream and not destroyed)");
    }
    std::shared_ptr<aclOpExecutor> e = claim(api, executor, workspace, workspace_size);
    if (!queue) {
      e->run(workspace, workspace_size);  // e is freed on return, whatever the outcome
      return ACLNN_SUCCESS;
    }
    std::string name = api;
    bool queued = queue->enqueue([e, workspace, workspace_size, name] {
      try {
        e->run(workspace, workspace_size);
      } catch (const std::exception& err) {
        throw std::runtime_error(name + ": " + err.what());
      }
    });
    if (!queued) {
      give_back(std::move(e));
      throw ApiError(ACLNN_ERR_PARAM_INVALID, "stream is being destroyed");
    }
    return ACLNN_SUCCESS;
  });
}

}  // namespace tbex::aclnn

extern "C" ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  using namespace tbex::aclnn;
  return guarded("aclDestroyAclOpExecutor", [&] {
    if (!executor) return ACLNN_SUCCESS;
    std::shared_ptr<aclOpExecutor> dead;  // freed after the lock is released
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = registry().find(executor);
    require(it != registry().end(), ACLNN_ERR_PARAM_INVALID, kNotLive);
    dead = std::move(it->second);
    registry().erase(it);
    return ACLNN_SUCCESS;
  });
}
