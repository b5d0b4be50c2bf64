// Misuse gets a typed error naming the call; the launcher's barrier, exceptions and allocator; the
// dX NCDHW workspace path (a kernel that transposes each block, as CANN's operator does).
#include <gtest/gtest.h>

#include <array>
#include <atomic>

#include "ascendc_harness.h"
#include "lib/conv_backprop/conv3d_bp_filter_api.h"
#include "lib/conv_backprop/conv3d_bp_input_api.h"
#include "tbex/errors.h"

using namespace ascendc_test;
using namespace ConvBackpropApi;
using F = ConvCommonApi::ConvFormat;

namespace {
using XT = ConvType<AscendC::TPosition::GM, F::NDC1HWC0, half>;
using WST = ConvType<AscendC::TPosition::GM, F::ND, int32_t>;
using DWT = ConvType<AscendC::TPosition::GM, F::FRACTAL_Z_3D, float>;
using WT = ConvType<ConvCommonApi::TPosition::GM, F::FRACTAL_Z_3D, half>;
using DXT = ConvType<ConvCommonApi::TPosition::GM, F::NDC1HWC0, half>;

Geo small() {
  Geo g;
  g.name = "small";
  g.cin = 16; g.cout = 16;
  g.in[1] = 6; g.in[2] = 5;
  g.k[1] = 3; g.k[2] = 3;
  g.out[1] = 4; g.out[2] = 3;
  return g;
}

TConv3DBpFilterTiling dw_tiling(const Geo& g) {
  ConvBackpropApi::Conv3dBpFilterTiling tiler;
  tiler.SetWeightShape(g.cout, g.cin, g.k[0], g.k[1], g.k[2]);
  tiler.SetInputShape(g.n, g.cin, g.in[0], g.in[1], g.in[2]);
  tiler.SetGradOutputShape(g.n, g.cout, g.out[0], g.out[1], g.out[2]);
  AscendC::tiling::Conv3DBackpropFilterTilingData td;
  EXPECT_EQ(tiler.GetTiling(td), 0) << tiler.GetErrorMessage();
  return td.dwTiling;
}

template <class Fn>
std::string user_error(Fn&& fn) {
  try {
    fn();
  } catch (const tbex::UserError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(AscendcErrors, IterateBeforeInit) {
  Conv3DBackpropFilter<XT, WST, XT, DWT> dw;
  EXPECT_NE(user_error([&] { dw.Iterate(); }).find("Iterate before Init"), std::string::npos);
  Conv3DBackpropInput<WT, WST, XT, DXT> dx;
  EXPECT_NE(user_error([&] { dx.Iterate(); }).find("Iterate before Init"), std::string::npos);
}

TEST(AscendcErrors, KNotAMultipleOfWo) {
  const Geo g = small();
  const TConv3DBpFilterTiling t = dw_tiling(g);
  std::vector<half> x(16 * 6 * 5), dy(16 * 4 * 3);
  AscendC::GlobalTensor<half> xg, dyg;
  xg.SetGlobalBuffer(x.data(), x.size());
  dyg.SetGlobalBuffer(dy.data(), dy.size());
  Conv3DBackpropFilter<XT, WST, XT, DWT> op;
  op.Init(&t);
  op.SetInput(xg);
  op.SetGradOutput(dyg);
  op.SetSingleShape(16, 16 * 9, 4);  // Wo = 3
  const std::string e = user_error([&] { op.Iterate(); });
  EXPECT_NE(e.find("SetSingleShape"), std::string::npos) << e;
  EXPECT_NE(e.find("multiple of Wo (3)"), std::string::npos) << e;
  EXPECT_NE(e.find("E60000"), std::string::npos) << e;
  // Rows past Ho, and GetTensorC without a block.
  op.SetSingleShape(16, 16 * 9, 9);
  op.SetStartPosition(2);
  EXPECT_NE(user_error([&] { op.Iterate(); }).find("past Ho"), std::string::npos);
  AscendC::GlobalTensor<float> out;
  std::vector<float> o(4096);
  out.SetGlobalBuffer(o.data());
  EXPECT_NE(user_error([&] { op.GetTensorC(out); }).find("GetTensorC without a block"), std::string::npos);
}

TEST(AscendcErrors, IterateWithoutOperands) {
  const TConv3DBpFilterTiling t = dw_tiling(small());
  Conv3DBackpropFilter<XT, WST, XT, DWT> op;
  op.Init(&t);
  op.SetSingleShape(16, 144, 3);
  EXPECT_NE(user_error([&] { op.Iterate(); }).find("SetInput"), std::string::npos);
  EXPECT_NE(user_error([&] { op.Init(nullptr); }).find("tiling is null"), std::string::npos);
}

TEST(AscendcErrors, InvalidTilingInputReturnsMinusOne) {
  ConvBackpropApi::Conv3dBpFilterTiling f;
  f.SetWeightShape(16, 8, 1, 3, 3);
  f.SetInputShape(1, 16, 1, 6, 6);
  f.SetGradOutputShape(1, 16, 1, 4, 4);
  f.SetGroups(2);
  AscendC::tiling::Conv3DBackpropFilterTilingData td;
  EXPECT_EQ(f.GetTiling(td), -1);
  EXPECT_NE(f.GetErrorMessage().find("groups must be 1"), std::string::npos);
  f.SetGroups(1);
  EXPECT_EQ(f.GetTiling(td), -1);  // weight Cin 8 vs input C 16
  EXPECT_NE(f.GetErrorMessage().find("Cin"), std::string::npos);
  f.SetWeightShape(16, 16, 1, 3, 3);
  f.SetGradOutputShape(1, 16, 1, 5, 4);  // output rule broken in H
  EXPECT_EQ(f.GetTiling(td), -1);
  EXPECT_NE(f.GetErrorMessage().find("E60025"), std::string::npos) << f.GetErrorMessage();
  f.SetGradOutputShape(1, 16, 1, 4, 4);
  f.SetInputType(ConvCommonApi::TPosition::GM, F::NDC1HWC0, ConvCommonApi::FLOAT32);
  EXPECT_EQ(f.GetTiling(td), -1);
  EXPECT_NE(f.GetErrorMessage().find("FLOAT16 or BF16"), std::string::npos);

  ConvBackpropApi::Conv3DBpInputTiling x;
  x.SetWeightShape(16, 16, 1, 3, 3);
  x.SetInputShape(1, 16, 1, 6, 6);
  x.SetGradOutputShape(1, 16, 1, 2, 2);
  x.SetPadding(0, 0, 3, 0, 3, 0);  // pad 3 > (3-1)*1
  x.SetStride(1, 4, 4);
  AscendC::tiling::Conv3DBackpropInputTilingData xd;
  EXPECT_EQ(x.GetTiling(xd), -1);
  EXPECT_NE(x.GetErrorMessage().find("exceeds (k-1)*dilation"), std::string::npos) << x.GetErrorMessage();
  ConvBackpropApi::Conv3DBpInputTiling y;
  EXPECT_EQ(y.GetTiling(xd), -1);
  EXPECT_NE(y.GetErrorMessage().find("must all be called"), std::string::npos);
}

TEST(AscendcLaunch, SyncAllIsABarrierForEveryBlockDim) {
  for (int64_t cores : {1, 2, 7, 24}) {
    std::vector<int64_t> slot((size_t)cores, -1);
    std::atomic<int> bad{0};
    tbex::ascendc::launch(
        [&](int round_trips) {
          const int64_t me = AscendC::GetBlockIdx();
          if (AscendC::GetBlockNum() != cores) ++bad;
          for (int r = 0; r < round_trips; ++r) {
            slot[(size_t)me] = r;
            AscendC::SyncAll();
            for (int64_t v : slot)
              if (v != r) ++bad;
            AscendC::SyncAll();
          }
        },
        cores, 3);
    EXPECT_EQ(bad.load(), 0) << cores;
  }
  EXPECT_EQ(AscendC::GetBlockIdx(), 0);
  EXPECT_EQ(AscendC::GetBlockNum(), 1);
}

TEST(AscendcLaunch, AnExceptionEndsTheLaunchAndIsRethrown) {
  // Core 3 fails; the others wait in SyncAll and must be released.
  const std::string e = user_error([&] {
    tbex::ascendc::launch(
        [] {
          if (AscendC::GetBlockIdx() == 3) throw tbex::UserError("E60000", "core", "core 3 failed");
          AscendC::SyncAll();
        },
        8);
  });
  EXPECT_NE(e.find("core 3 failed"), std::string::npos);
  EXPECT_NE(user_error([] { tbex::ascendc::launch([] {}, 0); }).find("block_dim"), std::string::npos);
}

TEST(AscendcLaunch, GmAllocIsZeroedAndAligned) {
  auto* p = static_cast<uint8_t*>(AscendC::GmAlloc(1000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0);
  AscendC::GmFree(p);
  EXPECT_EQ(AscendC::GmAlloc(0), nullptr);
  ICPU_SET_TILING_KEY(7);
  EXPECT_TRUE(TILING_KEY_IS(7));
}

namespace {
// dX with an NCDHW gradInput: GetTensorC leaves each block as NZ [n/16][m][16] in this core's
// workspace slot; the kernel moves it to NCDHW (on the NPU a vector core does this).
void dx_ncdhw_kernel(GM_ADDR w, GM_ADDR dy, GM_ADDR dx, GM_ADDR ws, GM_ADDR tiling) {
  GET_TILING_DATA_WITH_STRUCT(Conv3DBackpropInputTilingData, td, tiling);
  const TConv3DBackpropInputTiling& t = td.conv3DDxTiling;
  using DXN = ConvType<AscendC::TPosition::GM, F::NCDHW, half>;
  Conv3DBackpropInput<WT, WST, XT, DXN> op;
  op.Init(&t);
  AscendC::GlobalTensor<half> wg, dyg, wsg;
  wg.SetGlobalBuffer(reinterpret_cast<half*>(w));
  dyg.SetGlobalBuffer(reinterpret_cast<half*>(dy));
  wsg.SetGlobalBuffer(reinterpret_cast<half*>(ws));
  half* out = reinterpret_cast<half*>(dx);
  const uint64_t HW = (uint64_t)t.hi * t.wi, sHi = t.singleCoreM / t.wi, sM = sHi * t.wi;
  const uint64_t mC = AscendC::DivCeil(HW, sM), K = (uint64_t)t.dk * t.cout1 * t.hk * t.wk * 16;
  const uint64_t tasks = (uint64_t)t.batch * t.di * mC;
  for (uint64_t task = AscendC::GetBlockIdx(); task < tasks; task += AscendC::GetBlockNum()) {
    const uint64_t d = task % t.di, b = (task / t.di) % t.batch, mi = task / t.di / t.batch;
    const uint64_t curM = mi == mC - 1 ? HW - mi * sM : sM;
    const int32_t hoStart = (int32_t)(mi * sHi) - (int32_t)t.backpropPadUp;
    const uint32_t aligned = hoStart < 0 ? 0 : AscendC::DivCeil((uint32_t)hoStart, t.strideH);
    if (aligned >= t.ho) continue;
    op.SetSingleShape(curM, K, t.cin);
    op.SetStartPosition((uint32_t)d, hoStart);
    op.SetGradOutput(dyg[b * t.dout * t.cout1 * t.ho * t.wo * 16 + (uint64_t)aligned * t.wo * 16]);
    op.SetWeight(wg);
    while (op.Iterate()) {
      op.GetTensorC(wsg);
      if (!op.ctx.needComputeFlag_) continue;
      const half* blk = reinterpret_cast<const half*>(ws) + AscendC::GetBlockIdx() * t.baseM * t.baseN;
      for (uint32_t c = 0; c < op.ctx.baseUseN_; ++c) {
        const uint64_t ch = (uint64_t)op.ctx.curNL0Idx_ * t.baseN + c;
        if (ch >= op.ctx.singleShapeCin_) break;
        for (uint32_t p = 0; p < op.ctx.baseUseM_; ++p) {
          const uint64_t pix = mi * sM + (uint64_t)op.ctx.curML0Idx_ * t.baseM + p;
          out[((b * t.cin + ch) * t.di + op.ctx.curDinIdx_) * HW + pix] =
              blk[(c / 16) * op.ctx.baseUseM_ * 16 + p * 16 + c % 16];
        }
      }
    }
    op.ctx.isFirstIter_ = true;
  }
  op.End();
}
}  // namespace

TEST(AscendcDx, NcdhwWorkspacePath) {
  Geo g;
  g.name = "ncdhw";
  g.n = 2; g.cin = 20; g.cout = 18;
  g.in[0] = 3; g.in[1] = 7; g.in[2] = 5;
  g.k[0] = 2; g.k[1] = 3; g.k[2] = 3;
  g.p[2] = g.p[3] = g.p[4] = g.p[5] = 1;
  g.out[0] = 2; g.out[1] = 7; g.out[2] = 5;
  const Operands o = make_operands<half>(g, 5);
  std::vector<double> ref;
  oracle(g, o, nullptr, &ref);
  ConvBackpropApi::Conv3DBpInputTiling tiler;
  tiler.SetWeightShape(g.cout, g.cin, 2, 3, 3);
  tiler.SetInputShape(g.n, g.cin, 3, 7, 5);
  tiler.SetGradOutputShape(g.n, g.cout, 2, 7, 5);
  tiler.SetPadding(0, 0, 1, 1, 1, 1);
  AscendC::tiling::Conv3DBackpropInputTilingData td;
  ASSERT_EQ(tiler.GetTiling(td), 0) << tiler.GetErrorMessage();
  td.conv3DDxTiling.baseM = 9;  // blocks that cut rows
  td.conv3DDxTiling.baseN = 16;
  const tbex::Dims5 wd{g.cout, g.cin, 2, 3, 3};
  std::vector<half> w(tbex::shape_fz3d(wd, 1)[0] * tbex::shape_fz3d(wd, 1)[1] * 256);
  const auto wb = to_bits<half>(o.w), dyb = to_bits<half>(o.dy);
  tbex::oidhw_to_fz3d(wb.data(), w.data(), wd, 1, 2);
  const tbex::Dims5 dyd{g.n, g.cout, 2, 7, 5};
  std::vector<half> dy((size_t)(g.n * 2 * 2 * 7 * 5 * 16));
  tbex::ncdhw_to_6hd(dyb.data(), dy.data(), dyd, 2);
  std::vector<half> dx(ref.size());
  const int64_t cores = 5;
  std::vector<half> ws((size_t)(cores * td.conv3DDxTiling.baseM * td.conv3DDxTiling.baseN));
  tbex::ascendc::launch(dx_ncdhw_kernel, cores, (GM_ADDR)w.data(), (GM_ADDR)dy.data(),
                        (GM_ADDR)dx.data(), (GM_ADDR)ws.data(), (GM_ADDR)&td);
  std::vector<float> got(dx.size());
  for (size_t i = 0; i < dx.size(); ++i) got[i] = (float)dx[i];
  EXPECT_LE(ulp_err<half>(got, ref), 1.0);
}

TEST(AscendcIterate, OrderStepsTailsAndTheFirstIterRule) {
  Geo g = small();
  g.cout = 40;  // M = 40: baseM 16 -> blocks 16, 16, 8
  TConv3DBpFilterTiling t = dw_tiling(g);
  t.baseM = 16;
  t.baseN = 32;  // N = 16 * 9 = 144 -> 32 x 4 + 16
  t.stepM = 2;
  t.stepN = 2;
  std::vector<half> x(16 * 6 * 5), dy(48 * 4 * 3);
  AscendC::GlobalTensor<half> xg, dyg;
  xg.SetGlobalBuffer(x.data(), x.size());
  dyg.SetGlobalBuffer(dy.data(), dy.size());
  for (uint32_t order : {0u, 1u}) {
    t.iterateOrder = order;
    Conv3DBackpropFilter<XT, WST, XT, DWT> op;
    op.Init(&t);
    op.SetInput(xg);
    op.SetGradOutput(dyg);
    op.SetSingleShape(40, 144, 12);
    std::vector<std::array<uint32_t, 4>> seen;
    while (op.Iterate()) seen.push_back({op.ctx.curML0Idx_, op.ctx.curNL0Idx_, op.ctx.baseUseM_, op.ctx.baseUseN_});
    // Expected, written out from CANN's rule: groups of stepM x stepN blocks; ORDER_N (1): n
    // groups outer, m groups, then n, then m innermost; ORDER_M (0): the transpose.
    std::vector<std::array<uint32_t, 4>> want;
    const uint32_t mi = 3, ni = 5;
    auto use_m = [&](uint32_t m) { return m == mi - 1 ? 8u : 16u; };
    auto use_n = [&](uint32_t n) { return n == ni - 1 ? 16u : 32u; };
    for (uint32_t a = 0; a < (order ? ni : mi); a += 2)
      for (uint32_t b = 0; b < (order ? mi : ni); b += 2)
        for (uint32_t c = a; c < std::min(a + 2, order ? ni : mi); ++c)
          for (uint32_t d = b; d < std::min(b + 2, order ? mi : ni); ++d) {
            const uint32_t m = order ? d : c, n = order ? c : d;
            want.push_back({m, n, use_m(m), use_n(n)});
          }
    EXPECT_EQ(seen, want) << "iterateOrder " << order;
    // Without isFirstIter_ = true the next round yields nothing (CANN's Iterate does not reset it).
    EXPECT_FALSE(op.Iterate());
    op.ctx.isFirstIter_ = true;
    EXPECT_TRUE(op.Iterate());
    EXPECT_EQ(op.ctx.curML0Idx_, 0u);
    EXPECT_EQ(op.ctx.curNL0Idx_, 0u);
    op.End();
  }
}
