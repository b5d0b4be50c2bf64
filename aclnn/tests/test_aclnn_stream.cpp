// aclnnConvolutionBackward on a stream (aclrtCreateStream): runs are queued on the stream's
// thread, return at once, and are complete after aclrtSynchronizeStream / aclrtDestroyStream.
#include <gtest/gtest.h>

#include <thread>

#include "aclnn_test_util.h"

namespace aclnn_test {
namespace {

/** One planned 3D problem with all three gradients requested. */
struct Job {
  Geometry g;
  std::unique_ptr<HostTensor> x, w, dy, dx, dw, db;
  std::vector<double> xv, wv, yv;
  std::vector<unsigned char> ws;
  uint64_t ws_size = 0;
  aclOpExecutor* exec = nullptr;

  Job(std::vector<int64_t> xs, std::vector<int64_t> ws_, unsigned seed) {
    g.x = std::move(xs);
    g.w = std::move(ws_);
    g.stride = {1, 2, 1};
    g.padding = {1, 0, 1};
    g.dilation = {1, 1, 1};
    g.output_padding = {0, 0, 0};
    std::mt19937 rng(seed);
    x = std::make_unique<HostTensor>(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW);
    w = std::make_unique<HostTensor>(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW);
    dy = std::make_unique<HostTensor>(g.y(), ACL_FLOAT, ACL_FORMAT_NCDHW);
    dx = std::make_unique<HostTensor>(g.x, ACL_FLOAT, ACL_FORMAT_NCDHW);
    dw = std::make_unique<HostTensor>(g.w, ACL_FLOAT, ACL_FORMAT_NCDHW);
    db = std::make_unique<HostTensor>(std::vector<int64_t>{g.cout()}, ACL_FLOAT, ACL_FORMAT_ND);
    xv = x->fill_random(rng);
    wv = w->fill_random(rng);
    yv = dy->fill_random(rng);
    IntArray bias({g.cout()}), stride(g.stride), padding(g.padding), dilation(g.dilation),
        out_pad(g.output_padding);
    BoolArray mask({true, true, true});
    EXPECT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(
                  dy->get(), x->get(), w->get(), bias.handle, stride.handle, padding.handle,
                  dilation.handle, false, out_pad.handle, 1, mask.handle, 0, dx->get(), dw->get(),
                  db->get(), &ws_size, &exec),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    ws.assign(ws_size, 0);
  }
  aclnnStatus run(aclrtStream s) { return aclnnConvolutionBackward(ws.data(), ws_size, exec, s); }
  void check() const {
    Reference r = reference(g, xv, wv, yv);
    expect_close("gradInput", *dx, r.dx, r.dx_abs, 2e-5);
    expect_close("gradWeight", *dw, r.dw, r.dw_abs, 2e-5);
    expect_close("gradBias", *db, r.db, r.db_abs, 2e-5);
  }
};

TEST(AclnnStream, QueuedRunsAreCompleteAfterSynchronize) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  ASSERT_NE(s, nullptr);
  std::vector<std::unique_ptr<Job>> jobs;
  jobs.push_back(std::make_unique<Job>(std::vector<int64_t>{2, 4, 4, 6, 5}, std::vector<int64_t>{6, 4, 3, 2, 3}, 1));
  jobs.push_back(std::make_unique<Job>(std::vector<int64_t>{1, 8, 3, 9, 7}, std::vector<int64_t>{4, 8, 2, 3, 3}, 2));
  jobs.push_back(std::make_unique<Job>(std::vector<int64_t>{2, 4, 4, 6, 5}, std::vector<int64_t>{6, 4, 3, 2, 3}, 3));
  for (auto& j : jobs) ASSERT_EQ(j->run(s), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  // Queued means consumed: a second run is an error even before the first has finished.
  EXPECT_EQ(jobs[0]->run(s), ACLNN_ERR_PARAM_INVALID);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  for (auto& j : jobs) j->check();
  EXPECT_EQ(aclrtDestroyStream(s), ACLNN_SUCCESS) << aclGetRecentErrMsg();
}

TEST(AclnnStream, DestroyFinishesQueuedWork) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACLNN_SUCCESS);
  Job j({1, 4, 3, 5, 5}, {4, 4, 2, 2, 2}, 4);
  ASSERT_EQ(j.run(s), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  ASSERT_EQ(aclrtDestroyStream(s), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  j.check();
}

TEST(AclnnStream, TwoStreamsRunIndependently) {
  aclrtStream a = nullptr, b = nullptr;
  ASSERT_EQ(aclrtCreateStream(&a), ACLNN_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&b), ACLNN_SUCCESS);
  EXPECT_NE(a, b);
  Job ja({2, 4, 4, 6, 5}, {6, 4, 3, 2, 3}, 5), jb({1, 8, 3, 9, 7}, {4, 8, 2, 3, 3}, 6);
  ASSERT_EQ(ja.run(a), ACLNN_SUCCESS);
  ASSERT_EQ(jb.run(b), ACLNN_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(b), ACLNN_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(a), ACLNN_SUCCESS);
  ja.check();
  jb.check();
  EXPECT_EQ(aclrtDestroyStream(a), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(b), ACLNN_SUCCESS);
}

// Plans and synchronous runs from several threads at once (the API keeps no global call state
// beyond the registries and the per-thread message).
TEST(AclnnThreads, ConcurrentCallers) {
  std::vector<std::unique_ptr<Job>> jobs(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&jobs, t] {
      jobs[t] = t % 2 ? std::make_unique<Job>(std::vector<int64_t>{1, 8, 3, 9, 7}, std::vector<int64_t>{4, 8, 2, 3, 3}, 20 + t)
                      : std::make_unique<Job>(std::vector<int64_t>{2, 4, 4, 6, 5}, std::vector<int64_t>{6, 4, 3, 2, 3}, 20 + t);
      EXPECT_EQ(jobs[t]->run(nullptr), ACLNN_SUCCESS) << aclGetRecentErrMsg();
    });
  for (auto& th : threads) th.join();
  for (auto& j : jobs) j->check();
}

TEST(AclnnStream, HandleErrors) {
  EXPECT_EQ(aclrtCreateStream(nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("stream"), std::string::npos);
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACLNN_SUCCESS);  // the synchronous stream
  EXPECT_EQ(aclrtDestroyStream(nullptr), ACLNN_ERR_PARAM_NULLPTR);
  int not_a_stream = 0;
  EXPECT_EQ(aclrtSynchronizeStream(&not_a_stream), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("stream"), std::string::npos);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("aclrtDestroyStream"), std::string::npos);
}

TEST(AclnnStream, RunOnDestroyedStreamLeavesExecutorUsable) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACLNN_SUCCESS);
  ASSERT_EQ(aclrtDestroyStream(s), ACLNN_SUCCESS);
  Job j({1, 4, 3, 5, 5}, {4, 4, 2, 2, 2}, 7);
  EXPECT_EQ(j.run(s), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(j.dx->touched() + j.dw->touched() + j.db->touched(), 0);
  ASSERT_EQ(j.run(nullptr), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  j.check();
}

}  // namespace
}  // namespace aclnn_test
