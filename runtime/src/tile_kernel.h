#pragma once
/** What tbex's hand-written tile kernels (tbex_amx_dx, tbex_amx_dw) share besides the tile
 * registers (amx_tiles.h): their view of a 6HD buffer, the box of a call, staging memory and
 * the answer to a bounds query. */
#include <cstdint>
#include <cstdlib>
#include <initializer_list>

#include "HalideRuntime.h"

namespace tbex::amx {

/** A 6HD bf16 buffer (c0, w, h, c1, d, b) as byte strides from coordinate 0. */
struct View6 {
  const uint8_t* origin;
  int64_t w, h, c1, d, b;
  const uint8_t* row(int h_, int c1_, int d_, int b_) const {
    return origin + h_ * h + c1_ * c1 + d_ * d + b_ * b;
  }
};

inline View6 view(const halide_buffer_t* buf) {
  const halide_dimension_t* d = buf->dim;
  int64_t offset = 0;
  for (int i = 0; i < 6; ++i) offset += int64_t(d[i].min) * d[i].stride;
  return {buf->host - offset * 2, int64_t(d[1].stride) * 2, int64_t(d[2].stride) * 2,
          int64_t(d[3].stride) * 2, int64_t(d[4].stride) * 2, int64_t(d[5].stride) * 2};
}

/** One dim of the box of out a call computes: [lo, hi]. */
struct Range {
  int lo, hi;
  int size() const { return hi - lo + 1; }
};
inline Range range(const halide_buffer_t* b, int i) {
  return {b->dim[i].min, b->dim[i].min + b->dim[i].extent - 1};
}

/** Memory the staging writes into (uninitialized; 64-byte aligned), freed at scope exit. Not a
 * thread_local buffer kept between calls: a thread_local with a destructor keeps the library
 * holding it loaded after dlclose (glibc), and a cached kernel links this code, so the disk
 * cache then found a stale library under a reused /proc/self/fd name. */
struct Scratch {
  uint8_t* p = nullptr;
  explicit Scratch(size_t bytes) : p(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {}
  ~Scratch() { std::free(p); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

/** A bounds query's answer for an input: dims [0, extent), innermost first. */
inline void set_dims(halide_buffer_t* buf, std::initializer_list<int> extents) {
  int i = 0;
  for (int e : extents) buf->dim[i].min = 0, buf->dim[i].extent = e, ++i;
}

}  // namespace tbex::amx
