#include "stream.h"

#include <unordered_map>

#include "status.h"

namespace tbex::aclnn {

Stream::Stream() : worker_([this] { loop(); }) {}

Stream::~Stream() { close(); }

bool Stream::enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return false;
    queue_.push_back(std::move(task));
  }
  work_cv_.notify_one();
  return true;
}

aclnnStatus Stream::synchronize(std::string* message) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  if (!failed_) return ACLNN_SUCCESS;
  failed_ = false;
  *message = std::move(failure_);
  failure_.clear();
  return ACLNN_ERR_RUNTIME_ERROR;
}

void Stream::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  work_cv_.notify_one();
  if (worker_.joinable()) worker_.join();
}

void Stream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closing, and everything queued has run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string error;
    try {
      task();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception (tbex bug)";
    }
    task = nullptr;  // release what the task owns (its executor) before reporting idle
    lock.lock();
    busy_ = false;
    if (!error.empty() && !failed_) {
      failed_ = true;
      failure_ = std::move(error);
    }
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

namespace {

std::mutex registry_mu;
std::unordered_map<aclrtStream, std::shared_ptr<Stream>>& registry() {
  static auto* streams = new std::unordered_map<aclrtStream, std::shared_ptr<Stream>>;
  return *streams;  // never destroyed: a stream may outlive static destruction order
}

}  // namespace

std::shared_ptr<Stream> find_stream(aclrtStream handle) {
  std::lock_guard<std::mutex> lock(registry_mu);
  auto it = registry().find(handle);
  return it == registry().end() ? nullptr : it->second;
}

}  // namespace tbex::aclnn

using namespace tbex::aclnn;

extern "C" {

ACLNN_API aclnnStatus aclrtCreateStream(aclrtStream* stream) {
  return guarded("aclrtCreateStream", [&] {
    require_not_null(stream, "stream");
    auto s = std::make_shared<Stream>();
    aclrtStream handle = s.get();
    std::lock_guard<std::mutex> lock(registry_mu);
    registry().emplace(handle, std::move(s));
    *stream = handle;
    return ACLNN_SUCCESS;
  });
}

ACLNN_API aclnnStatus aclrtSynchronizeStream(aclrtStream stream) {
  return guarded("aclrtSynchronizeStream", [&] {
    if (!stream) return ACLNN_SUCCESS;
    std::shared_ptr<Stream> s = find_stream(stream);
    require(s != nullptr, ACLNN_ERR_PARAM_INVALID, "stream is not a live stream");
    std::string message;
    aclnnStatus status = s->synchronize(&message);
    if (status != ACLNN_SUCCESS) throw ApiError(status, "a queued op failed: " + message);
    return status;
  });
}

ACLNN_API aclnnStatus aclrtDestroyStream(aclrtStream stream) {
  return guarded("aclrtDestroyStream", [&] {
    require_not_null(stream, "stream");
    std::shared_ptr<Stream> s;
    {
      std::lock_guard<std::mutex> lock(registry_mu);
      auto it = registry().find(stream);
      require(it != registry().end(), ACLNN_ERR_PARAM_INVALID, "stream is not a live stream");
      s = std::move(it->second);
      registry().erase(it);
    }
    std::string message;
    aclnnStatus status = s->synchronize(&message);
    s->close();
    if (status != ACLNN_SUCCESS) throw ApiError(status, "a queued op failed: " + message);
    return status;
  });
}

}  // extern "C"
