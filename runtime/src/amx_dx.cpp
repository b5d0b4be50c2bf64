/** tbex_amx_dx (tbex/amx_dx.h): unstrided bf16 dX sums in 2 x 2 blocks of AMX tiles.
 *
 * Why by hand: a tile multiply (TDPBF16PS, 16 x 16 x 32) reaches the unit's rate only when its
 * operand tiles come from L1 and are shared. With one accumulator (all Halide 21 lowers), every
 * multiply loads both 1 KB operands; here two dy tiles (positions) and two weight tiles (input
 * blocks) feed four accumulators, so each operand load serves two multiplies. Measured on
 * Sapphire Rapids (b_c3d dX, one thread, from staged buffers): 2 x 2 blocks 29 ms, the same loops
 * with one accumulator per multiply 37 ms, Halide's dx_amx 47 ms.
 *
 * Loop order per call (Halide calls it per batch, depth and block of rows): rows, pairs of
 * input blocks, pairs of position tiles; inside a block, every tap (kd, kh, kw) and channel
 * chunk. The dy rows of a block of 16-position tiles stay in L1 across kw and across the pairs of
 * blocks; the weights stream from L2 in 1 KB runs. (Calls over every depth of a block of rows,
 * depth inside the rows so that each dy row would come from memory once, ran 7% slower on
 * b_c3d: the Kh rows of every depth, the weights and the sums overflow L2.)
 *
 * A whole tile (16 positions of one 16-lane block) is one contiguous 1 KB run of the 6HD output,
 * so it is stored there straight from its register: no round trip through a buffer whose vector
 * reloads wait for the tile store (bench/RESULTS.md, Emerald Rapids with AMX). Only a row's
 * ragged last tile goes through the buffer.
 *
 * The tile loads' rows must not cross cache lines needlessly: dy's stage is (j, w, kc, ...) so a
 * tile of 16 positions is one contiguous kk*32-byte run, and weight tiles are kk/2 contiguous
 * 64-byte rows. */
#include "tbex/amx_dx.h"

#include <algorithm>
#include <cstring>

#include "HalideRuntime.h"
#include "amx_tiles.h"

namespace {

using namespace tbex::amx;

/** Where the operands of one call live, in bytes and element strides. */
struct Frame {
  const uint8_t* dy;  // dy(0, wmin, 0, hmin, dmin, bmin, gmin)
  int64_t dy_w, dy_kc, dy_h, dy_d, dy_b, dy_g;  // byte strides
  int32_t dy_wmin, dy_hmin, dy_dmin, dy_bmin, dy_gmin;
  const uint8_t* wt;  // wt(0, 0, rowmin)
  int64_t wt_row;     // byte stride of a row
  int32_t wt_rowmin;
  int kd, kh, kw, dd, dh, dw, pf, pt, pl, cout_g, kk, taps;
};

/** One block: MP position tiles (starting at output position w) x NB input blocks (from c1),
 * every tap and channel chunk of row (h, d, b). Accumulator (i, j) is tile i*2 + j, stored at
 * dst[i*2 + j] as 16 rows (positions) of 16 lanes, dst_stride[i*2 + j] bytes apart. */
template <class T, int MP, int NB>
TBEX_AMX void block(const Frame& f, int w, int h, int d, int b, int g, int c1, float* const* dst,
                    const int64_t* dst_stride) {
  T::template zero<0>();
  if constexpr (NB > 1) T::template zero<1>();
  if constexpr (MP > 1) T::template zero<2>();
  if constexpr (MP > 1 && NB > 1) T::template zero<3>();
  const int chunks = f.cout_g / f.kk, half = f.cout_g / 2, pair_rows = f.kk / 2;
  const uint8_t* dyg = f.dy + (b - f.dy_bmin) * f.dy_b + (g - f.dy_gmin) * f.dy_g;
  for (int kd = 0; kd < f.kd; ++kd) {
    const int od = d + f.pf - kd * f.dd;
    for (int kh = 0; kh < f.kh; ++kh) {
      const int oh = h + f.pt - kh * f.dh;
      const uint8_t* row = dyg + (od - f.dy_dmin) * f.dy_d + (oh - f.dy_hmin) * f.dy_h;
      for (int kw = 0; kw < f.kw; ++kw) {
        const int ow = w + f.pl - kw * f.dw;
        const uint8_t* a0 = row + (ow - f.dy_wmin) * f.dy_w;
        const uint8_t* a1 = a0 + kRows * f.dy_w;
        const int tap = (kd * f.kh + kh) * f.kw + kw;
        const uint8_t* b0 =
            f.wt + (int64_t((c1 * f.taps + tap) * half) - f.wt_rowmin) * f.wt_row;
        const uint8_t* b1 = b0 + int64_t(f.taps) * half * f.wt_row;
        for (int kc = 0; kc < chunks; ++kc) {
          const int64_t ka = kc * f.dy_kc, kb = int64_t(kc) * pair_rows * f.wt_row;
          T::template load<4>(a0 + ka, f.dy_w);
          T::template load<6>(b0 + kb, f.wt_row);
          T::template multiply<0>();
          if constexpr (NB > 1) {
            T::template load<7>(b1 + kb, f.wt_row);
            T::template multiply<1>();
          }
          if constexpr (MP > 1) {
            T::template load<5>(a1 + ka, f.dy_w);
            T::template multiply<2>();
            if constexpr (NB > 1) T::template multiply<3>();
          }
        }
      }
    }
  }
  T::template store<0>(dst[0], dst_stride[0]);
  if constexpr (NB > 1) T::template store<1>(dst[1], dst_stride[1]);
  if constexpr (MP > 1) T::template store<2>(dst[2], dst_stride[2]);
  if constexpr (MP > 1 && NB > 1) T::template store<3>(dst[3], dst_stride[3]);
}

/** Runs `block` for every row, block pair and tile pair of the output region. */
template <class T>
TBEX_AMX void run(const Frame& f, int cin1_g, halide_buffer_t* out) {
  T::begin(f.kk);
  const halide_dimension_t* o = out->dim;  // (c0, w, h, c1, d, b)
  const int W = o[1].extent, w0 = o[1].min;
  const int tiles = (W + kRows - 1) / kRows;
  constexpr int kTile = kRows * 16;  // floats of one accumulator tile
  alignas(64) float sums[4 * kTile];
  auto* base = reinterpret_cast<float*>(out->host);
  // The output of 16 positions from wi, block c1, row (h, d, b): 16 rows o[1].stride apart.
  auto at = [&](int wi, int c1, int h, int d, int b) {
    return base + int64_t(wi - w0) * o[1].stride + int64_t(h - o[2].min) * o[2].stride +
           int64_t(c1 - o[3].min) * o[3].stride + int64_t(d - o[4].min) * o[4].stride +
           int64_t(b - o[5].min) * o[5].stride;
  };
  for (int b = o[5].min; b < o[5].min + o[5].extent; ++b)
    for (int d = o[4].min; d < o[4].min + o[4].extent; ++d)
      for (int h = o[2].min; h < o[2].min + o[2].extent; ++h)
        for (int c1 = o[3].min; c1 < o[3].min + o[3].extent;) {
          const int g = c1 / cin1_g;
          // Two blocks where the next one is in the region and in the same real group.
          const int nb = (c1 + 1 < o[3].min + o[3].extent && (c1 + 1) / cin1_g == g) ? 2 : 1;
          for (int t = 0; t < tiles; t += 2) {
            const int mp = std::min(2, tiles - t), w = w0 + t * kRows;
            // A whole tile is stored straight into the output; a ragged one (past the row's
            // end) into `sums`, its valid rows copied out after.
            float* dst[4] = {sums, sums + kTile, sums + 2 * kTile, sums + 3 * kTile};
            int64_t stride[4] = {64, 64, 64, 64};
            for (int i = 0; i < mp; ++i)
              for (int j = 0; j < nb; ++j)
                if (const int wi = w + i * kRows; w0 + W - wi >= kRows)
                  dst[i * 2 + j] = at(wi, c1 + j, h, d, b), stride[i * 2 + j] = int64_t(o[1].stride) * 4;
            if (mp == 2 && nb == 2) block<T, 2, 2>(f, w, h, d, b, g, c1, dst, stride);
            else if (mp == 2) block<T, 2, 1>(f, w, h, d, b, g, c1, dst, stride);
            else if (nb == 2) block<T, 1, 2>(f, w, h, d, b, g, c1, dst, stride);
            else block<T, 1, 1>(f, w, h, d, b, g, c1, dst, stride);
            for (int i = 0; i < mp; ++i)
              for (int j = 0; j < nb; ++j) {
                const float* s = sums + (i * 2 + j) * kTile;
                if (dst[i * 2 + j] != s) continue;  // stored in place
                const int wi = w + i * kRows, n = w0 + W - wi;
                float* o_ij = at(wi, c1 + j, h, d, b);
                for (int r = 0; r < n; ++r) std::memcpy(o_ij + int64_t(r) * o[1].stride, s + r * 16, 64);
              }
          }
          c1 += nb;
        }
  T::end();
}

void set_dim(halide_buffer_t* buf, int i, int min, int max) {
  buf->dim[i].min = min;
  buf->dim[i].extent = max - min + 1;
}

/** The extern stage on tile registers T: a bounds query's answer, or the sums. */
template <class T>
int amx_dx(halide_buffer_t* dy, halide_buffer_t* wt, int32_t kd_extent,
                           int32_t kh_extent, int32_t kw_extent, int32_t dil_d, int32_t dil_h,
                           int32_t dil_w, int32_t pad_d, int32_t pad_h, int32_t pad_w,
                           int32_t cin1_g, int32_t cout_g, int32_t kk, halide_buffer_t* out) {
  const halide_dimension_t* o = out->dim;  // (c0, w, h, c1, d, b)
  const int taps = kd_extent * kh_extent * kw_extent, half = cout_g / 2;
  if (dy->host == nullptr || wt->host == nullptr) {
    // Bounds query: whole tiles along w, every tap's reach along w, h and d.
    const int w0 = o[1].min, tiles = (o[1].extent + kRows - 1) / kRows;
    const int h1 = o[2].min + o[2].extent - 1, c11 = o[3].min + o[3].extent - 1;
    const int d1 = o[4].min + o[4].extent - 1, b1 = o[5].min + o[5].extent - 1;
    if (dy->host == nullptr) {
      set_dim(dy, 0, 0, kk - 1);
      set_dim(dy, 1, w0 + pad_w - (kw_extent - 1) * dil_w, w0 + tiles * kRows - 1 + pad_w);
      set_dim(dy, 2, 0, cout_g / kk - 1);
      set_dim(dy, 3, o[2].min + pad_h - (kh_extent - 1) * dil_h, h1 + pad_h);
      set_dim(dy, 4, o[4].min + pad_d - (kd_extent - 1) * dil_d, d1 + pad_d);
      set_dim(dy, 5, o[5].min, b1);
      set_dim(dy, 6, o[3].min / cin1_g, c11 / cin1_g);
    }
    if (wt->host == nullptr) {
      set_dim(wt, 0, 0, 1);
      set_dim(wt, 1, 0, 15);
      set_dim(wt, 2, o[3].min * taps * half, (c11 + 1) * taps * half - 1);
    }
    return 0;
  }
  Frame f;
  const halide_dimension_t* y = dy->dim;
  f.dy = dy->host;
  f.dy_w = int64_t(y[1].stride) * 2, f.dy_kc = int64_t(y[2].stride) * 2;
  f.dy_h = int64_t(y[3].stride) * 2, f.dy_d = int64_t(y[4].stride) * 2;
  f.dy_b = int64_t(y[5].stride) * 2, f.dy_g = int64_t(y[6].stride) * 2;
  f.dy_wmin = y[1].min, f.dy_hmin = y[3].min, f.dy_dmin = y[4].min;
  f.dy_bmin = y[5].min, f.dy_gmin = y[6].min;
  f.wt = wt->host;
  f.wt_row = int64_t(wt->dim[2].stride) * 2;
  f.wt_rowmin = wt->dim[2].min;
  f.kd = kd_extent, f.kh = kh_extent, f.kw = kw_extent;
  f.dd = dil_d, f.dh = dil_h, f.dw = dil_w, f.pf = pad_d, f.pt = pad_h, f.pl = pad_w;
  f.cout_g = cout_g, f.kk = kk, f.taps = taps;
  run<T>(f, cin1_g, out);
  return 0;
}

}  // namespace

extern "C" int tbex_amx_dx(halide_buffer_t* dy, halide_buffer_t* wt, int32_t kd_extent,
                           int32_t kh_extent, int32_t kw_extent, int32_t dil_d, int32_t dil_h,
                           int32_t dil_w, int32_t pad_d, int32_t pad_h, int32_t pad_w,
                           int32_t cin1_g, int32_t cout_g, int32_t kk, halide_buffer_t* out) {
  return amx_dx<AmxTiles>(dy, wt, kd_extent, kh_extent, kw_extent, dil_d, dil_h, dil_w, pad_d,
                          pad_h, pad_w, cin1_g, cout_g, kk, out);
}

// Tests only: left out of the object cached kernels link (EMBEDDED_KERNELS_OBJECT, CMakeLists.txt).
#ifndef EMBEDDED_KERNELS_OBJECT
extern "C" int tbex_amx_dx_emulated(halide_buffer_t* dy, halide_buffer_t* wt, int32_t kd_extent,
                                    int32_t kh_extent, int32_t kw_extent, int32_t dil_d,
                                    int32_t dil_h, int32_t dil_w, int32_t pad_d, int32_t pad_h,
                                    int32_t pad_w, int32_t cin1_g, int32_t cout_g, int32_t kk,
                                    halide_buffer_t* out) {
  return amx_dx<EmulatedTiles>(dy, wt, kd_extent, kh_extent, kw_extent, dil_d, dil_h, dil_w,
                               pad_d, pad_h, pad_w, cin1_g, cout_g, kk, out);
}
#endif
