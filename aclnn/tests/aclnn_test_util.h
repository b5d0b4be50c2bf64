#pragma once
// Host tensors behind aclTensor views (any strides / offset, sentinel-filled storage), a float64
// reference of conv forward/backward from the definitions, and comparison with explicit
// tolerances. Used by the aclnn gtests.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "tbex/dtype.h"

namespace aclnn_test {

/** Written into every output element before a call: exact in fp16 and bf16, and never a result
 * of these tests. */
constexpr double kSentinel = -1536.0;

/** fp16 and bf16 are 2-byte; everything else is held as fp32 (the unsupported dtypes only need
 * memory behind them). */
inline bool is_16bit(aclDataType t) { return t == ACL_FLOAT16 || t == ACL_BF16; }
inline size_t elem_size(aclDataType t) { return is_16bit(t) ? 2 : 4; }

inline double load(const unsigned char* p, aclDataType t) {
  if (!is_16bit(t)) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == ACL_FLOAT16 ? tbex::half_to_float(h) : tbex::bf16_to_float(h);
}

inline void store(unsigned char* p, aclDataType t, double v) {
  if (!is_16bit(t)) {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
    return;
  }
  uint16_t h = t == ACL_FLOAT16 ? tbex::float_to_half(static_cast<float>(v))
                                : tbex::float_to_bf16(static_cast<float>(v));
  std::memcpy(p, &h, 2);
}

/** v rounded to what dtype t holds. */
inline double round_to(aclDataType t, double v) {
  unsigned char b[4];
  store(b, t, v);
  return load(b, t);
}

/** fp32 v rounded to Ascend's HF32 (11 mantissa bits, nearest even; finite v only). */
inline double round_hf32(double v) {
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFu + ((bits >> 12) & 1u);
  bits &= ~0xFFFu;
  std::memcpy(&f, &bits, 4);
  return f;
}

/** How a view sits in its storage: dims ordered by `order` (outermost first, identity when
 * empty), `gap` extra elements after every dim's extent, `offset` elements before the view. */
struct Layout {
  std::vector<int> order;
  int64_t gap = 0;
  int64_t offset = 0;
};

/** A host buffer and an aclTensor view of it. */
class HostTensor {
 public:
  HostTensor(std::vector<int64_t> dims, aclDataType dtype, aclFormat format, Layout layout = {})
      : dims_(std::move(dims)), dtype_(dtype), offset_(layout.offset) {
    const size_t r = dims_.size();
    std::vector<int> order = layout.order;
    if (order.empty()) {
      order.resize(r);
      std::iota(order.begin(), order.end(), 0);
    }
    strides_.assign(r, 0);
    int64_t step = 1;
    for (size_t i = r; i-- > 0;) {
      strides_[order[i]] = step;
      step *= std::max<int64_t>(dims_[order[i]], 1) + layout.gap;
    }
    storage_elems_ = offset_ + step + layout.gap;
    storage_.assign(static_cast<size_t>(storage_elems_) * elem_size(dtype_), 0);
    fill_storage(kSentinel);
    const int64_t storage_dims[1] = {storage_elems_};
    handle_ = aclCreateTensor(dims_.data(), r, dtype_, strides_.data(), offset_, format,
                              storage_dims, 1, storage_.data());
    EXPECT_NE(handle_, nullptr) << aclGetRecentErrMsg();
  }
  ~HostTensor() { aclDestroyTensor(handle_); }
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  aclTensor* get() const { return handle_; }
  /** Destroys the aclTensor, keeping the memory. */
  void destroy_handle() {
    aclDestroyTensor(handle_);
    handle_ = nullptr;
  }
  aclDataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t numel() const {
    return std::accumulate(dims_.begin(), dims_.end(), int64_t{1}, std::multiplies<int64_t>());
  }

  /** Storage element of view element `linear` (row-major over dims). */
  int64_t storage_index(int64_t linear) const {
    int64_t at = offset_;
    for (size_t i = dims_.size(); i-- > 0;) {
      at += (linear % dims_[i]) * strides_[i];
      linear /= dims_[i];
    }
    return at;
  }
  double get(int64_t linear) const { return load(ptr(storage_index(linear)), dtype_); }
  void set(int64_t linear, double v) { store(ptr(storage_index(linear)), dtype_, v); }
  std::vector<double> values() const {
    std::vector<double> v(numel());
    for (int64_t i = 0; i < numel(); ++i) v[i] = get(i);
    return v;
  }
  /** Random values in [-1, 1], rounded to the dtype; returned as stored. */
  std::vector<double> fill_random(std::mt19937& rng) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<double> v(numel());
    for (int64_t i = 0; i < numel(); ++i) {
      v[i] = round_to(dtype_, dist(rng));
      set(i, v[i]);
    }
    return v;
  }
  void fill_storage(double v) {
    for (int64_t i = 0; i < storage_elems_; ++i) store(ptr(i), dtype_, v);
  }
  /** Storage elements outside the view that no longer hold the sentinel. */
  int64_t touched_outside_view() const {
    std::vector<char> in_view(storage_elems_, 0);
    for (int64_t i = 0; i < numel(); ++i) in_view[storage_index(i)] = 1;
    int64_t n = 0;
    for (int64_t i = 0; i < storage_elems_; ++i)
      if (!in_view[i] && load(ptr(i), dtype_) != kSentinel) ++n;
    return n;
  }
  /** Storage elements (anywhere) that no longer hold the sentinel. */
  int64_t touched() const {
    int64_t n = 0;
    for (int64_t i = 0; i < storage_elems_; ++i) n += load(ptr(i), dtype_) != kSentinel;
    return n;
  }

 private:
  unsigned char* ptr(int64_t i) { return storage_.data() + i * elem_size(dtype_); }
  const unsigned char* ptr(int64_t i) const { return storage_.data() + i * elem_size(dtype_); }

  std::vector<int64_t> dims_, strides_;
  aclDataType dtype_;
  int64_t offset_ = 0, storage_elems_ = 0;
  std::vector<unsigned char> storage_;
  aclTensor* handle_ = nullptr;
};

struct IntArray {
  explicit IntArray(std::vector<int64_t> v) : values(std::move(v)) {
    handle = aclCreateIntArray(values.data(), values.size());
  }
  ~IntArray() { aclDestroyIntArray(handle); }
  IntArray(const IntArray&) = delete;
  IntArray& operator=(const IntArray&) = delete;
  std::vector<int64_t> values;
  aclIntArray* handle = nullptr;
};

struct BoolArray {
  explicit BoolArray(std::vector<bool> v) {
    bool buf[8] = {};
    for (size_t i = 0; i < v.size(); ++i) buf[i] = v[i];
    handle = aclCreateBoolArray(buf, v.size());
  }
  ~BoolArray() { aclDestroyBoolArray(handle); }
  BoolArray(const BoolArray&) = delete;
  BoolArray& operator=(const BoolArray&) = delete;
  aclBoolArray* handle = nullptr;
};

/** A convolution in framework terms (input / weight shapes and the aclnn arguments). */
struct Geometry {
  std::vector<int64_t> x, w;  ///< input [N, Cin, spatial...]; weight (see transposed)
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;

  size_t rank() const { return x.size(); }
  size_t sp() const { return x.size() - 2; }
  int64_t pad_lo(size_t d) const { return padding.size() == 2 * sp() ? padding[2 * d] : padding[d]; }
  int64_t pad_hi(size_t d) const {
    return padding.size() == 2 * sp() ? padding[2 * d + 1] : padding[d];
  }
  int64_t op(size_t d) const { return output_padding.empty() ? 0 : output_padding[d]; }
  int64_t cin() const { return x[1]; }
  int64_t cout() const { return transposed ? w[1] * groups : w[0]; }
  /** gradOutput's shape. */
  std::vector<int64_t> y() const {
    std::vector<int64_t> s{x[0], cout()};
    for (size_t d = 0; d < sp(); ++d) {
      const int64_t k = dilation[d] * (w[d + 2] - 1) + 1;
      s.push_back(transposed ? (x[d + 2] - 1) * stride[d] - pad_lo(d) - pad_hi(d) + k + op(d)
                             : (x[d + 2] + pad_lo(d) + pad_hi(d) - k) / stride[d] + 1);
    }
    return s;
  }
};

/** Gradients from the definitions, in float64, with the sums of |terms| (for tolerances). */
struct Reference {
  std::vector<double> dx, dw, db, dx_abs, dw_abs, db_abs;
};

inline Reference reference(const Geometry& g, const std::vector<double>& x,
                           const std::vector<double>& w, const std::vector<double>& dy) {
  // Everything as 3D: missing leading spatial dims have size 1.
  auto pad3 = [&](const std::vector<int64_t>& full, int64_t fill) {
    std::array<int64_t, 3> a{fill, fill, fill};
    for (size_t d = 0; d < g.sp(); ++d) a[3 - g.sp() + d] = full[d];
    return a;
  };
  std::vector<int64_t> ys = g.y();
  std::array<int64_t, 3> xi = pad3({g.x.begin() + 2, g.x.end()}, 1);
  std::array<int64_t, 3> yo = pad3({ys.begin() + 2, ys.end()}, 1);
  std::array<int64_t, 3> kk = pad3({g.w.begin() + 2, g.w.end()}, 1);
  std::array<int64_t, 3> st = pad3(g.stride, 1), dl = pad3(g.dilation, 1), lo{0, 0, 0};
  for (size_t d = 0; d < g.sp(); ++d) lo[3 - g.sp() + d] = g.pad_lo(d);
  const int64_t n = g.x[0], cin = g.cin(), cout = g.cout(), cin_g = cin / g.groups,
                cout_g = cout / g.groups;
  const int64_t xsp = xi[0] * xi[1] * xi[2], ysp = yo[0] * yo[1] * yo[2],
                ksp = kk[0] * kk[1] * kk[2];
  Reference r;
  r.dx.assign(x.size(), 0.0);
  r.dx_abs = r.dx;
  r.dw.assign(w.size(), 0.0);
  r.dw_abs = r.dw;
  r.db.assign(cout, 0.0);
  r.db_abs = r.db;
  // The small side s (forward input of a normal conv, of a transposed conv too) maps to the
  // big side b = s * stride + k * dilation - pad_lo; for a normal conv b is the input.
  const std::array<int64_t, 3>& small = g.transposed ? xi : yo;
  const std::array<int64_t, 3>& big = g.transposed ? yo : xi;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t ci = 0; ci < cin_g; ++ci)
        for (int64_t co = 0; co < cout_g; ++co)
          for (int64_t s0 = 0; s0 < small[0]; ++s0)
            for (int64_t s1 = 0; s1 < small[1]; ++s1)
              for (int64_t s2 = 0; s2 < small[2]; ++s2)
                for (int64_t k0 = 0; k0 < kk[0]; ++k0)
                  for (int64_t k1 = 0; k1 < kk[1]; ++k1)
                    for (int64_t k2 = 0; k2 < kk[2]; ++k2) {
                      const int64_t b0 = s0 * st[0] + k0 * dl[0] - lo[0];
                      const int64_t b1 = s1 * st[1] + k1 * dl[1] - lo[1];
                      const int64_t b2 = s2 * st[2] + k2 * dl[2] - lo[2];
                      if (b0 < 0 || b0 >= big[0] || b1 < 0 || b1 >= big[1] || b2 < 0 ||
                          b2 >= big[2])
                        continue;
                      const int64_t small_at = (s0 * small[1] + s1) * small[2] + s2;
                      const int64_t big_at = (b0 * big[1] + b1) * big[2] + b2;
                      const int64_t xc = grp * cin_g + ci, yc = grp * cout_g + co;
                      const int64_t xa = (b * cin + xc) * xsp + (g.transposed ? small_at : big_at);
                      const int64_t ya = (b * cout + yc) * ysp + (g.transposed ? big_at : small_at);
                      const int64_t k = (k0 * kk[1] + k1) * kk[2] + k2;
                      const int64_t wa =
                          g.transposed ? (xc * cout_g + co) * ksp + k : (yc * cin_g + ci) * ksp + k;
                      r.dx[xa] += dy[ya] * w[wa];
                      r.dx_abs[xa] += std::fabs(dy[ya] * w[wa]);
                      r.dw[wa] += x[xa] * dy[ya];
                      r.dw_abs[wa] += std::fabs(x[xa] * dy[ya]);
                    }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t c = 0; c < cout; ++c)
      for (int64_t i = 0; i < ysp; ++i) {
        r.db[c] += dy[(b * cout + c) * ysp + i];
        r.db_abs[c] += std::fabs(dy[(b * cout + c) * ysp + i]);
      }
  return r;
}

/** Relative error of the final rounding to dtype t (half an ulp). */
inline double out_eps(aclDataType t) {
  return t == ACL_FLOAT ? std::ldexp(1.0, -24) : t == ACL_FLOAT16 ? std::ldexp(1.0, -11)
                                                                  : std::ldexp(1.0, -8);
}

/** |got - ref| <= out_eps*|ref| + acc_eps*sum|terms| + floor (fp16 subnormal spacing), for
 * every element; reports the first few mismatches. */
inline void expect_close(const std::string& what, const HostTensor& got,
                         const std::vector<double>& ref, const std::vector<double>& abs_sum,
                         double acc_eps) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
  const double floor = got.dtype() == ACL_FLOAT16 ? std::ldexp(1.0, -24) : 1e-30;
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double v = got.get(static_cast<int64_t>(i));
    const double tol = 1.001 * out_eps(got.dtype()) * std::fabs(ref[i]) + acc_eps * abs_sum[i] + floor;
    if (!(std::fabs(v - ref[i]) <= tol) && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "] = " << v << ", reference " << ref[i] << " (tol "
                    << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements off";
}

}  // namespace aclnn_test
