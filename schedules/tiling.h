#pragma once
/** Small helpers shared by the schedule families. */
#include <algorithm>
#include <cstdint>
#include <string>

#include "ops/ops.h"
#include "tbex/problem.h"

namespace tbex::sched {

/** Largest divisor of n that is <= cap (at least 1). */
inline int largest_divisor_upto(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return (int)d;
  return 1;
}

/** Valid input lanes of a real group's first input block: min(16, mag_factor * Cin/groups). */
inline int cin_valid(const Problem& p) {
  return (int)std::min<int64_t>(16, p.group.mag_factor * p.geo.cin_pg());
}

/** Sizes the cost model's passes count (TBE layouts, padding lanes included). */
inline double input_bytes(const Problem& p) { return p.in_dtype == DType::kFloat32 ? 4 : 2; }
inline double dy_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return double(g.n) * g.out[0] * g.out[1] * g.out[2] * g.cout1() * 16;
}
/** dy zero-padded by the taps' reach in the stride-phase frame, as dX stages it. */
inline double staged_dy_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  double e = double(g.n) * g.cout1() * 16;
  for (int i = 0; i < 3; ++i) e *= g.out[i] + double(g.kernel[i] - 1) * g.dilation[i] / g.stride[i];
  return e;
}
inline double dx_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return double(g.n) * g.in[0] * g.in[1] * g.in[2] * g.cin1() * 16;
}
/** dW's output (= the filter's FRACTAL_Z_3D) entries. */
inline double dw_out_elems(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return double(p.group.real_g) * g.kernel[0] * g.kernel[1] * g.kernel[2] * p.group.cin1_g *
         p.group.cout_g * 16;
}
inline bool is_strided(const Problem& p) {
  return p.geo.stride[0] * p.geo.stride[1] * p.geo.stride[2] > 1;
}

/** "" when the first input block of a real group holds few valid lanes (at most `max_valid`):
 * the few-input-channel schedules put output channels in the lanes instead; else why not
 * (`dense` names the schedule whose c0 lanes are then useful). */
inline std::string few_cin_why_not(const Problem& p, int max_valid, const std::string& dense) {
  if (p.group.cin1_g != 1)
    return std::to_string(p.group.cin1_g) + " input blocks per real group fill c0 lanes";
  const int cv = cin_valid(p);
  if (cv > max_valid)
    return std::to_string(cv) + " valid input channels per block (more than " +
           std::to_string(max_valid) + ") fill " + dense + "'s c0 lanes";
  return "";
}

/** "" when dW's fp32 output fits an accumulator held apart from it (under 1 GiB), else why not. */
inline std::string dw_accumulator_why_not(const Problem& p) {
  const int64_t bytes = 4 * p.group.real_g * p.geo.kernel[0] * p.geo.kernel[1] * p.geo.kernel[2] *
                        p.group.cin1_g * p.group.cout_g * 16;
  if (bytes >= (int64_t(1) << 30))
    return "output of " + std::to_string(bytes) + " bytes is too big to accumulate apart";
  return "";
}

/** dW with few output tiles for the threads: acc's reduction split over batch (or depth, when
 * the batch is smaller than `parts`) into `parts` partial sums indexed by `part` (an rfactor),
 * each computed with the schedule's tiles, then added up. Returns the Func of the partial
 * sums; r_mid / r_outer (depth / batch loops) become the loop left inside a part. */
inline Halide::Func split_dw_reduction(ops::DwAlgorithm& a, const Problem& p, int parts,
                                       const Halide::Var& part, Halide::RVar& r_mid,
                                       Halide::RVar& r_outer) {
  Halide::RVar so("so"), si("si");
  const bool by_batch = p.geo.n >= parts;
  const int64_t extent = by_batch ? p.geo.n : p.geo.out[0];
  Halide::Func body = a.acc.update()
                          .split(by_batch ? a.r[3] : a.r[2], so, si,
                                 (int)((extent + parts - 1) / parts),
                                 Halide::TailStrategy::GuardWithIf)
                          .rfactor(so, part);
  (by_batch ? r_outer : r_mid) = si;
  return body;
}

/** dX's stride-phase frame: positions of one phase along dim i (0 d, 1 h, 2 w), i.e. the q
 * with x + pad = q*s + phase for x in [0, in); at least 1 (a short input with pads beyond the
 * stride can leave phase 0 empty), so tile sizes derived from it stay positive. */
inline int64_t phase_extent(const Problem& p, int i) {
  const ConvGeometry& g = p.geo;
  const int64_t pl = g.pads[2 * i], s = g.stride[i];
  return std::max<int64_t>(1, (g.in[i] - 1 + pl) / s - pl / s + (pl % s == 0 ? 1 : 0));
}

}  // namespace tbex::sched
