#include "tbex/pack.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

#include "tbex/errors.h"
#include "tbex/group_dict.h"
#include "tbex/thread_pool.h"

namespace tbex {
namespace {

// Storage of each dtype and its conversions through fp32. Same-type copies move bits (exact).
template <DType T> struct Elem;
template <> struct Elem<DType::kFloat32> {
  using S = float;
  static float get(S v) { return v; }
  static S put(float f) { return f; }
};
template <> struct Elem<DType::kFloat16> {
  using S = uint16_t;
  static float get(S v) { return half_to_float(v); }
  static S put(float f) { return float_to_half(f); }
};
template <> struct Elem<DType::kBFloat16> {
  using S = uint16_t;
  static float get(S v) { return bf16_to_float(v); }
  static S put(float f) { return float_to_bf16(f); }
};

/** Whether a stored value is NaN or Inf (exponent all ones). */
template <DType T>
bool not_finite(typename Elem<T>::S v) {
  if constexpr (T == DType::kFloat32) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return (b & 0x7f800000u) == 0x7f800000u;
  } else if constexpr (T == DType::kFloat16) {
    return (v & 0x7c00u) == 0x7c00u;
  } else {
    return (v & 0x7f80u) == 0x7f80u;
  }
}

template <DType From, DType To, bool kHf32>
struct Convert {
  using Src = typename Elem<From>::S;
  using Dst = typename Elem<To>::S;
  static constexpr DType kTo = To;
  static Dst apply(Src v) {
    if constexpr (From == To && !kHf32) {
      return v;
    } else {
      float f = Elem<From>::get(v);
      if constexpr (kHf32 && From == DType::kFloat32) f = round_to_hf32(f);
      return Elem<To>::put(f);
    }
  }
};

/** Calls f(Convert<From, To, hf32>{}) for the runtime dtypes. */
template <class F>
void dispatch(DType from, DType to, PackRound round, F&& f) {
  auto with_to = [&](auto from_tag) {
    constexpr DType kFrom = decltype(from_tag)::value;
    auto go = [&](auto to_tag) {
      constexpr DType kTo = decltype(to_tag)::value;
      if (round == PackRound::kHf32 && kFrom == DType::kFloat32)
        f(Convert<kFrom, kTo, true>{});
      else
        f(Convert<kFrom, kTo, false>{});
    };
    switch (to) {
      case DType::kFloat32: return go(std::integral_constant<DType, DType::kFloat32>{});
      case DType::kFloat16: return go(std::integral_constant<DType, DType::kFloat16>{});
      case DType::kBFloat16: return go(std::integral_constant<DType, DType::kBFloat16>{});
    }
  };
  switch (from) {
    case DType::kFloat32: return with_to(std::integral_constant<DType, DType::kFloat32>{});
    case DType::kFloat16: return with_to(std::integral_constant<DType, DType::kFloat16>{});
    case DType::kBFloat16: return with_to(std::integral_constant<DType, DType::kBFloat16>{});
  }
}

void check_view(const View5& v, const char* what) {
  internal_check(v.data != nullptr, std::string(what) + ": null data");
  for (int i = 0; i < 5; ++i)
    internal_check(v.shape[i] > 0 && v.strides[i] >= 0, std::string(what) + ": bad view");
}

/** 6HD block (n, d, c1) <-> strided NCDHW, one h row of 16 lanes x W at a time (stays in L1). */
template <bool kPack, class Cv>
void copy_6hd(const View5& v, void* packed, std::atomic<bool>* found = nullptr) {
  using Src = typename Cv::Src;
  using Dst = typename Cv::Dst;
  const int64_t N = v.shape[0], C = v.shape[1], D = v.shape[2], H = v.shape[3], W = v.shape[4];
  const int64_t sn = v.strides[0], sc = v.strides[1], sd = v.strides[2], sh = v.strides[3],
                sw = v.strides[4];
  const int64_t C1 = ceil_div(C, kC0);
  parallel_range(N * D * C1, [&](int64_t blk) {
    const int64_t c1 = blk % C1, d = (blk / C1) % D, n = blk / (C1 * D);
    const int64_t nvalid = std::min<int64_t>(kC0, C - c1 * kC0);
    const int64_t base = n * sn + c1 * kC0 * sc + d * sd;
    const int64_t pbase = blk * H * W * kC0;
    bool hit = false;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t prow = pbase + h * W * kC0;
      for (int64_t c0 = 0; c0 < kC0; ++c0) {
        const int64_t vrow = base + c0 * sc + h * sh;
        if constexpr (kPack) {
          Dst* out = static_cast<Dst*>(packed) + prow + c0;
          const Src* in = static_cast<const Src*>(v.data) + vrow;
          if (c0 >= nvalid) {
            for (int64_t w = 0; w < W; ++w) out[w * kC0] = Dst{0};
          } else {
            for (int64_t w = 0; w < W; ++w) {
              const Dst o = Cv::apply(in[w * sw]);
              out[w * kC0] = o;
              hit |= not_finite<Cv::kTo>(o);
            }
          }
        } else {
          if (c0 >= nvalid) break;
          const Src* in = static_cast<const Src*>(packed) + prow + c0;
          Dst* out = static_cast<Dst*>(v.data) + vrow;
          for (int64_t w = 0; w < W; ++w) out[w * sw] = Cv::apply(in[w * kC0]);
        }
      }
    }
    if (hit && found) found->store(true, std::memory_order_relaxed);
  });
}

/** FRACTAL_Z_3D <-> strided OIDHW view, one (group, output channel) per task.
 * Logical weights L [Cout_l, cin_pg_l, K]: L = W, or the per-group transpose of W. */
template <bool kPack, class Cv>
void copy_fz3d(const View5& v, int64_t groups, bool transpose, void* packed, const GroupDict& gd,
               std::atomic<bool>* found = nullptr) {
  using Src = typename Cv::Src;
  using Dst = typename Cv::Dst;
  const auto& s = v.shape;
  const auto& st = v.strides;
  // Logical per-group channel counts.
  const int64_t cout_pg = transpose ? s[1] : s[0] / groups;
  const int64_t cin_pg = transpose ? s[0] / groups : s[1];
  const int64_t Kd = s[2], Kh = s[3], Kw = s[4];
  const int64_t khw = Kh * Kw;
  const int64_t f_khw = gd.cout_g * kC0, f_c1 = khw * f_khw, f_kd = gd.cin1_g * f_c1,
                f_g = Kd * f_kd;
  parallel_range(groups * cout_pg, [&](int64_t task) {
    const int64_t gg = task / cout_pg, co = task % cout_pg;
    const int64_t g = gg / gd.mag_factor, e = gg % gd.mag_factor;
    const int64_t p_out = e * cout_pg + co;
    bool hit = false;
    for (int64_t ci = 0; ci < cin_pg; ++ci) {
      const int64_t p_in = e * cin_pg + ci;
      const int64_t fbase = g * f_g + (p_in / kC0) * f_c1 + p_out * kC0 + p_in % kC0;
      const int64_t vbase = transpose ? (gg * cin_pg + ci) * st[0] + co * st[1]
                                      : (gg * cout_pg + co) * st[0] + ci * st[1];
      for (int64_t kd = 0; kd < Kd; ++kd)
        for (int64_t kh = 0; kh < Kh; ++kh)
          for (int64_t kw = 0; kw < Kw; ++kw) {
            const int64_t f = fbase + kd * f_kd + (kh * Kw + kw) * f_khw;
            const int64_t w = vbase + kd * st[2] + kh * st[3] + kw * st[4];
            if constexpr (kPack) {
              const Dst o = Cv::apply(static_cast<const Src*>(v.data)[w]);
              static_cast<Dst*>(packed)[f] = o;
              hit |= not_finite<Cv::kTo>(o);
            } else {
              static_cast<Dst*>(v.data)[w] = Cv::apply(static_cast<const Src*>(packed)[f]);
            }
          }
    }
    if (hit && found) found->store(true, std::memory_order_relaxed);
  });
}

GroupDict fz_group_dict(const View5& v, int64_t groups, bool transpose) {
  internal_check(groups > 0 && v.shape[0] % groups == 0, "pack_fz3d: bad groups");
  const int64_t cout = transpose ? v.shape[1] * groups : v.shape[0];
  const int64_t cin = transpose ? v.shape[0] : v.shape[1] * groups;
  return derive_group_dict(cin, cout, groups);
}

}  // namespace

void parallel_range_raw(int64_t n, void (*body)(void*, int64_t), void* ctx) {
  struct Shared {
    void (*body)(void*, int64_t);
    void* ctx;
    std::mutex mu;
    std::exception_ptr error;
  } sh{body, ctx, {}, nullptr};
  internal_check(n >= 0 && n <= INT32_MAX, "parallel_range: extent out of range");
  auto task = [](void* c, int i, uint8_t*) -> int {
    auto* s = static_cast<Shared*>(c);
    try {
      s->body(s->ctx, i);
    } catch (...) {
      std::lock_guard<std::mutex> l(s->mu);
      if (!s->error) s->error = std::current_exception();
    }
    return 0;
  };
  parallel_for(&sh, task, 0, (int)n, nullptr);
  if (sh.error) std::rethrow_exception(sh.error);
}

void pack_6hd(const View5& src, void* dst, DType dst_dtype, PackRound round, bool* nonfinite) {
  check_view(src, "pack_6hd");
  std::atomic<bool> found{false};
  dispatch(src.dtype, dst_dtype, round,
           [&](auto cv) { copy_6hd<true, decltype(cv)>(src, dst, &found); });
  if (nonfinite) *nonfinite = found.load();
}

void unpack_6hd(const void* src, DType src_dtype, const View5& dst) {
  check_view(dst, "unpack_6hd");
  dispatch(src_dtype, dst.dtype, PackRound::kNone,
           [&](auto cv) { copy_6hd<false, decltype(cv)>(dst, const_cast<void*>(src)); });
}

void pack_fz3d(const View5& src, int64_t groups, bool transpose_groups, void* dst,
               DType dst_dtype, PackRound round, bool* nonfinite) {
  check_view(src, "pack_fz3d");
  const GroupDict gd = fz_group_dict(src, groups, transpose_groups);
  const int64_t count =
      gd.real_g * src.shape[2] * gd.cin1_g * src.shape[3] * src.shape[4] * gd.cout_g * kC0;
  std::memset(dst, 0, (size_t)count * dtype_size(dst_dtype));  // cross-group / padding entries
  std::atomic<bool> found{false};
  dispatch(src.dtype, dst_dtype, round, [&](auto cv) {
    copy_fz3d<true, decltype(cv)>(src, groups, transpose_groups, dst, gd, &found);
  });
  if (nonfinite) *nonfinite = found.load();
}

void unpack_fz3d(const void* src, DType src_dtype, int64_t groups, const View5& dst) {
  check_view(dst, "unpack_fz3d");
  const GroupDict gd = fz_group_dict(dst, groups, false);
  dispatch(src_dtype, dst.dtype, PackRound::kNone, [&](auto cv) {
    copy_fz3d<false, decltype(cv)>(dst, groups, false, const_cast<void*>(src), gd);
  });
}

}  // namespace tbex
