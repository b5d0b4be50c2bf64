#pragma once
/** Small helpers shared by the schedule families. */
#include <algorithm>
#include <cstdint>

namespace tbex::sched {

/** Largest divisor of n that is <= cap (at least 1). */
inline int largest_divisor_upto(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return (int)d;
  return 1;
}

}  // namespace tbex::sched
