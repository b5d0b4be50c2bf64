#pragma once
/** Pieces the op definitions share (the .cpp files of ops/ only; schedules see ops.h). */
#include <array>
#include <utility>

#include "ops/ops.h"

namespace tbex::ops {

constexpr int C0 = (int)kC0;  // as int: Halide Exprs are 32-bit

/** Three sizes as the 32-bit ints Halide Exprs use: const auto [sd, sh, sw] = ints(geo.stride). */
inline std::array<int, 3> ints(const std::array<int64_t, 3>& v) {
  return {(int)v[0], (int)v[1], (int)v[2]};
}
/** The leading pads (front, top, left): x + pad is a position in the padded frame. */
inline std::array<int, 3> head_pads(const ConvGeometry& g) {
  return {(int)g.pads[0], (int)g.pads[2], (int)g.pads[4]};
}

/** Index `i` of a padded read clamped into [0, extent): the value read where the padding select
 * keeps 0. likely() marks the clamp's interior as the common case, so Halide partitions the
 * staging loops at the padding borders and their interior copies rows without a clamp, compare
 * and masked load per vector (as BoundaryConditions does). Staging stays bound by its memory
 * traffic: e1's dW moved by about 1%, compile times by under 5%. */
inline Halide::Expr clamp_inside(Halide::Expr i, int extent) {
  return Halide::clamp(Halide::likely(std::move(i)), 0, extent - 1);
}

/** `i` clamped to the extent of `input`'s dim `dim`, given by the buffer's own min and max
 * rather than by constants. Where a schedule splits a reduction into parts with a tail (an
 * output depth of 7 in 4 parts of 2), a Func reading the input is staged under the tail's
 * guard; the first simplification drops a constant clamp there (the guard proves it), and
 * Halide's image check then bounds the input over the loop nest, where the guard is lost
 * (the last part's slice 7). The buffer's min and max become constants only inside the image
 * checks, so this clamp reaches them; it is simplified away after, where it is redundant. */
inline Halide::Expr clamp_to_input(const Halide::ImageParam& input, int dim, Halide::Expr i) {
  return Halide::clamp(std::move(i), input.dim(dim).min(), input.dim(dim).max());
}

/** A kernel input: a `dims`-D ImageParam of `t` named `name`, constrained to `shape` and to
 * dense strides (C-contiguous memory). */
Halide::ImageParam input_param(DType t, int dims, const char* name, const std::vector<int64_t>& shape);

/** True where a filter entry's output-channel group `out_group` and input-channel group
 * `in_group` (original groups within real group g) are one group, and that group exists: `row`
 * (the group of the fractal row's channel n) is below mag and g*mag + row below `groups`.
 * Cross-group and padding entries are 0 (docs/group_dict.md). */
Halide::Expr same_group(Halide::Expr out_group, Halide::Expr in_group, Halide::Expr row, int mag,
                        int groups, Halide::Expr g);

/** Filter entry (c0, c1g, n, kw, kh, kd, g) of real group g as stored (fp32/fp16 value or bf16
 * bits) and whether its two channels are of one original group (n_pg / lane_pg channels per
 * group; see same_group); lanes_out: the lanes are the op's output channels (the forward conv),
 * else n is. */
template <class Algorithm>
std::pair<Halide::Expr, Halide::Expr> group_weight(Algorithm& a, const Problem& p, int n_pg,
                                                   int lane_pg, bool lanes_out, Halide::Expr n) {
  const auto [Kd, Kh, Kw] = ints(p.geo.kernel);
  const int cin1_g = (int)p.group.cin1_g;
  auto [c0, c1g, kw, kh, kd, g] = std::tie(a.c0, a.c1g, a.kw, a.kh, a.kd, a.g);
  Halide::Expr row = (((g * Kd + kd) * cin1_g + c1g) * Kh + kh) * Kw + kw;
  Halide::Expr n_group = n / n_pg, lane_group = (c1g * C0 + c0) / lane_pg;
  Halide::Expr valid = same_group(lanes_out ? lane_group : n_group, lanes_out ? n_group : lane_group,
                                  n_group, (int)p.group.mag_factor, (int)p.geo.groups, g);
  return {valid, a.filter(c0, n % C0, n / C0, row)};
}

/** a.wz(c0, c1g, n, kw, kh, kd, g): the FRACTAL_Z_3D filter of real group g in fp32, fractal lane
 * channel c1g*16+c0 innermost and row channel n, zero where the two channels are not of one
 * original group (group_weight). dX and the forward conv. */
template <class Algorithm>
void define_group_weights(Algorithm& a, const Problem& p, int n_pg, int lane_pg, bool lanes_out) {
  const auto [valid, v] = group_weight(a, p, n_pg, lane_pg, lanes_out, a.n);
  a.wz(a.c0, a.c1g, a.n, a.kw, a.kh, a.kd, a.g) = Halide::select(valid, to_f32(v), 0.0f);
}

}  // namespace tbex::ops
