// The C layer's machinery with failures injected where the public API cannot produce them: a
// stream task that throws, an executor whose run fails (sync and async), exception mapping.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <new>
#include <string>
#include <vector>

#include "aclnnop/aclnn_convolution_backward.h"
#include "executor.h"
#include "status.h"
#include "stream.h"
#include "tbex/errors.h"

namespace tbex::aclnn {
namespace {

TEST(AclnnStreamInternals, RunsTasksInOrder) {
  Stream s;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(s.enqueue([&order, i] { order.push_back(i); }));
  std::string msg;
  ASSERT_EQ(s.synchronize(&msg), ACLNN_SUCCESS);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(AclnnStreamInternals, KeepsFirstFailureUntilSynchronize) {
  Stream s;
  bool later_ran = false;
  s.enqueue([] { throw std::runtime_error("first failure"); });
  s.enqueue([] { throw std::runtime_error("second failure"); });
  s.enqueue([&] { later_ran = true; });
  std::string msg;
  EXPECT_EQ(s.synchronize(&msg), ACLNN_ERR_RUNTIME_ERROR);
  EXPECT_EQ(msg, "first failure");
  EXPECT_TRUE(later_ran);
  msg.clear();
  EXPECT_EQ(s.synchronize(&msg), ACLNN_SUCCESS) << "the failure is reported once";
  s.close();
  EXPECT_FALSE(s.enqueue([] {}));
}

TEST(AclnnStreamInternals, SynchronizeReportsQueuedFailure) {
  aclrtStream h = nullptr;
  ASSERT_EQ(aclrtCreateStream(&h), ACLNN_SUCCESS);
  std::shared_ptr<Stream> s = find_stream(h);
  ASSERT_NE(s, nullptr);
  s->enqueue([] { throw std::runtime_error("kernel exploded"); });
  EXPECT_EQ(aclrtSynchronizeStream(h), ACLNN_ERR_RUNTIME_ERROR);
  const std::string msg = aclGetRecentErrMsg();
  EXPECT_NE(msg.find("aclrtSynchronizeStream"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel exploded"), std::string::npos) << msg;
  EXPECT_EQ(aclrtSynchronizeStream(h), ACLNN_SUCCESS);
  s->enqueue([] { throw std::runtime_error("at destroy"); });
  s.reset();
  EXPECT_EQ(aclrtDestroyStream(h), ACLNN_ERR_RUNTIME_ERROR);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("at destroy"), std::string::npos);
  EXPECT_EQ(find_stream(h), nullptr);
}

/** An executor of aclnnConvolutionBackward whose run is `fail` (which may also succeed). */
aclOpExecutor* failing_executor(std::function<void()> fail) {
  auto e = std::make_unique<aclOpExecutor>();
  e->api = "aclnnConvolutionBackward";
  e->workspace_bytes = 0;
  e->run = [fail](void*, uint64_t) { fail(); };
  return register_executor(std::move(e));
}

TEST(AclnnExecutorInternals, FailedAsyncRunIsReportedBySynchronize) {
  aclrtStream h = nullptr;
  ASSERT_EQ(aclrtCreateStream(&h), ACLNN_SUCCESS);
  aclOpExecutor* e = failing_executor([] { throw InternalError("pack went wrong"); });
  EXPECT_EQ(aclnnConvolutionBackward(nullptr, 0, e, h), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(h), ACLNN_ERR_RUNTIME_ERROR);
  const std::string msg = aclGetRecentErrMsg();
  EXPECT_NE(msg.find("aclnnConvolutionBackward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pack went wrong"), std::string::npos) << msg;
  EXPECT_EQ(aclnnConvolutionBackward(nullptr, 0, e, nullptr), ACLNN_ERR_PARAM_INVALID)
      << "a failed run still consumes the executor";
  EXPECT_EQ(aclrtDestroyStream(h), ACLNN_SUCCESS);
}

// With a stream, aclnnConvolutionBackward only queues: it returns while the stream's thread is
// still busy with earlier work, and the run happens after it.
TEST(AclnnExecutorInternals, RunOnAStreamReturnsBeforeItRuns) {
  aclrtStream h = nullptr;
  ASSERT_EQ(aclrtCreateStream(&h), ACLNN_SUCCESS);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  find_stream(h)->enqueue([gate] { gate.wait(); });
  std::atomic<bool> ran{false};
  aclOpExecutor* e = failing_executor([&ran] { ran = true; });
  ASSERT_EQ(aclnnConvolutionBackward(nullptr, 0, e, h), ACLNN_SUCCESS);
  EXPECT_FALSE(ran.load());
  release.set_value();
  ASSERT_EQ(aclrtSynchronizeStream(h), ACLNN_SUCCESS);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(aclrtDestroyStream(h), ACLNN_SUCCESS);
}

TEST(AclnnExecutorInternals, FailedSyncRunMapsTheException) {
  struct Case {
    std::function<void()> fail;
    aclnnStatus status;
  } cases[] = {
      {[] { throw UserError(code::kAclnnInvalid, "gradInput", "view changed"); }, ACLNN_ERR_PARAM_INVALID},
      {[] { throw InternalError("bug"); }, ACLNN_ERR_INNER},
      {[] { throw std::bad_alloc(); }, ACLNN_ERR_INNER},
      {[] { throw 42; }, ACLNN_ERR_INNER},
  };
  for (const Case& c : cases) {
    aclOpExecutor* e = failing_executor(c.fail);
    EXPECT_EQ(aclnnConvolutionBackward(nullptr, 0, e, nullptr), c.status);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("aclnnConvolutionBackward: "), std::string::npos);
    EXPECT_EQ(aclDestroyAclOpExecutor(e), ACLNN_ERR_PARAM_INVALID) << "consumed by the run";
  }
}

TEST(AclnnExecutorInternals, ExecutorOfAnotherOpIsRejected) {
  auto made = std::make_unique<aclOpExecutor>();
  made->api = "aclnnSomethingElse";
  made->run = [](void*, uint64_t) {};
  aclOpExecutor* e = register_executor(std::move(made));
  EXPECT_EQ(aclnnConvolutionBackward(nullptr, 0, e, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("aclnnSomethingElse"), std::string::npos);
  EXPECT_EQ(aclDestroyAclOpExecutor(e), ACLNN_SUCCESS);
}

}  // namespace
}  // namespace tbex::aclnn
