#include "tbex/layout.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>

#include "tbex/errors.h"
#include "tbex/group_dict.h"

namespace tbex {
namespace {

// Channel counts above this could overflow the group_dict arithmetic (lcm with 16, mag*C);
// any tensor that large overflows int64 element counts anyway once packed.

std::string dims_str(const Dims5& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

/** Every dim > 0; the message names the offending dim and shows all of them. */
void check_dims(const Dims5& d, const char* param, const char* const names[5]) {
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] <= 0) {
      throw UserError(code::kNotPositive, param,
                      std::string(names[i]) + " must be > 0, got " + param + "=" + dims_str(d));
    }
  }
}

/** Product of `factors`, or UserError naming `param` when it overflows int64. */
int64_t checked_product(std::initializer_list<int64_t> factors, const char* param,
                        const Dims5& dims, const char* what) {
  int64_t r = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(r, f, &r)) {
      throw UserError(code::kSize, param,
                      std::string("element count of ") + what + " overflows int64 for " + param +
                          "=" + dims_str(dims));
    }
  }
  return r;
}

void check_bytes(int64_t count, size_t elem_size, const char* param, const Dims5& dims) {
  int64_t bytes;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(elem_size), &bytes)) {
    throw UserError(code::kSize, param,
                    "byte size overflows int64 for " + std::string(param) + "=" + dims_str(dims) +
                        ", elem_size=" + std::to_string(elem_size));
  }
}

void check_ptrs(const void* src, const void* dst) {
  user_check(src != nullptr, code::kValue, "src", "source pointer is null");
  user_check(dst != nullptr, code::kValue, "dst", "destination pointer is null");
}

/** Calls f(T{}) with T the unsigned integer of elem_size bytes. */
template <typename F>
void dispatch_elem(size_t elem_size, F&& f) {
  if (elem_size == 2) {
    f(uint16_t{});
  } else if (elem_size == 4) {
    f(uint32_t{});
  } else {
    throw UserError(code::kValue, "elem_size",
                    "element size must be 2 or 4 bytes, got " + std::to_string(elem_size));
  }
}

int64_t blocks16(int64_t c) { return (c - 1) / kC0 + 1; }  // c > 0; no overflow

// ------------------------------------------------------------------------------------------ 6HD

const char* const kNcdhwNames[5] = {"N", "C", "D", "H", "W"};

/** Validates an NCDHW shape; returns the 6HD element count. */
int64_t check_ncdhw(const Dims5& s) {
  check_dims(s, "ncdhw", kNcdhwNames);
  checked_product({s[0], s[1], s[2], s[3], s[4]}, "ncdhw", s, "the NCDHW tensor");
  return checked_product({s[0], s[2], blocks16(s[1]), s[3], s[4], kC0}, "ncdhw", s,
                         "the 6HD tensor");
}

// Each (n, d, c1) block is a transpose of [16 channels][H*W] (channel stride D*H*W in NCDHW) to
// [H*W][16]; tiled over H*W so both sides of a tile stay in L1.
constexpr int64_t kHwTile = 256;

template <typename T>
void to_6hd(const T* src, T* dst, const Dims5& s) {
  const int64_t N = s[0], C = s[1], D = s[2], HW = s[3] * s[4];
  const int64_t C1 = blocks16(C), cstride = D * HW;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t c1 = 0; c1 < C1; ++c1) {
        T* out = dst + ((n * D + d) * C1 + c1) * HW * kC0;
        const int64_t cbase = c1 * kC0;
        const int64_t nvalid = std::min<int64_t>(kC0, C - cbase);
        const T* in = src + ((n * C + cbase) * D + d) * HW;
        for (int64_t h0 = 0; h0 < HW; h0 += kHwTile) {
          const int64_t h1 = std::min(HW, h0 + kHwTile);
          for (int64_t c0 = 0; c0 < nvalid; ++c0) {
            const T* row = in + c0 * cstride;
            for (int64_t hw = h0; hw < h1; ++hw) out[hw * kC0 + c0] = row[hw];
          }
          for (int64_t c0 = nvalid; c0 < kC0; ++c0) {
            for (int64_t hw = h0; hw < h1; ++hw) out[hw * kC0 + c0] = T{0};
          }
        }
      }
    }
  }
}

template <typename T>
void from_6hd(const T* src, T* dst, const Dims5& s) {
  const int64_t N = s[0], C = s[1], D = s[2], HW = s[3] * s[4];
  const int64_t C1 = blocks16(C), cstride = D * HW;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t c1 = 0; c1 < C1; ++c1) {
        const T* in = src + ((n * D + d) * C1 + c1) * HW * kC0;
        const int64_t cbase = c1 * kC0;
        const int64_t nvalid = std::min<int64_t>(kC0, C - cbase);
        T* out = dst + ((n * C + cbase) * D + d) * HW;
        for (int64_t h0 = 0; h0 < HW; h0 += kHwTile) {
          const int64_t h1 = std::min(HW, h0 + kHwTile);
          for (int64_t c0 = 0; c0 < nvalid; ++c0) {
            T* row = out + c0 * cstride;
            for (int64_t hw = h0; hw < h1; ++hw) row[hw] = in[hw * kC0 + c0];
          }
        }
      }
    }
  }
}

// -------------------------------------------------------------------------------- FRACTAL_Z_3D

const char* const kOidhwNames[5] = {"Cout", "Cin/groups", "Kd", "Kh", "Kw"};

struct FzPlan {
  GroupDict gd;
  int64_t src_count = 0;  ///< OIDHW elements
  int64_t fz_count = 0;   ///< FRACTAL_Z_3D elements
};

FzPlan plan_fz3d(const Dims5& o, int64_t groups) {
  check_dims(o, "oidhw", kOidhwNames);
  FzPlan p;
  user_check(groups > 0, "E60038", "groups", "groups must be > 0, got " + std::to_string(groups));
  int64_t cin;
  if (__builtin_mul_overflow(o[1], groups, &cin) || cin > kMaxDim || o[0] > kMaxDim) {
    throw UserError(code::kRange, "oidhw",
                    "channel counts must be in range [1, " + std::to_string(kMaxDim) +
                        "]: oidhw=" + dims_str(o) + ", groups=" + std::to_string(groups));
  }
  p.gd = derive_group_dict(cin, o[0], groups);
  p.src_count = checked_product({o[0], o[1], o[2], o[3], o[4]}, "oidhw", o, "the OIDHW tensor");
  p.fz_count = checked_product(
      {p.gd.real_g, o[2], p.gd.cin1_g, o[3], o[4], p.gd.cout_g, kC0}, "oidhw", o,
      "the FRACTAL_Z_3D tensor");
  return p;
}

/** Strides (in elements) of the grouped FRACTAL_Z_3D logical layout
 * (real_g, Kd, cin1_g, Kh*Kw, cout_g, 16). */
struct FzStrides {
  int64_t khw, c1, kd, g;
  FzStrides(const Dims5& o, const GroupDict& gd) {
    khw = gd.cout_g * kC0;
    c1 = o[3] * o[4] * khw;
    kd = gd.cin1_g * c1;
    g = o[2] * kd;
  }
};

/** Copies between OIDHW (`w`) and FRACTAL_Z_3D (`fz`), in the direction of kToFz. For each
 * output channel the (Cin/groups)*Kd*Kh*Kw weights stay cache-resident while each kernel position
 * reads/writes runs of up to 16 consecutive c0 lanes in fz. */
template <bool kToFz, typename T>
void fz_copy(const T* src, T* dst, const Dims5& o, int64_t groups, const GroupDict& gd) {
  const int64_t cout_pg = o[0] / groups, cin_pg = o[1];
  const int64_t Kd = o[2], khw_n = o[3] * o[4], kvol = Kd * khw_n;
  const FzStrides st(o, gd);
  // fz offset of packed input channel p_in (c1 = p_in/16, c0 = p_in%16).
  std::vector<int64_t> in_off(static_cast<size_t>(gd.mag_factor * cin_pg));
  for (size_t p = 0; p < in_off.size(); ++p) {
    in_off[p] = static_cast<int64_t>(p) / kC0 * st.c1 + static_cast<int64_t>(p) % kC0;
  }
  for (int64_t gg = 0; gg < groups; ++gg) {
    const int64_t g = gg / gd.mag_factor, e = gg % gd.mag_factor;
    const int64_t* off = in_off.data() + e * cin_pg;
    for (int64_t co = 0; co < cout_pg; ++co) {
      const int64_t p_out = e * cout_pg + co;
      const int64_t w_base = (gg * cout_pg + co) * cin_pg * kvol;
      const int64_t fz_base = g * st.g + p_out * kC0;
      for (int64_t kd = 0; kd < Kd; ++kd) {
        for (int64_t k = 0; k < khw_n; ++k) {
          const int64_t wk = w_base + kd * khw_n + k;
          const int64_t fk = fz_base + kd * st.kd + k * st.khw;
          if constexpr (kToFz) {
            for (int64_t ci = 0; ci < cin_pg; ++ci) dst[fk + off[ci]] = src[wk + ci * kvol];
          } else {
            for (int64_t ci = 0; ci < cin_pg; ++ci) dst[wk + ci * kvol] = src[fk + off[ci]];
          }
        }
      }
    }
  }
}

template <typename T>
void to_fz3d(const T* src, T* dst, const Dims5& o, int64_t groups, const FzPlan& p) {
  // The packing is injective, so equal counts mean every entry is written.
  if (p.src_count != p.fz_count) std::memset(dst, 0, static_cast<size_t>(p.fz_count) * sizeof(T));
  fz_copy<true>(src, dst, o, groups, p.gd);
}

template <typename T>
void from_fz3d(const T* src, T* dst, const Dims5& o, int64_t groups, const FzPlan& p) {
  fz_copy<false>(src, dst, o, groups, p.gd);
}

}  // namespace

std::vector<int64_t> shape_6hd(const Dims5& ncdhw) {
  check_ncdhw(ncdhw);
  return {ncdhw[0], ncdhw[2], blocks16(ncdhw[1]), ncdhw[3], ncdhw[4], kC0};
}

void ncdhw_to_6hd(const void* src, void* dst, const Dims5& ncdhw, size_t elem_size) {
  check_ptrs(src, dst);
  dispatch_elem(elem_size, [&](auto tag) {
    using T = decltype(tag);
    check_bytes(check_ncdhw(ncdhw), elem_size, "ncdhw", ncdhw);
    to_6hd(static_cast<const T*>(src), static_cast<T*>(dst), ncdhw);
  });
}

void ncdhw_from_6hd(const void* src, void* dst, const Dims5& ncdhw, size_t elem_size) {
  check_ptrs(src, dst);
  dispatch_elem(elem_size, [&](auto tag) {
    using T = decltype(tag);
    check_bytes(check_ncdhw(ncdhw), elem_size, "ncdhw", ncdhw);
    from_6hd(static_cast<const T*>(src), static_cast<T*>(dst), ncdhw);
  });
}

std::vector<int64_t> shape_fz3d(const Dims5& oidhw, int64_t groups) {
  const FzPlan p = plan_fz3d(oidhw, groups);
  return {p.gd.real_g * oidhw[2] * p.gd.cin1_g * oidhw[3] * oidhw[4], p.gd.cout_g / kC0, kC0, kC0};
}

void oidhw_to_fz3d(const void* src, void* dst, const Dims5& oidhw, int64_t groups,
                   size_t elem_size) {
  check_ptrs(src, dst);
  dispatch_elem(elem_size, [&](auto tag) {
    using T = decltype(tag);
    const FzPlan p = plan_fz3d(oidhw, groups);
    check_bytes(p.fz_count, elem_size, "oidhw", oidhw);
    to_fz3d(static_cast<const T*>(src), static_cast<T*>(dst), oidhw, groups, p);
  });
}

void oidhw_from_fz3d(const void* src, void* dst, const Dims5& oidhw, int64_t groups,
                     size_t elem_size) {
  check_ptrs(src, dst);
  dispatch_elem(elem_size, [&](auto tag) {
    using T = decltype(tag);
    const FzPlan p = plan_fz3d(oidhw, groups);
    check_bytes(p.fz_count, elem_size, "oidhw", oidhw);
    from_fz3d(static_cast<const T*>(src), static_cast<T*>(dst), oidhw, groups, p);
  });
}

}  // namespace tbex
