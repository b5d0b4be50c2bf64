#pragma once
/** What tbex's hand-written tile kernels (tbex_amx_dx, tbex_amx_dw) share besides the tile
 * registers (amx_tiles.h): their view of a 6HD buffer, the box of a call, staging memory, the
 * answer to a bounds query, and the dX kernels' staging of dy rows. */
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

/** Where the dX kernels (tbex_amx_dx, tbex_amx_dx_cols) stage dy: a position's kk channels side
 * by side (`pos` bytes: 2*kk padded to a divisor of 64, so no tile row straddles two lines), a
 * row's chunks of kk channels `chunk` bytes apart, real groups `group` bytes apart; the staged
 * row starts at dy position `pw0`. */
struct DyStage {
  int64_t pos, chunk, group;
  int pw0;
};

/** A position's bytes in a DyStage of kk channels a chunk. */
inline int64_t staged_position_bytes(int kk) { return 64 % (kk * 2) == 0 ? kk * 2 : 64; }

/** A run of one staged position's channels that lie in one 6HD block: `bytes` bytes from
 * `src` (the block's row, null past dy's last block: zeros) at lane byte `lane`, to byte `at`
 * of the staged position. */
struct Run {
  const uint8_t* src;
  int lane, at, bytes;
};

/** One staged chunk: n positions from p0, `pos` bytes each (its channels side by side, from
 * `runs`), positions ws bytes apart in the source rows, inside [0, Wo); 0 elsewhere. Chunks of
 * whole blocks (kk 16 or 32, the common case) copy 32-byte runs of a fixed size. */
inline void stage_chunk(uint8_t* dst, int64_t pos, const Run* runs, int nruns, int64_t ws, int p0, int n,
                        int Wo) {
  const int lo = std::clamp(-p0, 0, n), hi = std::clamp(Wo - p0, lo, n);
  std::memset(dst, 0, size_t(lo * pos));
  std::memset(dst + hi * pos, 0, size_t((n - hi) * pos));
  for (int k = 0; k < nruns; ++k) {
    const Run& r = runs[k];
    uint8_t* d = dst + r.at;
    if (r.src == nullptr) {
      for (int i = lo; i < hi; ++i) std::memset(d + i * pos, 0, size_t(r.bytes));
    } else if (r.bytes == 32) {
      for (int i = lo; i < hi; ++i) std::memcpy(d + i * pos, r.src + (p0 + i) * ws, 32);
    } else {
      for (int i = lo; i < hi; ++i) std::memcpy(d + i * pos, r.src + (p0 + i) * ws + r.lane, size_t(r.bytes));
    }
  }
}

/** Stages dy's row (oh, od, b) for `groups` real groups from g_lo (cout_g channels each, Co1
 * blocks in dy): each chunk of kk channels as runs within 6HD blocks (at most three), into
 * dst + group * s.group + chunk * s.chunk, `positions` positions from s.pw0. */
inline void stage_row(uint8_t* dst, const DyStage& s, const View6& dy, int cout_g, int kk, int Co1, int g_lo,
                      int groups, int oh, int od, int b, int positions, int Wo) {
  for (int gl = 0; gl < groups; ++gl)
    for (int kc = 0; kc < cout_g / kk; ++kc) {
      const int first = (g_lo + gl) * cout_g + kc * kk;
      Run runs[3];
      int nruns = 0;
      for (int c = first, end = c + kk; c < end;) {
        const int blk = c / 16, lane = c % 16, take = std::min(16 - lane, end - c);
        runs[nruns++] = {blk < Co1 ? dy.row(oh, blk, od, b) : nullptr, lane * 2, (c - first) * 2, take * 2};
        c += take;
      }
      stage_chunk(dst + gl * s.group + kc * s.chunk, s.pos, runs, nruns, dy.w, s.pw0, positions, Wo);
    }
}

}  // namespace tbex::amx
