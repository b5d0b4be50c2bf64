/** tbex_amx_dw (tbex/amx_dw.h): bf16 dW sums in 2 x 2 blocks of AMX tiles.
 *
 * Why by hand: with one accumulator (all Halide 21 lowers) every tile multiply loads both of
 * its 1 KB operands, and the accumulator goes through memory once per chunk of a few hundred
 * positions. Here two x tiles (two taps, or two input blocks, of one real group) and two dy
 * tiles (two blocks of 16 output channels) feed four accumulators, so each operand load serves
 * two multiplies, and the accumulators stay in their registers over a chunk of output rows.
 *
 * Loop order per call (Halide calls it per share of the output's taps and blocks): chunks of
 * output rows (about tbex::kAmxDwChunkPositions positions, their x and dy rows in L2), then the pairs of
 * (tap, input block) entries, the pairs of output blocks, and inside a visit the chunk's rows
 * and a row's steps of kk positions. A tile's sum runs over the rows in order whatever the
 * chunks, pairs and calls: the result does not depend on them (the accumulators are stored and
 * reloaded exactly, as fp32). */
#include "tbex/amx_dw.h"

#include <algorithm>
#include <vector>

#include "HalideRuntime.h"
#include "amx_tiles.h"

namespace {

using namespace tbex::amx;

/** Where the operands of one call live (byte offsets and strides). */
struct Frame {
  const uint8_t* x;                             // x at the region's minimum
  int64_t x_c0, x_h, x_d, x_b;                  // byte strides
  const uint8_t* dy;                            // dy(0, n of the region's first block, row 0)
  int64_t dy_n, dy_row;                         // byte strides
  int Do, Ho, we, G, sd, sh, kk;
};

/** One operand row of x: a (kw, kh, c1g, kd, g) of the region, its offset from the frame's x
 * for output row (0, 0, 0) and its sums' offset (floats) in out for output block 0. */
struct Entry {
  int64_t x_off, out_off;
  int g;
};

/** One visit: entries e[0..MA) x output blocks from nb (NB of them), rows [r0, r1). The
 * accumulator (i, j) sums at dst(i, j) = out + e[i].out_off + (nb + j)*16 floats, rows c0 `out_c0`
 * bytes apart; zeroed on the first chunk, else loaded. */
template <class T, int MA, int NB>
TBEX_AMX void visit(const Frame& f, const Entry* e, int nb, int r0, int r1, float* out,
                    int64_t out_c0) {
  float* dst[4];
  for (int i = 0; i < MA; ++i)
    for (int j = 0; j < NB; ++j) dst[i * 2 + j] = out + e[i].out_off + (nb + j) * 16;
  if (r0 == 0) {
    T::template zero<0>();
    if constexpr (NB > 1) T::template zero<1>();
    if constexpr (MA > 1) T::template zero<2>();
    if constexpr (MA > 1 && NB > 1) T::template zero<3>();
  } else {
    T::template load_acc<0>(dst[0], out_c0);
    if constexpr (NB > 1) T::template load_acc<1>(dst[1], out_c0);
    if constexpr (MA > 1) T::template load_acc<2>(dst[2], out_c0);
    if constexpr (MA > 1 && NB > 1) T::template load_acc<3>(dst[3], out_c0);
  }
  const int g = e[0].g, half = f.we / 2;
  const int64_t pair_step = int64_t(f.kk / 2) * f.dy_row, block = 16 * f.dy_n;
  // Row t = (b*Do + od)*Ho + ho, its indices stepped along (no divisions in the row loop).
  int ho = r0 % f.Ho, od = (r0 / f.Ho) % f.Do, b = r0 / (f.Ho * f.Do);
  for (int t = r0; t < r1; ++t) {
    const uint8_t* xrow = f.x + int64_t(ho) * f.sh * f.x_h + int64_t(od) * f.sd * f.x_d + b * f.x_b;
    if (++ho == f.Ho) {
      ho = 0;
      if (++od == f.Do) od = 0, ++b;
    }
    const uint8_t* a0 = xrow + e[0].x_off;
    const uint8_t* a1 = xrow + e[MA - 1].x_off;
    const uint8_t* b0 = f.dy + (int64_t(t) * f.G + g) * half * f.dy_row + nb * block;
    for (int k = 0; k < f.we; k += f.kk, a0 += 2 * f.kk, a1 += 2 * f.kk, b0 += pair_step) {
      T::template load<4>(a0, f.x_c0);
      T::template load<6>(b0, f.dy_row);
      T::template multiply<0>();
      if constexpr (NB > 1) {
        T::template load<7>(b0 + block, f.dy_row);
        T::template multiply<1>();
      }
      if constexpr (MA > 1) {
        T::template load<5>(a1, f.x_c0);
        T::template multiply<2>();
        if constexpr (NB > 1) T::template multiply<3>();
      }
    }
  }
  T::template store<0>(dst[0], out_c0);
  if constexpr (NB > 1) T::template store<1>(dst[1], out_c0);
  if constexpr (MA > 1) T::template store<2>(dst[2], out_c0);
  if constexpr (MA > 1 && NB > 1) T::template store<3>(dst[3], out_c0);
}

template <class T>
TBEX_AMX void run(const Frame& f, const std::vector<Entry>& entries, int blocks, int rows,
                  float* out, int64_t out_c0) {
  T::begin(f.kk);
  const int chunk = tbex::amx_dw_chunk_rows(f.we);
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int r1 = std::min(rows, r0 + chunk);
    for (size_t i = 0; i < entries.size();) {
      // Two entries where the next one is of the same real group (they share dy's rows).
      const int ma = i + 1 < entries.size() && entries[i + 1].g == entries[i].g ? 2 : 1;
      const Entry* e = &entries[i];
      for (int nb = 0; nb < blocks; nb += 2) {
        if (ma == 2 && nb + 1 < blocks) visit<T, 2, 2>(f, e, nb, r0, r1, out, out_c0);
        else if (ma == 2) visit<T, 2, 1>(f, e, nb, r0, r1, out, out_c0);
        else if (nb + 1 < blocks) visit<T, 1, 2>(f, e, nb, r0, r1, out, out_c0);
        else visit<T, 1, 1>(f, e, nb, r0, r1, out, out_c0);
      }
      i += ma;
    }
  }
  T::end();
}

void set_dim(halide_buffer_t* buf, int i, int min, int max) {
  buf->dim[i].min = min;
  buf->dim[i].extent = max - min + 1;
}

/** The region out's dim i covers: [lo, hi]. */
struct Range {
  int lo, hi;
};
Range range(const halide_buffer_t* b, int i) {
  return {b->dim[i].min, b->dim[i].min + b->dim[i].extent - 1};
}

/** The extern stage on tile registers T: a bounds query's answer, or the sums. */
template <class T>
int amx_dw(halide_buffer_t* x, halide_buffer_t* dy, int32_t N, int32_t Do, int32_t Ho,
           int32_t we, int32_t G, int32_t sd, int32_t sh, int32_t sw, int32_t dd, int32_t dh,
           int32_t dw, int32_t kk, halide_buffer_t* out) {
  // out: (n, c0, kw, kh, c1g, kd, g)
  const Range n = range(out, 0), kw = range(out, 2), kh = range(out, 3), c1 = range(out, 4),
              kd = range(out, 5), gr = range(out, 6);
  const int half = we / 2;
  // The phases along w (ph = kw*dw % sw) and row offsets (kw*dw / sw) the region's taps read.
  int ph_lo = sw, ph_hi = 0;
  for (int k = kw.lo; k <= kw.hi; ++k)
    ph_lo = std::min(ph_lo, k * dw % sw), ph_hi = std::max(ph_hi, k * dw % sw);
  if (x->host == nullptr || dy->host == nullptr) {
    if (x->host == nullptr) {
      set_dim(x, 0, kw.lo * dw / sw, we - 1 + kw.hi * dw / sw);
      set_dim(x, 1, 0, 15);
      set_dim(x, 2, kh.lo * dh, (Ho - 1) * sh + kh.hi * dh);
      set_dim(x, 3, c1.lo, c1.hi);
      set_dim(x, 4, kd.lo * dd, (Do - 1) * sd + kd.hi * dd);
      set_dim(x, 5, 0, N - 1);
      set_dim(x, 6, gr.lo, gr.hi);
      set_dim(x, 7, ph_lo, ph_hi);
    }
    if (dy->host == nullptr) {
      set_dim(dy, 0, 0, 1);
      set_dim(dy, 1, n.lo, n.hi);
      set_dim(dy, 2, gr.lo * half, ((N * Do * Ho - 1) * G + gr.hi) * half + half - 1);
    }
    return 0;
  }
  const halide_dimension_t *xd = x->dim, *yd = dy->dim, *od = out->dim;
  // The tile loads read a row's positions (x), a row's channel pairs (dy) and 16 sums (out)
  // as contiguous runs; n and c0 come in whole tiles.
  if (xd[0].stride != 1 || yd[0].stride != 1 || yd[1].stride != 2 || od[0].stride != 1 ||
      out->dim[1].extent != 16 || out->dim[1].min != 0 || (n.hi - n.lo + 1) % 16 != 0)
    return -1;
  Frame f;
  f.x_c0 = int64_t(xd[1].stride) * 2, f.x_h = int64_t(xd[2].stride) * 2;
  f.x_d = int64_t(xd[4].stride) * 2, f.x_b = int64_t(xd[5].stride) * 2;
  // x at (wq, c0, h, c1g, d, b, g, ph) = (0, 0, 0, ., 0, 0, ., .) relative to its buffer's minimum.
  f.x = x->host - (int64_t(xd[0].min) * xd[0].stride + int64_t(xd[2].min) * xd[2].stride +
                   int64_t(xd[4].min) * xd[4].stride + int64_t(xd[5].min) * xd[5].stride) * 2;
  f.dy_n = int64_t(yd[1].stride) * 2, f.dy_row = int64_t(yd[2].stride) * 2;
  f.dy = dy->host + (int64_t(n.lo - yd[1].min) * yd[1].stride - int64_t(yd[2].min) * yd[2].stride) * 2;
  f.Do = Do, f.Ho = Ho, f.we = we, f.G = G, f.sd = sd, f.sh = sh, f.kk = kk;
  std::vector<Entry> entries;
  for (int g = gr.lo; g <= gr.hi; ++g)
    for (int d = kd.lo; d <= kd.hi; ++d)
      for (int c = c1.lo; c <= c1.hi; ++c)
        for (int h = kh.lo; h <= kh.hi; ++h)
          for (int w = kw.lo; w <= kw.hi; ++w) {
            Entry e;
            e.g = g;
            e.x_off = (int64_t(w * dw / sw) * xd[0].stride + int64_t(h * dh) * xd[2].stride +
                       int64_t(c - xd[3].min) * xd[3].stride + int64_t(d * dd) * xd[4].stride +
                       int64_t(g - xd[6].min) * xd[6].stride + int64_t(w * dw % sw - xd[7].min) * xd[7].stride) * 2;
            e.out_off = int64_t(w - kw.lo) * od[2].stride + int64_t(h - kh.lo) * od[3].stride +
                        int64_t(c - c1.lo) * od[4].stride + int64_t(d - kd.lo) * od[5].stride +
                        int64_t(g - gr.lo) * od[6].stride;
            entries.push_back(e);
          }
  run<T>(f, entries, (n.hi - n.lo + 1) / 16, N * Do * Ho, reinterpret_cast<float*>(out->host),
         int64_t(od[1].stride) * 4);
  return 0;
}

}  // namespace

extern "C" int tbex_amx_dw(halide_buffer_t* x, halide_buffer_t* dy, int32_t batch, int32_t out_d,
                           int32_t out_h, int32_t row_positions, int32_t real_g, int32_t stride_d,
                           int32_t stride_h, int32_t stride_w, int32_t dil_d, int32_t dil_h,
                           int32_t dil_w, int32_t kk, halide_buffer_t* out) {
  return amx_dw<AmxTiles>(x, dy, batch, out_d, out_h, row_positions, real_g, stride_d, stride_h,
                          stride_w, dil_d, dil_h, dil_w, kk, out);
}

// Tests only: left out of the object cached kernels link (EMBEDDED_KERNELS_OBJECT, CMakeLists.txt).
#ifndef EMBEDDED_KERNELS_OBJECT
extern "C" int tbex_amx_dw_emulated(halide_buffer_t* x, halide_buffer_t* dy, int32_t batch,
                                    int32_t out_d, int32_t out_h, int32_t row_positions,
                                    int32_t real_g, int32_t stride_d, int32_t stride_h,
                                    int32_t stride_w, int32_t dil_d, int32_t dil_h, int32_t dil_w,
                                    int32_t kk, halide_buffer_t* out) {
  return amx_dw<EmulatedTiles>(x, dy, batch, out_d, out_h, row_positions, real_g, stride_d,
                               stride_h, stride_w, dil_d, dil_h, dil_w, kk, out);
}
#endif
