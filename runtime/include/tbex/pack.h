#pragma once
/** Packing between strided framework tensors and the dense TBE layouts the kernels use, with
 * element type conversion on the way (fp16 / bf16 / fp32, round to nearest even).
 *
 * The dense converters of layout.h move bits of one type; these read any strided view (a
 * PyTorch slice, an aclTensor view with offset) and convert, so a framework call packs each
 * operand exactly once. Work is split over tbex's thread pool. */
#include <array>
#include <cstdint>
#include <type_traits>

#include "tbex/dtype.h"

namespace tbex {

/** A strided 5-D view: NCDHW activations or OIDHW weights; strides in elements (any sign-free
 * values, including 0 for broadcast unit dims). */
struct View5 {
  void* data = nullptr;
  std::array<int64_t, 5> shape{};
  std::array<int64_t, 5> strides{};
  DType dtype = DType::kFloat32;
};

/** Extra rounding of values while packing: kHf32 rounds fp32 sources to Ascend's HF32. */
enum class PackRound { kNone, kHf32 };

/** NCDHW view -> dense 6HD (N, D, C1, H, W, 16) of dst_dtype; padding lanes are 0.
 * nonfinite (optional): set to whether a packed value is NaN or Inf (after the conversion: an
 * fp32 1e5 packed as fp16 is Inf). */
void pack_6hd(const View5& src, void* dst, DType dst_dtype, PackRound round = PackRound::kNone,
              bool* nonfinite = nullptr);
/** Dense 6HD of src_dtype -> NCDHW view (padding lanes are ignored). */
void unpack_6hd(const void* src, DType src_dtype, const View5& dst);

/** OIDHW weights [Cout, Cin/groups, Kd, Kh, Kw] -> dense FRACTAL_Z_3D (docs/layouts.md).
 * transpose_groups: pack the per-group transpose T [Cin, Cout/groups, Kd, Kh, Kw],
 * T[g*cin_pg + i, o] = W[g*cout_pg + o, i], instead (the forward conv's filter). */
void pack_fz3d(const View5& src, int64_t groups, bool transpose_groups, void* dst,
               DType dst_dtype, PackRound round = PackRound::kNone, bool* nonfinite = nullptr);
/** Dense FRACTAL_Z_3D of src_dtype -> OIDHW view [Cout, Cin/groups, Kd, Kh, Kw]. */
void unpack_fz3d(const void* src, DType src_dtype, int64_t groups, const View5& dst);

/** Calls body(ctx, i) for i in [0, n) on tbex's thread pool; the first exception is rethrown
 * after every task has finished. */
void parallel_range_raw(int64_t n, void (*body)(void* ctx, int64_t i), void* ctx);

template <class F>
void parallel_range(int64_t n, F&& f) {
  using Fn = std::remove_reference_t<F>;
  parallel_range_raw(n, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); }, &f);
}

}  // namespace tbex
