#pragma once
/** Small helpers shared by the schedule families. */
#include <algorithm>
#include <cstdint>

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

/** dX's stride-phase frame: positions of one phase along dim i (0 d, 1 h, 2 w), i.e. the q
 * with x + pad = q*s + phase for x in [0, in). */
inline int64_t phase_extent(const Problem& p, int i) {
  const ConvGeometry& g = p.geo;
  const int64_t pl = g.pads[2 * i], s = g.stride[i];
  return (g.in[i] - 1 + pl) / s - pl / s + (pl % s == 0 ? 1 : 0);
}

}  // namespace tbex::sched
