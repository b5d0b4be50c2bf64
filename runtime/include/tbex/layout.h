#pragma once
/** Converters between framework layouts and TBE's: NCDHW <-> 6HD (NDC1HWC0), and
 * OIDHW <-> FRACTAL_Z_3D (grouped packing included; docs/layouts.md).
 *
 * They only move elements, so they work on any 2- or 4-byte element type (fp16, bf16, fp32).
 * Padding lanes / cross-group entries of the TBE layouts are written as zero bits; the inverse
 * conversions ignore them. Round trips are exact. */
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tbex {

using Dims5 = std::array<int64_t, 5>;

/** 6HD shape (N, D, C1, H, W, 16) for an NCDHW tensor. */
std::vector<int64_t> shape_6hd(const Dims5& ncdhw);
void ncdhw_to_6hd(const void* src, void* dst, const Dims5& ncdhw, size_t elem_size);
void ncdhw_from_6hd(const void* src, void* dst, const Dims5& ncdhw, size_t elem_size);

/** FRACTAL_Z_3D storage shape (real_g*Kd*cin1_g*Kh*Kw, cout_g/16, 16, 16) for weights
 * oidhw = [Cout, Cin/groups, Kd, Kh, Kw] of a convolution with `groups` groups. */
std::vector<int64_t> shape_fz3d(const Dims5& oidhw, int64_t groups);
void oidhw_to_fz3d(const void* src, void* dst, const Dims5& oidhw, int64_t groups, size_t elem_size);
void oidhw_from_fz3d(const void* src, void* dst, const Dims5& oidhw, int64_t groups,
                     size_t elem_size);

}  // namespace tbex
