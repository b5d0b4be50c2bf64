#pragma once
/** aclrtStream on the CPU: one worker thread running queued tasks in FIFO order. A task reports
 * failure by throwing; the stream keeps the first failure until the next synchronize(). */
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "aclnn/acl_meta.h"

namespace tbex::aclnn {

class Stream {
 public:
  using Task = std::function<void()>;

  Stream();
  ~Stream();  ///< close()s
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /** Queues task; false once close() has begun (the task is then not run). */
  bool enqueue(Task task);
  /** Waits until the queue is empty and idle. Returns ACLNN_SUCCESS, or
   * ACLNN_ERR_RUNTIME_ERROR with the first failure since the last call in *message (cleared). */
  aclnnStatus synchronize(std::string* message);
  /** Runs what is queued, then stops and joins the worker. Idempotent. */
  void close();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Task> queue_;
  bool busy_ = false, closing_ = false;
  bool failed_ = false;
  std::string failure_;
  std::thread worker_;  // last: starts after the state above exists
};

/** The live stream behind a handle, or null for a handle aclrtCreateStream did not return (or
 * that was destroyed). */
std::shared_ptr<Stream> find_stream(aclrtStream handle);

}  // namespace tbex::aclnn
