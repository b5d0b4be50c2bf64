// Every invalid argument of aclnnConvolutionBackward[GetWorkspaceSize] returns its status code,
// the message (aclGetRecentErrMsg) names the argument, and no output, workspaceSize or executor
// is written.
#include <gtest/gtest.h>

#include <thread>

#include "aclnn_test_util.h"

namespace aclnn_test {
namespace {

const uint64_t kWsUnset = 0xDEADBEEFull;
aclOpExecutor* const kExecUnset = reinterpret_cast<aclOpExecutor*>(uintptr_t{0x5EED});

/** A valid 3D call (every pointer bound to its object); tests break one thing at a time. */
struct Call {
  Geometry g;
  std::unique_ptr<HostTensor> dy, x, w, dx, dw, db;
  std::unique_ptr<IntArray> bias, stride, padding, dilation, out_pad;
  std::unique_ptr<BoolArray> mask;
  const aclTensor *p_dy, *p_x, *p_w;
  aclTensor *p_dx, *p_dw, *p_db;
  const aclIntArray *p_bias, *p_stride, *p_padding, *p_dilation, *p_out_pad;
  const aclBoolArray* p_mask;
  bool transposed = false;
  int groups = 1;
  int8_t cube = 0;
  uint64_t ws_size = kWsUnset;
  aclOpExecutor* exec = kExecUnset;
  uint64_t* p_ws = &ws_size;
  aclOpExecutor** p_exec = &exec;

  Call() {
    g.x = {2, 4, 5, 6, 6};
    g.w = {6, 4, 3, 3, 3};
    g.stride = {1, 2, 1};
    g.padding = {1, 1, 1};
    g.dilation = {1, 1, 1};
    g.output_padding = {0, 0, 0};
    std::mt19937 rng(7);
    set_dy(g.y());
    set_x(g.x);
    set_w(g.w);
    dy->fill_random(rng);
    x->fill_random(rng);
    w->fill_random(rng);
    set_dx(g.x);
    set_dw(g.w);
    set_db({6});
    set_bias({6});
    set_stride(g.stride);
    set_padding(g.padding);
    set_dilation(g.dilation);
    set_out_pad(g.output_padding);
    set_mask({true, true, true});
  }
  static std::unique_ptr<HostTensor> tensor(const std::vector<int64_t>& dims, aclDataType t,
                                            aclFormat f, Layout l = {}) {
    return std::make_unique<HostTensor>(dims, t, f, l);
  }
  void set_dy(const std::vector<int64_t>& d, aclDataType t = ACL_FLOAT, aclFormat f = ACL_FORMAT_NCDHW) {
    dy = tensor(d, t, f);
    p_dy = dy->get();
  }
  void set_x(const std::vector<int64_t>& d, aclDataType t = ACL_FLOAT, aclFormat f = ACL_FORMAT_NCDHW) {
    x = tensor(d, t, f);
    p_x = x->get();
  }
  void set_w(const std::vector<int64_t>& d, aclDataType t = ACL_FLOAT, aclFormat f = ACL_FORMAT_NCDHW) {
    w = tensor(d, t, f);
    p_w = w->get();
  }
  void set_dx(const std::vector<int64_t>& d, aclDataType t = ACL_FLOAT,
              aclFormat f = ACL_FORMAT_NCDHW, Layout l = {}) {
    dx = tensor(d, t, f, l);
    p_dx = dx->get();
  }
  void set_dw(const std::vector<int64_t>& d, aclDataType t = ACL_FLOAT,
              aclFormat f = ACL_FORMAT_NCDHW, Layout l = {}) {
    dw = tensor(d, t, f, l);
    p_dw = dw->get();
  }
  void set_db(const std::vector<int64_t>& d, aclDataType t = ACL_FLOAT, aclFormat f = ACL_FORMAT_ND) {
    db = tensor(d, t, f);
    p_db = db->get();
  }
  void set_bias(std::vector<int64_t> v) {
    bias = std::make_unique<IntArray>(std::move(v));
    p_bias = bias->handle;
  }
  void set_stride(std::vector<int64_t> v) {
    stride = std::make_unique<IntArray>(std::move(v));
    p_stride = stride->handle;
  }
  void set_padding(std::vector<int64_t> v) {
    padding = std::make_unique<IntArray>(std::move(v));
    p_padding = padding->handle;
  }
  void set_dilation(std::vector<int64_t> v) {
    dilation = std::make_unique<IntArray>(std::move(v));
    p_dilation = dilation->handle;
  }
  void set_out_pad(std::vector<int64_t> v) {
    out_pad = std::make_unique<IntArray>(std::move(v));
    p_out_pad = out_pad->handle;
  }
  void set_mask(std::vector<bool> v) {
    mask = std::make_unique<BoolArray>(std::move(v));
    p_mask = mask->handle;
  }

  aclnnStatus plan() {
    return aclnnConvolutionBackwardGetWorkspaceSize(
        p_dy, p_x, p_w, p_bias, p_stride, p_padding, p_dilation, transposed, p_out_pad, groups,
        p_mask, cube, p_dx, p_dw, p_db, p_ws, p_exec);
  }
  int64_t outputs_touched() const { return dx->touched() + dw->touched() + db->touched(); }
};

/** The call fails with `status`, its message names every string of `names`, nothing written. */
void expect_failure(Call& c, aclnnStatus status, std::vector<std::string> names) {
  const aclnnStatus got = c.plan();
  const std::string msg = aclGetRecentErrMsg();
  EXPECT_EQ(got, status) << msg;
  EXPECT_NE(msg.find("aclnnConvolutionBackwardGetWorkspaceSize"), std::string::npos) << msg;
  for (const std::string& n : names) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  EXPECT_EQ(c.ws_size, kWsUnset);
  EXPECT_EQ(c.exec, kExecUnset);
  EXPECT_EQ(c.outputs_touched(), 0);
  if (got == ACLNN_SUCCESS) aclDestroyAclOpExecutor(c.exec);
}

TEST(AclnnErrors, BaselineIsValid) {
  Call c;
  ASSERT_EQ(c.plan(), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_STREQ(aclGetRecentErrMsg(), "");
  EXPECT_NE(c.exec, kExecUnset);
  EXPECT_NE(c.ws_size, kWsUnset);
  EXPECT_EQ(c.outputs_touched(), 0) << "planning wrote to an output";
  EXPECT_EQ(aclDestroyAclOpExecutor(c.exec), ACLNN_SUCCESS);
}

// ---- null pointers: ACLNN_ERR_PARAM_NULLPTR naming the argument ----

TEST(AclnnErrors, NullMandatoryPointers) {
  struct Case {
    const char* name;
    void (*clear)(Call&);
  };
  const Case cases[] = {
      {"gradOutput", [](Call& c) { c.p_dy = nullptr; }},
      {"input", [](Call& c) { c.p_x = nullptr; }},
      {"weight", [](Call& c) { c.p_w = nullptr; }},
      {"stride", [](Call& c) { c.p_stride = nullptr; }},
      {"padding", [](Call& c) { c.p_padding = nullptr; }},
      {"dilation", [](Call& c) { c.p_dilation = nullptr; }},
      {"outputMask", [](Call& c) { c.p_mask = nullptr; }},
      {"workspaceSize", [](Call& c) { c.p_ws = nullptr; }},
      {"executor", [](Call& c) { c.p_exec = nullptr; }},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Call c;
    k.clear(c);
    expect_failure(c, ACLNN_ERR_PARAM_NULLPTR, {k.name});
  }
}

TEST(AclnnErrors, NullRequestedOutputs) {
  for (int i = 0; i < 3; ++i) {
    Call c;
    const char* names[] = {"gradInput", "gradWeight", "gradBias"};
    SCOPED_TRACE(names[i]);
    (i == 0 ? c.p_dx : i == 1 ? c.p_dw : c.p_db) = nullptr;
    expect_failure(c, ACLNN_ERR_PARAM_NULLPTR, {names[i]});
  }
}

TEST(AclnnErrors, NullBiasSizesWhenGradBiasRequested) {
  Call c;
  c.p_bias = nullptr;
  expect_failure(c, ACLNN_ERR_PARAM_NULLPTR, {"biasSizes"});
}

TEST(AclnnErrors, NullOutputPaddingWhenTransposed) {
  Call c;
  c.transposed = true;
  c.set_w({4, 6, 3, 3, 3});  // [Cin, Cout/groups, k...]
  c.set_dy({2, 6, 5, 11, 6});
  c.p_out_pad = nullptr;
  expect_failure(c, ACLNN_ERR_PARAM_NULLPTR, {"outputPadding"});
}

TEST(AclnnErrors, NullDataOfNonEmptyTensor) {
  const char* names[] = {"gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias"};
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(names[i]);
    Call c;
    const HostTensor* hosts[] = {c.dy.get(), c.x.get(), c.w.get(), c.dx.get(), c.dw.get(), c.db.get()};
    const std::vector<int64_t>& dims = hosts[i]->dims();
    // The same view with no memory behind it.
    aclTensor* null_data = aclCreateTensor(dims.data(), dims.size(), ACL_FLOAT, nullptr, 0,
                                           i == 5 ? ACL_FORMAT_ND : ACL_FORMAT_NCDHW, nullptr, 0, nullptr);
    ASSERT_NE(null_data, nullptr) << aclGetRecentErrMsg();
    const aclTensor** in_slots[] = {&c.p_dy, &c.p_x, &c.p_w};
    aclTensor** out_slots[] = {&c.p_dx, &c.p_dw, &c.p_db};
    if (i < 3) *in_slots[i] = null_data;
    else *out_slots[i - 3] = null_data;
    expect_failure(c, ACLNN_ERR_PARAM_NULLPTR, {names[i], "data"});
    aclDestroyTensor(null_data);
  }
}

// Outputs not requested may be null (and then nothing needs them).
TEST(AclnnErrors, UnrequestedOutputsMayBeNull) {
  Call c;
  c.set_mask({true, false, false});
  c.p_dw = nullptr;
  c.p_db = nullptr;
  c.p_bias = nullptr;
  ASSERT_EQ(c.plan(), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_EQ(aclDestroyAclOpExecutor(c.exec), ACLNN_SUCCESS);
}

// ---- values checked by the C layer: ACLNN_ERR_PARAM_INVALID ----

TEST(AclnnErrors, OutputMaskLength) {
  for (std::vector<bool> m : {std::vector<bool>{true, true}, std::vector<bool>{true, true, true, true},
                              std::vector<bool>{}}) {
    SCOPED_TRACE(m.size());
    Call c;
    c.set_mask(m);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"outputMask", std::to_string(m.size())});
  }
}

TEST(AclnnErrors, UnsupportedDtypes) {
  for (aclDataType t : {ACL_INT32, ACL_DOUBLE, ACL_INT8, ACL_BOOL, ACL_COMPLEX64}) {
    SCOPED_TRACE(t);
    {
      Call c;
      c.set_x(c.g.x, t);
      expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"input", "dtype"});
    }
    {
      Call c;
      c.set_dy(c.g.y(), t);
      expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradOutput", "dtype"});
    }
    {
      Call c;
      c.set_w(c.g.w, t);
      expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"weight", "dtype"});
    }
    {
      Call c;
      c.set_dw(c.g.w, t);
      expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradWeight", "dtype"});
    }
  }
}

TEST(AclnnErrors, FormatsMustFitTheRank) {
  {
    Call c;
    c.set_x(c.g.x, ACL_FLOAT, ACL_FORMAT_NCHW);  // rank 5
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"input", "ACL_FORMAT_NCHW"});
  }
  {
    Call c;
    c.set_w(c.g.w, ACL_FLOAT, ACL_FORMAT_NDHWC);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"weight", "ACL_FORMAT_NDHWC"});
  }
  {
    Call c;
    c.set_dy(c.g.y(), ACL_FLOAT, ACL_FORMAT_NCL);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradOutput", "ACL_FORMAT_NCL"});
  }
  {
    Call c;
    c.set_dx(c.g.x, ACL_FLOAT, ACL_FORMAT_NDC1HWC0);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradInput", "ACL_FORMAT_NDC1HWC0"});
  }
  {
    Call c;
    c.set_db({6}, ACL_FLOAT, ACL_FORMAT_NCL);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradBias", "ACL_FORMAT_NCL"});
  }
  {  // ND is accepted for any rank.
    Call c;
    c.set_x(c.g.x, ACL_FLOAT, ACL_FORMAT_ND);
    c.set_dw(c.g.w, ACL_FLOAT, ACL_FORMAT_ND);
    ASSERT_EQ(c.plan(), ACLNN_SUCCESS) << aclGetRecentErrMsg();
    aclDestroyAclOpExecutor(c.exec);
  }
}

TEST(AclnnErrors, CubeMathTypeOutOfRange) {
  for (int8_t v : {int8_t{4}, int8_t{-1}, int8_t{127}}) {
    SCOPED_TRACE(int(v));
    Call c;
    c.cube = v;
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"cubeMathType", std::to_string(v)});
  }
}

TEST(AclnnErrors, OutputOverlappingItself) {
  Call c;
  // gradBias [6] with stride 0: every element is the same memory.
  const int64_t dims[1] = {6}, stride[1] = {0};
  float storage[1] = {float(kSentinel)};
  aclTensor* t = aclCreateTensor(dims, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, nullptr, 0, storage);
  ASSERT_NE(t, nullptr) << aclGetRecentErrMsg();
  c.p_db = t;
  expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradBias", "overlap"});
  EXPECT_EQ(storage[0], float(kSentinel));
  aclDestroyTensor(t);
}

TEST(AclnnErrors, OutputSharingMemoryWithAnInput) {
  Call c;  // gradInput and input: two views of one buffer
  const std::vector<int64_t>& dims = c.g.x;
  std::vector<float> shared(c.x->numel(), 1.0f);
  aclTensor* in = aclCreateTensor(dims.data(), dims.size(), ACL_FLOAT, nullptr, 0,
                                  ACL_FORMAT_NCDHW, nullptr, 0, shared.data());
  aclTensor* out = aclCreateTensor(dims.data(), dims.size(), ACL_FLOAT, nullptr, 0,
                                   ACL_FORMAT_NCDHW, nullptr, 0, shared.data());
  c.p_x = in;
  c.p_dx = out;
  expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradInput", "input"});
  for (float v : shared) ASSERT_EQ(v, 1.0f);
  aclDestroyTensor(in);
  aclDestroyTensor(out);
}

TEST(AclnnErrors, TwoOutputsSharingMemory) {
  Call c;
  c.p_dw = c.p_dx;  // same tensor for gradInput and gradWeight (shapes differ too)
  const aclnnStatus s = c.plan();
  EXPECT_EQ(s, ACLNN_ERR_PARAM_INVALID) << aclGetRecentErrMsg();
  EXPECT_EQ(c.outputs_touched(), 0);
}

// ---- the convolution itself (checked by the engine): ACLNN_ERR_PARAM_INVALID ----

TEST(AclnnErrors, StrideValues) {
  {
    Call c;
    c.set_stride({1, 2});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"stride"});
  }
  {
    Call c;
    c.set_stride({1, 0, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"stride"});
  }
  {
    Call c;
    c.set_stride({1, -2, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"stride"});
  }
}

TEST(AclnnErrors, PaddingValues) {
  {
    Call c;
    c.set_padding({1, -1, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"padding"});
  }
  {
    Call c;  // 4 values are for 2D only
    c.set_padding({1, 1, 1, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"padding"});
  }
  {
    Call c;
    c.set_padding({1, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"padding"});
  }
}

TEST(AclnnErrors, DilationValues) {
  {
    Call c;
    c.set_dilation({1, 0, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"dilation"});
  }
  {
    Call c;
    c.set_dilation({1, 1, 1, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"dilation"});
  }
}

// Handles are destroyed once: a second destroy, or an op given a destroyed handle, is an error,
// not a double free or a use after free.
TEST(AclnnErrors, DestroyedHandles) {
  const int64_t dims[3] = {1, 16, 8};
  std::vector<float> mem(128);
  aclTensor* t = aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, mem.data());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("not a live aclTensor"), std::string::npos);
  const int64_t v[1] = {1};
  aclIntArray* a = aclCreateIntArray(v, 1);
  EXPECT_EQ(aclDestroyIntArray(a), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyIntArray(a), ACLNN_ERR_PARAM_INVALID);
  const bool b[1] = {true};
  aclBoolArray* m = aclCreateBoolArray(b, 1);
  EXPECT_EQ(aclDestroyBoolArray(m), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyBoolArray(m), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(aclDestroyTensor(nullptr), ACLNN_SUCCESS);
  // An op given a destroyed stride array.
  Call c;
  aclIntArray* stride = aclCreateIntArray(v, 1);
  aclDestroyIntArray(stride);
  c.p_stride = stride;
  expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"stride", "not a live handle"});
}

// Values whose geometry arithmetic overflowed int64 were once accepted and ran to finite garbage.
TEST(AclnnErrors, HugeWindowValuesAreRefused) {
  const int64_t kBig = INT64_MAX;
  {
    Call c;
    c.set_padding({kBig, kBig, 0});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"padding"});
  }
  {
    Call c;
    c.set_dilation({1, kBig, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"dilation"});
  }
  {
    Call c;
    c.set_stride({int64_t(1) << 31, 1, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"stride"});
  }
}

TEST(AclnnErrors, OutputPaddingWithoutTransposed) {
  Call c;
  c.set_out_pad({0, 1, 0});
  expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"outputPadding"});
}

TEST(AclnnErrors, OutputPaddingNotBelowStride) {
  Call c;
  c.transposed = true;
  c.set_w({4, 6, 3, 3, 3});
  c.set_out_pad({0, 2, 0});  // stride is {1, 2, 1}
  c.set_dy({2, 6, 5, 13, 6});
  expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"outputPadding"});
}

TEST(AclnnErrors, OutputPaddingLength) {
  Call c;
  c.transposed = true;
  c.set_w({4, 6, 3, 3, 3});
  c.set_dy({2, 6, 5, 11, 6});
  c.set_out_pad({0, 0});
  expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"outputPadding"});
}

TEST(AclnnErrors, Groups) {
  {
    Call c;
    c.groups = 0;
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"groups"});
  }
  {
    Call c;
    c.groups = -2;
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"groups"});
  }
  {
    Call c;  // groups * weight.C (2 * 4) != input.C (4)
    c.groups = 2;
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"groups"});
  }
  {
    Call c;  // Cout 6 not divisible by 4 groups
    c.groups = 4;
    c.set_w({6, 1, 3, 3, 3});
    c.set_dw({6, 1, 3, 3, 3});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"groups"});
  }
}

TEST(AclnnErrors, ShapeMismatches) {
  {
    Call c;  // gradOutput spatial size does not follow from input, weight, stride, padding
    c.set_dy({2, 6, 5, 4, 6});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradOutput"});
  }
  {
    Call c;  // gradOutput channels != Cout
    c.set_dy({2, 5, 5, 3, 6});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradOutput"});
  }
  {
    Call c;  // batch
    c.set_dy({3, 6, 5, 3, 6});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradOutput"});
  }
  {
    Call c;  // input channels != groups * weight.C
    c.set_x({2, 5, 5, 6, 6});
    c.set_dx({2, 5, 5, 6, 6});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"weight"});
  }
  {
    Call c;  // ranks differ
    c.set_w({6, 4, 3, 3}, ACL_FLOAT, ACL_FORMAT_NCHW);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"weight"});
  }
  {
    Call c;  // rank 6 (ND)
    c.set_x({2, 4, 5, 6, 6, 1}, ACL_FLOAT, ACL_FORMAT_ND);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"input"});
  }
  {
    Call c;  // kernel larger than the padded input
    c.set_w({6, 4, 9, 3, 3});
    c.set_dw({6, 4, 9, 3, 3});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"weight"});
  }
}

TEST(AclnnErrors, EmptyWeightOrGradOutput) {
  {
    Call c;
    c.set_w({0, 4, 3, 3, 3});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"weight"});
  }
  {
    Call c;  // input non-empty, gradOutput empty
    c.set_dy({2, 6, 0, 3, 6});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradOutput"});
  }
}

TEST(AclnnErrors, BiasSizes) {
  {
    Call c;
    c.set_bias({5});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"biasSizes"});
  }
  {
    Call c;
    c.set_bias({6, 1});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"biasSizes"});
  }
}

TEST(AclnnErrors, OutputShapes) {
  {
    Call c;
    c.set_dx({2, 4, 5, 6, 7});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradInput"});
  }
  {
    Call c;
    c.set_dw({6, 4, 3, 3, 2});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradWeight"});
  }
  {
    Call c;
    c.set_db({7});
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradBias"});
  }
}

TEST(AclnnErrors, OutputDtypes) {
  {
    Call c;  // fp32 inputs: gradInput must be fp32
    c.set_dx(c.g.x, ACL_FLOAT16);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradInput"});
  }
  {
    Call c;
    c.set_dw(c.g.w, ACL_BF16);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradWeight"});
  }
  {
    Call c;  // gradBias has gradOutput's dtype
    c.set_db({6}, ACL_FLOAT16);
    expect_failure(c, ACLNN_ERR_PARAM_INVALID, {"gradBias"});
  }
}

// ---- the second phase ----

/** A planned baseline call. */
struct Planned : Call {
  std::vector<unsigned char> ws;
  Planned() {
    EXPECT_EQ(plan(), ACLNN_SUCCESS) << aclGetRecentErrMsg();
    ws.assign(ws_size, 0);
  }
  void* ws_ptr() { return ws.empty() ? nullptr : ws.data(); }
};

void expect_run_failure(Planned& p, aclnnStatus status, void* ws, uint64_t size, aclOpExecutor* e,
                        aclrtStream stream, std::vector<std::string> names) {
  const aclnnStatus got = aclnnConvolutionBackward(ws, size, e, stream);
  const std::string msg = aclGetRecentErrMsg();
  EXPECT_EQ(got, status) << msg;
  EXPECT_NE(msg.find("aclnnConvolutionBackward"), std::string::npos) << msg;
  for (const std::string& n : names) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  EXPECT_EQ(p.outputs_touched(), 0);
}

TEST(AclnnRunErrors, NullExecutor) {
  Planned p;
  expect_run_failure(p, ACLNN_ERR_PARAM_NULLPTR, p.ws_ptr(), p.ws_size, nullptr, nullptr, {"executor"});
  EXPECT_EQ(aclDestroyAclOpExecutor(p.exec), ACLNN_SUCCESS);
}

TEST(AclnnRunErrors, UnknownExecutor) {
  Planned p;
  int not_an_executor = 0;
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, p.ws_ptr(), p.ws_size,
                     reinterpret_cast<aclOpExecutor*>(&not_an_executor), nullptr, {"executor"});
  EXPECT_EQ(aclDestroyAclOpExecutor(p.exec), ACLNN_SUCCESS);
}

TEST(AclnnRunErrors, WorkspaceTooSmallLeavesExecutorUsable) {
  Planned p;
  ASSERT_GT(p.ws_size, 0u) << "the baseline needs a workspace for this test";
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, p.ws_ptr(), p.ws_size - 1, p.exec, nullptr,
                     {"workspaceSize", std::to_string(p.ws_size)});
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, nullptr, 0, p.exec, nullptr, {"workspaceSize"});
  EXPECT_EQ(aclnnConvolutionBackward(p.ws_ptr(), p.ws_size, p.exec, nullptr), ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  EXPECT_GT(p.outputs_touched(), 0);
}

TEST(AclnnRunErrors, NullWorkspaceWithNonZeroSize) {
  Planned p;
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, nullptr, p.ws_size + 64, p.exec, nullptr, {"workspace"});
  EXPECT_EQ(aclDestroyAclOpExecutor(p.exec), ACLNN_SUCCESS);
}

TEST(AclnnRunErrors, ExecutorRunsOnce) {
  Planned p;
  ASSERT_EQ(aclnnConvolutionBackward(p.ws_ptr(), p.ws_size, p.exec, nullptr), ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  p.dx->fill_storage(kSentinel);
  p.dw->fill_storage(kSentinel);
  p.db->fill_storage(kSentinel);
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, p.ws_ptr(), p.ws_size, p.exec, nullptr, {"executor"});
  EXPECT_EQ(aclDestroyAclOpExecutor(p.exec), ACLNN_ERR_PARAM_INVALID) << "already freed";
}

TEST(AclnnRunErrors, DestroyedExecutor) {
  Planned p;
  ASSERT_EQ(aclDestroyAclOpExecutor(p.exec), ACLNN_SUCCESS);
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, p.ws_ptr(), p.ws_size, p.exec, nullptr, {"executor"});
  EXPECT_EQ(aclDestroyAclOpExecutor(nullptr), ACLNN_SUCCESS);
}

TEST(AclnnRunErrors, UnknownStreamLeavesExecutorUsable) {
  Planned p;
  int not_a_stream = 0;
  expect_run_failure(p, ACLNN_ERR_PARAM_INVALID, p.ws_ptr(), p.ws_size, p.exec, &not_a_stream, {"stream"});
  EXPECT_EQ(aclnnConvolutionBackward(p.ws_ptr(), p.ws_size, p.exec, nullptr), ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
}

// ---- the base objects ----

TEST(AclnnObjects, CreateTensorRejectsBadViews) {
  float buf[64];
  const int64_t dims[3] = {2, 3, 4}, neg[3] = {2, -3, 4}, storage[1] = {24}, small[1] = {23};
  const int64_t bad_stride[3] = {12, -4, 1};
  struct Case {
    const char* name;
    aclTensor* t;
  } cases[] = {
      {"viewDims", aclCreateTensor(neg, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, buf)},
      {"viewDims", aclCreateTensor(nullptr, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, buf)},
      {"stride", aclCreateTensor(dims, 3, ACL_FLOAT, bad_stride, 0, ACL_FORMAT_ND, nullptr, 0, buf)},
      {"offset", aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, -1, ACL_FORMAT_ND, nullptr, 0, buf)},
      {"storageDims", aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, small, 1, buf)},
      {"storageDims", aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 1, ACL_FORMAT_ND, storage, 1, buf)},
      {"storageDims", aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 1, buf)},
      {"viewDimsNum", aclCreateTensor(dims, 9, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, buf)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.t, nullptr);
    aclDestroyTensor(c.t);
  }
  // One at a time, so the message belongs to the call.
  EXPECT_EQ(aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, small, 1, buf), nullptr);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("storageDims"), std::string::npos) << aclGetRecentErrMsg();
  EXPECT_EQ(aclCreateTensor(dims, 3, ACL_FLOAT, bad_stride, 0, ACL_FORMAT_ND, nullptr, 0, buf), nullptr);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("stride"), std::string::npos) << aclGetRecentErrMsg();
  const int64_t huge[2] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(aclCreateTensor(huge, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, buf), nullptr);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("int64"), std::string::npos) << aclGetRecentErrMsg();
  // Valid: exact storage.
  aclTensor* ok = aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, storage, 1, buf);
  EXPECT_NE(ok, nullptr) << aclGetRecentErrMsg();
  EXPECT_STREQ(aclGetRecentErrMsg(), "");
  EXPECT_EQ(aclDestroyTensor(ok), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyTensor(nullptr), ACLNN_SUCCESS);
}

TEST(AclnnObjects, CreateArraysRejectNullValues) {
  EXPECT_EQ(aclCreateIntArray(nullptr, 3), nullptr);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("value"), std::string::npos);
  EXPECT_EQ(aclCreateBoolArray(nullptr, 3), nullptr);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("aclCreateBoolArray"), std::string::npos);
  aclIntArray* empty = aclCreateIntArray(nullptr, 0);
  EXPECT_NE(empty, nullptr);
  EXPECT_EQ(aclDestroyIntArray(empty), ACLNN_SUCCESS);
}

TEST(AclnnObjects, ErrorMessageIsPerThread) {
  Call c;
  c.p_x = nullptr;
  ASSERT_EQ(c.plan(), ACLNN_ERR_PARAM_NULLPTR);
  std::string other;
  std::thread([&] { other = aclGetRecentErrMsg(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("input"), std::string::npos);
}

}  // namespace
}  // namespace aclnn_test
