// The example kernels (examples/ascendc) on the public cases and random geometries, against the
// float64 oracle: dW fp32 within 1e-5 relative, dX within one output-type ulp of the rounded
// reference; several block_dims, both iterate orders, forced block sizes and single shapes.
#include <gtest/gtest.h>

#include <cstddef>

#include "ascendc_harness.h"
#include "lib/conv_backprop/conv3d_bp_filter_api.h"
#include "lib/conv_backprop/conv3d_bp_input_api.h"
#include "tbex/thread_pool.h"

using namespace ascendc_test;

namespace {
constexpr double kFp32Tol = 1e-5;

template <class T>
void check_dw(const Geo& g, int64_t block_dim, const Tweak& tw = {}) {
  const Operands o = make_operands<T>(g, 7);
  std::vector<double> ref;
  oracle(g, o, &ref, nullptr);
  const auto got = run_dw<T>(g, o, block_dim, tw);
  EXPECT_LE(rel_err(got, ref), kFp32Tol) << g.name << " block_dim " << block_dim;
}

template <class T>
void check_dx(const Geo& g, int64_t block_dim, const Tweak& tw = {}) {
  const Operands o = make_operands<T>(g, 11);
  std::vector<double> ref;
  oracle(g, o, nullptr, &ref);
  const auto got = run_dx<T>(g, o, block_dim, tw);
  EXPECT_LE(ulp_err<T>(got, ref), 1.0) << g.name << " block_dim " << block_dim;
}
}  // namespace

TEST(AscendcTiling, StructSizesAndOffsets) {
  EXPECT_EQ(sizeof(TConv3DBpFilterTiling), 216u);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, cin1G), 12u);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, channelSize), 27u * 4);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, baseM), 33u * 4);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, iterateOrder), 43u * 4);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, singleCoreHo), 49u * 4);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, singleCoreBatch), 200u);
  EXPECT_EQ(offsetof(TConv3DBpFilterTiling, singleCoreCin), 208u);
  EXPECT_EQ(sizeof(TConv3DBackpropInputTiling), 280u);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, c0), 7u * 4);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, backpropPadTail), 28u * 4);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, baseM), 47u * 4);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, iterateOrder), 59u * 4);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, initOutputFlag), 61u * 4);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, reserved), 62u * 4);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, singleCoreBatch), 256u);  // 4 bytes of padding
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, singleCoreM), 264u);
  EXPECT_EQ(offsetof(TConv3DBackpropInputTiling, singleCoreCin), 272u);
  // The three spellings are one layout.
  static_assert(sizeof(optiling::TConv3DBpFilterTiling) == 216, "");
  static_assert(sizeof(optiling::TConv3DBackpropInputTiling) == 280, "");
  static_assert(std::is_same<AscendC::tiling::TConv3DBpFilterTiling, TConv3DBpFilterTiling>::value, "");
}

TEST(AscendcTiling, FieldsHaveTheirMeaning) {
  Geo g;
  g.n = 2; g.cin = 20; g.cout = 33;
  g.in[0] = 4; g.in[1] = 9; g.in[2] = 7;
  g.k[0] = 2; g.k[1] = 3; g.k[2] = 3;
  g.s[1] = 2; g.p[2] = g.p[3] = 1; g.p[4] = g.p[5] = 1;
  g.out[0] = 3; g.out[1] = 5; g.out[2] = 7;
  ConvBackpropApi::Conv3dBpFilterTiling f;
  f.SetWeightShape(33, 20, 2, 3, 3);
  f.SetInputShape(2, 20, 4, 9, 7);
  f.SetGradOutputShape(2, 33, 3, 5, 7);
  f.SetInputType(ConvCommonApi::TPosition::GM, ConvCommonApi::NDC1HWC0, ConvCommonApi::FLOAT16);
  f.SetGradOutputType(ConvCommonApi::TPosition::GM, ConvCommonApi::NDC1HWC0, ConvCommonApi::FLOAT16);
  f.SetWeightType(ConvCommonApi::TPosition::GM, ConvCommonApi::FRACTAL_Z_3D, ConvCommonApi::FLOAT32);
  f.SetPadding(0, 0, 1, 1, 1, 1);
  f.SetStride(1, 2, 1);
  optiling::Conv3DBackpropFilterTilingData od;
  ASSERT_EQ(f.GetTiling(od), 0) << f.GetErrorMessage();
  EXPECT_EQ(od.dwTiling.get_cin1G(), 2u);
  EXPECT_EQ(od.dwTiling.get_cout1G(), 3u);
  EXPECT_EQ(od.dwTiling.get_channelSize(), 16u);
  EXPECT_EQ(od.dwTiling.get_padUp(), 1u);
  EXPECT_EQ(od.dwTiling.get_strideH(), 2u);
  EXPECT_EQ(od.dwTiling.get_baseN() % 16, 0u);
  EXPECT_GE(od.dwTiling.get_singleCoreHo(), 1u);
  EXPECT_LE(od.dwTiling.get_singleCoreHo(), 5u);
  EXPECT_EQ(od.basicBlockTiling.get_singleCoreK(), od.dwTiling.get_singleCoreHo() * 7);
  EXPECT_EQ(od.basicBlockTiling.get_singleCoreN(), od.dwTiling.get_singleCoreCin() * 9);
  std::vector<uint8_t> buf(od.GetDataSize());
  ASSERT_TRUE(od.SaveToBuffer(buf.data(), buf.size()));
  EXPECT_FALSE(od.SaveToBuffer(buf.data(), buf.size() - 1));
  Conv3DBackpropFilterTilingData plain;
  std::memcpy(&plain, buf.data(), sizeof(plain));
  EXPECT_EQ(plain.dwTiling.cout, 33u);
  EXPECT_EQ(plain.dwTiling.singleCoreHo, od.dwTiling.get_singleCoreHo());
  // Both GetTiling spellings agree.
  AscendC::tiling::Conv3DBackpropFilterTilingData pd;
  ASSERT_EQ(f.GetTiling(pd), 0);
  EXPECT_EQ(std::memcmp(&pd.dwTiling, &plain.dwTiling, sizeof(plain.dwTiling)), 0);

  ConvBackpropApi::Conv3DBpInputTiling x;
  EXPECT_TRUE(x.SetWeightShape(33, 20, 2, 3, 3));
  EXPECT_TRUE(x.SetInputShape(2, 20, 4, 9, 7));
  EXPECT_TRUE(x.SetGradOutputShape(2, 33, 3, 5, 7));
  EXPECT_FALSE(x.SetGradOutputShape(2, 33, 3, 0, 7));
  EXPECT_TRUE(x.SetGradOutputShape(2, 33, 3, 5, 7));
  x.SetPadding(0, 0, 1, 1, 1, 1);
  x.SetStride(1, 2, 1);
  AscendC::tiling::Conv3DBackpropInputTilingData xd;
  ASSERT_EQ(x.GetTiling(xd), 0) << x.GetErrorMessage();
  const auto& t = xd.conv3DDxTiling;
  EXPECT_EQ(t.backpropPadUp, 1u);    // (3-1)*1 - 1
  EXPECT_EQ(t.backpropPadLeft, 1u);
  EXPECT_EQ(t.c0, 16u);
  EXPECT_EQ(t.c0Bits, 4u);
  EXPECT_EQ(t.cin1, 2u);
  EXPECT_EQ(t.cout1, 3u);
  EXPECT_EQ(t.singleCoreM % 7, 0u);  // whole rows of Wi
  EXPECT_EQ(t.iterateOrder, 1u);
  EXPECT_EQ(t.stepM, 1u);
  EXPECT_EQ(t.stepN, 1u);
  EXPECT_EQ(t.initOutputFlag, 1);  // padded: CANN zeroes first
}

TEST(AscendcDw, PublicCasesBothDtypes) {
  for (const Geo& g : public_cases()) {
    check_dw<half>(g, 7);
    check_dw<bfloat16_t>(g, 2);
  }
}

TEST(AscendcDx, PublicCasesBothDtypes) {
  int run = 0;
  for (const Geo& g : public_cases()) {
    if (!g.fits_dx()) continue;
    check_dx<half>(g, 7);
    check_dx<bfloat16_t>(g, 2);
    ++run;
  }
  EXPECT_GE(run, 8);
}

TEST(AscendcDw, RandomGeometriesBlockDimsAndOrders) {
  const auto geos = random_geometries(24, 1234);
  for (size_t i = 0; i < geos.size(); ++i) {
    const int64_t block_dim = std::vector<int64_t>{1, 2, 7, 24}[i % 4];
    Tweak tw;
    tw.iterate_order = (int)(i % 2);
    check_dw<half>(geos[i], block_dim, tw);
    check_dw<bfloat16_t>(geos[i], block_dim);
  }
}

TEST(AscendcDx, RandomGeometriesBlockDims) {
  const auto geos = random_geometries(40, 4321);
  int run = 0;
  for (size_t i = 0; i < geos.size(); ++i) {
    if (!geos[i].fits_dx()) continue;
    const int64_t block_dim = std::vector<int64_t>{1, 2, 7, 24}[i % 4];
    check_dx<half>(geos[i], block_dim);
    check_dx<bfloat16_t>(geos[i], block_dim);
    ++run;
  }
  EXPECT_GE(run, 10);
}

TEST(AscendcDw, ForcedBlocksAndManyCoresAddingIntoOneBlock) {
  Geo g;
  g.name = "forced";
  g.n = 2; g.cin = 35; g.cout = 40;
  g.in[0] = 3; g.in[1] = 11; g.in[2] = 9;
  g.k[0] = 2; g.k[1] = 3; g.k[2] = 2;
  g.s[1] = 2; g.d[2] = 2; g.p[2] = 1; g.p[3] = 2; g.p[4] = 1;
  g.out[0] = 2; g.out[1] = (11 + 3 - 3) / 2 + 1; g.out[2] = (9 + 1 - 3) / 1 + 1;
  for (int order : {0, 1})
    for (uint32_t bm : {16u, 48u})
      for (uint32_t bn : {16u, 96u, 224u}) {
        Tweak tw;
        tw.iterate_order = order;
        tw.base_m = bm;
        tw.base_n = bn;
        tw.base_k = 32;
        check_dw<half>(g, 7, tw);
      }
  // One Ho row per single shape: every (batch, dout, kd, row) task of 24 cores adds into the
  // same dW blocks at once.
  Tweak one_row;
  one_row.single_ho = 1;
  check_dw<bfloat16_t>(g, 24, one_row);
}

TEST(AscendcDx, ForcedBlocksAndSingleShapes) {
  Geo g;
  g.name = "forced";
  g.n = 2; g.cin = 37; g.cout = 21;
  g.in[0] = 4; g.in[1] = 10; g.in[2] = 6;
  g.k[0] = 2; g.k[1] = 3; g.k[2] = 3;
  g.s[0] = 2; g.s[1] = 2; g.p[2] = 1; g.p[3] = 1; g.p[4] = 2; g.p[5] = 0; g.d[2] = 1;
  g.out[0] = (4 - 2) / 2 + 1; g.out[1] = (10 + 2 - 3) / 2 + 1; g.out[2] = (6 + 2 - 3) / 1 + 1;
  for (uint32_t rows : {1u, 3u, 10u})
    for (uint32_t bm : {7u, 20u, 256u})
      for (uint32_t bn : {16u, 48u}) {
        Tweak tw;
        tw.iterate_order = (int)((rows + bm + bn) % 2);  // CANN's host sets 1; kernels may force 0
        tw.single_m_rows = rows;
        tw.base_m = bm;
        tw.base_n = bn;
        check_dx<half>(g, 7, tw);
      }
}

