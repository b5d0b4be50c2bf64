#include "ascendc_harness.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ascendc_test {

void oracle(const Geo& g, const Operands& o, std::vector<double>* dw, std::vector<double>* dx) {
  const int64_t K = g.k[0] * g.k[1] * g.k[2];
  const int64_t IN = g.in[0] * g.in[1] * g.in[2], OUT = g.out[0] * g.out[1] * g.out[2];
  // Channels innermost so the ci loop runs over contiguous memory.
  std::vector<double> xl((size_t)(g.n * IN * g.cin)), wl((size_t)(g.cout * K * g.cin));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.cin; ++c)
      for (int64_t i = 0; i < IN; ++i) xl[(size_t)((n * IN + i) * g.cin + c)] = o.x[(size_t)((n * g.cin + c) * IN + i)];
  for (int64_t co = 0; co < g.cout; ++co)
    for (int64_t c = 0; c < g.cin; ++c)
      for (int64_t k = 0; k < K; ++k) wl[(size_t)((co * K + k) * g.cin + c)] = o.w[(size_t)((co * g.cin + c) * K + k)];
  std::vector<double> dwl((size_t)(g.cout * K * g.cin), 0.0), dxl((size_t)(g.n * IN * g.cin), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t co = 0; co < g.cout; ++co)
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const double v = o.dy[(size_t)((((n * g.cout + co) * g.out[0] + od) * g.out[1] + oh) * g.out[2] + ow)];
            for (int64_t kd = 0; kd < g.k[0]; ++kd) {
              const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
              if (id < 0 || id >= g.in[0]) continue;
              for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                const int64_t ih = oh * g.s[1] - g.p[2] + kh * g.d[1];
                if (ih < 0 || ih >= g.in[1]) continue;
                for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                  const int64_t iw = ow * g.s[2] - g.p[4] + kw * g.d[2];
                  if (iw < 0 || iw >= g.in[2]) continue;
                  const int64_t k = (kd * g.k[1] + kh) * g.k[2] + kw;
                  const int64_t i = (id * g.in[1] + ih) * g.in[2] + iw;
                  const double* xp = &xl[(size_t)((n * IN + i) * g.cin)];
                  double* dwp = &dwl[(size_t)((co * K + k) * g.cin)];
                  const double* wp = &wl[(size_t)((co * K + k) * g.cin)];
                  double* dxp = &dxl[(size_t)((n * IN + i) * g.cin)];
                  for (int64_t c = 0; c < g.cin; ++c) {
                    dwp[c] += v * xp[c];
                    dxp[c] += v * wp[c];
                  }
                }
              }
            }
          }
  if (dw) {
    dw->assign(dwl.size(), 0.0);
    for (int64_t co = 0; co < g.cout; ++co)
      for (int64_t c = 0; c < g.cin; ++c)
        for (int64_t k = 0; k < K; ++k) (*dw)[(size_t)((co * g.cin + c) * K + k)] = dwl[(size_t)((co * K + k) * g.cin + c)];
  }
  if (dx) {
    dx->assign(dxl.size(), 0.0);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t c = 0; c < g.cin; ++c)
        for (int64_t i = 0; i < IN; ++i) (*dx)[(size_t)((n * g.cin + c) * IN + i)] = dxl[(size_t)((n * IN + i) * g.cin + c)];
  }
}

namespace {
size_t count(const std::vector<int64_t>& shape) {
  size_t c = 1;
  for (int64_t v : shape) c *= (size_t)v;
  return c;
}

tbex::Dims5 dims(int64_t a, int64_t b, const int64_t* c) { return {a, b, c[0], c[1], c[2]}; }

template <class Tiler>
void describe(Tiler& tiler, const Geo& g, ConvCommonApi::ConvDtype src, ConvCommonApi::ConvDtype w_dtype,
              ConvCommonApi::ConvDtype in_dtype) {
  using ConvCommonApi::TPosition;
  tiler.SetWeightShape(g.cout, g.cin, g.k[0], g.k[1], g.k[2]);
  tiler.SetInputShape(g.n, g.cin, g.in[0], g.in[1], g.in[2]);
  tiler.SetGradOutputShape(g.n, g.cout, g.out[0], g.out[1], g.out[2]);
  tiler.SetWeightType(TPosition::GM, ConvCommonApi::ConvFormat::FRACTAL_Z_3D, w_dtype);
  tiler.SetInputType(TPosition::GM, ConvCommonApi::ConvFormat::NDC1HWC0, in_dtype);
  tiler.SetGradOutputType(TPosition::GM, ConvCommonApi::ConvFormat::NDC1HWC0, src);
  tiler.SetPadding(g.p[0], g.p[1], g.p[2], g.p[3], g.p[4], g.p[5]);
  tiler.SetStride(g.s[0], g.s[1], g.s[2]);
  tiler.SetDilation(g.d[0], g.d[1], g.d[2]);
}

template <class T>
ConvCommonApi::ConvDtype conv_dtype() {
  return std::is_same<T, half>::value ? ConvCommonApi::FLOAT16 : ConvCommonApi::BF16;
}

struct Gm {
  uint8_t* p;
  explicit Gm(size_t bytes) : p((uint8_t*)AscendC::GmAlloc(bytes)) {}
  ~Gm() { AscendC::GmFree(p); }
};
}  // namespace

template <class T>
std::vector<float> run_dw(const Geo& g, const Operands& o, int64_t block_dim, const Tweak& tw,
                          TConv3DBpFilterTiling* used) {
  ConvBackpropApi::Conv3dBpFilterTiling tiler;
  describe(tiler, g, conv_dtype<T>(), ConvCommonApi::FLOAT32, conv_dtype<T>());
  AscendC::tiling::Conv3DBackpropFilterTilingData td;
  if (tiler.GetTiling(td) != 0) throw std::runtime_error("dW tiling failed: " + tiler.GetErrorMessage());
  auto& t = td.dwTiling;
  if (tw.iterate_order >= 0) t.iterateOrder = tw.iterate_order;
  if (tw.base_m) t.baseM = tw.base_m;
  if (tw.base_n) t.baseN = tw.base_n;
  if (tw.base_k) t.baseK = tw.base_k;
  if (tw.single_ho) t.singleCoreHo = tw.single_ho;
  if (used) *used = t;
  const auto xs = tbex::shape_6hd(dims(g.n, g.cin, g.in)), dys = tbex::shape_6hd(dims(g.n, g.cout, g.out));
  Gm x(count(xs) * 2), dy(count(dys) * 2), tiling(sizeof(td)), ws(64);
  const auto xb = to_bits<T>(o.x), dyb = to_bits<T>(o.dy);
  tbex::ncdhw_to_6hd(xb.data(), x.p, dims(g.n, g.cin, g.in), 2);
  tbex::ncdhw_to_6hd(dyb.data(), dy.p, dims(g.n, g.cout, g.out), 2);
  const tbex::Dims5 wd{g.cout, g.cin, g.k[0], g.k[1], g.k[2]};
  const size_t dw_count = count(tbex::shape_fz3d(wd, 1));
  Gm dw(dw_count * 4);  // zeroed: the kernel adds into it
  std::memcpy(tiling.p, &td, sizeof(td));
  if (std::is_same<T, half>::value)
    ICPU_RUN_KF(conv3d_bp_filter_half, block_dim, x.p, dy.p, dw.p, ws.p, tiling.p);
  else
    ICPU_RUN_KF(conv3d_bp_filter_bf16, block_dim, x.p, dy.p, dw.p, ws.p, tiling.p);
  std::vector<float> out((size_t)(g.cout * g.cin * g.k[0] * g.k[1] * g.k[2]));
  tbex::oidhw_from_fz3d(dw.p, out.data(), wd, 1, 4);
  return out;
}

template <class T>
std::vector<float> run_dx(const Geo& g, const Operands& o, int64_t block_dim, const Tweak& tw,
                          TConv3DBackpropInputTiling* used) {
  ConvBackpropApi::Conv3DBpInputTiling tiler;
  describe(tiler, g, conv_dtype<T>(), conv_dtype<T>(), conv_dtype<T>());
  AscendC::tiling::Conv3DBackpropInputTilingData td;
  if (tiler.GetTiling(td) != 0) throw std::runtime_error("dX tiling failed: " + tiler.GetErrorMessage());
  auto& t = td.conv3DDxTiling;
  if (tw.iterate_order >= 0) t.iterateOrder = tw.iterate_order;
  if (tw.base_m) t.baseM = tw.base_m;
  if (tw.base_n) t.baseN = tw.base_n;
  if (tw.base_k) t.baseK = tw.base_k;
  if (tw.single_m_rows) t.singleCoreM = (uint64_t)tw.single_m_rows * t.wi;
  if (used) *used = t;
  const auto dys = tbex::shape_6hd(dims(g.n, g.cout, g.out)), dxs = tbex::shape_6hd(dims(g.n, g.cin, g.in));
  const tbex::Dims5 wd{g.cout, g.cin, g.k[0], g.k[1], g.k[2]};
  Gm w(count(tbex::shape_fz3d(wd, 1)) * 2), dy(count(dys) * 2), dx(count(dxs) * 2), tiling(sizeof(td)), ws(64);
  const auto wb = to_bits<T>(o.w), dyb = to_bits<T>(o.dy);
  tbex::oidhw_to_fz3d(wb.data(), w.p, wd, 1, 2);
  tbex::ncdhw_to_6hd(dyb.data(), dy.p, dims(g.n, g.cout, g.out), 2);
  if (t.initOutputFlag != 1) {
    // Nothing is zeroed: every element must be written.
    T* d = reinterpret_cast<T*>(dx.p);
    std::fill(d, d + count(dxs), T(1234.0f));
  }
  std::memcpy(tiling.p, &td, sizeof(td));
  if (std::is_same<T, half>::value)
    ICPU_RUN_KF(conv3d_bp_input_half, block_dim, w.p, dy.p, dx.p, ws.p, tiling.p);
  else
    ICPU_RUN_KF(conv3d_bp_input_bf16, block_dim, w.p, dy.p, dx.p, ws.p, tiling.p);
  std::vector<uint16_t> bits((size_t)(g.n * g.cin * g.in[0] * g.in[1] * g.in[2]));
  tbex::ncdhw_from_6hd(dx.p, bits.data(), dims(g.n, g.cin, g.in), 2);
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = (float)T::from_bits(bits[i]);
  return out;
}

template std::vector<float> run_dw<half>(const Geo&, const Operands&, int64_t, const Tweak&, TConv3DBpFilterTiling*);
template std::vector<float> run_dw<bfloat16_t>(const Geo&, const Operands&, int64_t, const Tweak&, TConv3DBpFilterTiling*);
template std::vector<float> run_dx<half>(const Geo&, const Operands&, int64_t, const Tweak&, TConv3DBackpropInputTiling*);
template std::vector<float> run_dx<bfloat16_t>(const Geo&, const Operands&, int64_t, const Tweak&, TConv3DBackpropInputTiling*);

double rel_err(const std::vector<float>& a, const std::vector<double>& ref) {
  double diff = 0, mx = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs(a[i] - ref[i]));
    mx = std::max(mx, std::fabs(ref[i]));
  }
  return mx > 0 ? diff / mx : diff;
}

template <class T>
double ulp_err(const std::vector<float>& a, const std::vector<double>& ref) {
  double mx = 0, diff = 0;
  for (double r : ref) mx = std::max(mx, std::fabs(r));
  // Spacing of T at mx: the next representable value above T(mx) minus T(mx).
  const float base = (float)T((float)mx);
  T up = T(base);
  up.bits = (uint16_t)(up.bits + 1);
  const double ulp = std::max((double)((float)up - base), 1e-30);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs((double)a[i] - (double)(float)T((float)ref[i])));
  }
  return diff / ulp;
}
template double ulp_err<half>(const std::vector<float>&, const std::vector<double>&);
template double ulp_err<bfloat16_t>(const std::vector<float>&, const std::vector<double>&);

std::vector<Geo> public_cases() {
  std::ifstream f(std::string(TBEX_TEST_DATA_DIR) + "/tbe_public_cases.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<Geo> out;
  for (const auto& c : j) {
    if (c.value("expect", "") != "success" || c.value("groups", 1) != 1) continue;
    Geo g;
    g.name = c["case_name"].get<std::string>();
    const auto x = c["x_shape_ncdhw"], dy = c["dedy_shape_ncdhw"], w = c["filter_ncdhw"];
    g.n = x[0]; g.cin = x[1]; g.cout = dy[1];
    for (int i = 0; i < 3; ++i) {
      g.in[i] = x[2 + i]; g.out[i] = dy[2 + i]; g.k[i] = w[2 + i];
      g.s[i] = c["strides_dhw"][i]; g.d[i] = c["dilations_dhw"][i];
    }
    for (int i = 0; i < 6; ++i) g.p[i] = c["pads"][i];
    out.push_back(g);
  }
  return out;
}

std::vector<Geo> random_geometries(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return (int64_t)std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Geo> out;
  while ((int)out.size() < count) {
    Geo g;
    g.n = pick(1, 2); g.cin = pick(1, 40); g.cout = pick(1, 40);
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      g.in[i] = pick(1, i == 0 ? 5 : 14);
      g.k[i] = pick(1, 3);
      g.s[i] = pick(1, 3);
      g.d[i] = pick(1, 2);
      const int64_t reach = (g.k[i] - 1) * g.d[i];
      g.p[2 * i] = pick(0, (int)reach);
      g.p[2 * i + 1] = pick(0, (int)reach);
      const int64_t padded = g.in[i] + g.p[2 * i] + g.p[2 * i + 1];
      if (padded < reach + 1) { ok = false; break; }
      g.out[i] = (padded - reach - 1) / g.s[i] + 1;
    }
    if (!ok) continue;
    g.name = "random_" + std::to_string(out.size());
    out.push_back(g);
  }
  return out;
}

}  // namespace ascendc_test
