/** tbex_amx_dx_cols (tbex/amx_dx_cols.h): dX for few input channels on AMX tiles whose columns
 * are (kw, input channel) pairs.
 *
 * Why: an output tile of dX has the input channels in its 16 columns; the stem's 3 channels
 * leave 13 of them multiplying zeros (dx_amx: 3/16 of the unit's work useful), and the vector
 * schedules that put output channels in the lanes instead (dx_cout_lanes) run at the FMA rate.
 * With Kw taps x `lanes` channels in the columns, the stem's tiles are 28/32 full. The kw taps
 * of one dy position land on Kw different output positions, so their sums cannot stay in the
 * tile: each row's accumulators go to a buffer, and a pass adds each output position's taps
 * (ceil(Kw/sw) of them, `lanes` channels each) from it: 4 small vector adds per position of the
 * stem, against 4 x 64 x 3 multiply-adds in the tiles.
 *
 * Loop order per call (Halide calls it per batch, block of depths and block of rows): per depth,
 * the dy rows its taps read staged (the rows one of the call's rows reads, of each depth tap's
 * plane not staged for the depth before; a position's kk channels side by side, so a tile of M
 * positions is one run); then per pair of position tiles, per output row (in stride-phase
 * order), every live (kd, kh) tap and channel chunk into 2 x 2 accumulators (two position tiles
 * x two column tiles sharing each loaded operand), stored to the call's buffer of columns; then
 * each row's columns added into the output. */
#include "tbex/amx_dx_cols.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "HalideRuntime.h"
#include "amx_tiles.h"
#include "tile_kernel.h"

namespace {

using namespace tbex::amx;

/** The kernel's scalar arguments. */
struct Geometry {
  int Do, Ho, Wo, Co1, Kd, Kh, Kw, sd, sh, sw, dd, dh, dw, pf, pt, pl, cout_g, kk, lanes;
};

/** dy row index of output position `pos` under tap k along one dim, or -1 where the tap skips
 * it (stride phase) or the row lies outside [0, extent). */
int source_of(int pos, int k, int stride, int dil, int pad, int extent) {
  const int t = pos + pad - k * dil;
  if (t < 0 || t % stride != 0 || t / stride >= extent) return -1;
  return t / stride;
}

/** One live (kd, kh) tap of an output row: its staged dy row and its weight rows. */
struct Tap {
  const uint8_t* a;  // staged dy row: chunks `chunk` bytes apart, positions `pos` bytes apart
  const uint8_t* b;  // the tap's first weight row (column tile 0, chunk 0)
};

/** What a block's loops step by (bytes). */
struct Steps {
  int chunks;
  int64_t chunk, pos, wt_row, wt_chunk, wt_tile;  // wt_chunk: a chunk's kk/2 rows; wt_tile: cout_g/2 rows
};

/** One block: MP position tiles (starting at positions p0, p1) x NT column tiles, every tap and
 * channel chunk. Accumulator (i, t) is tile i*2 + t, stored at dst[i] + t*16 floats, rows
 * `stride` bytes apart. */
template <class T, int MP, int NT>
TBEX_AMX void block(const Tap* taps, int ntaps, const Steps& s, int p0, int p1, float* const* dst, int64_t stride) {
  T::template zero<0>();
  if constexpr (NT > 1) T::template zero<1>();
  if constexpr (MP > 1) T::template zero<2>();
  if constexpr (MP > 1 && NT > 1) T::template zero<3>();
  const int64_t o0 = p0 * s.pos, o1 = p1 * s.pos;
  for (int k = 0; k < ntaps; ++k) {
    const uint8_t* a = taps[k].a;
    const uint8_t* b = taps[k].b;
    for (int kc = 0; kc < s.chunks; ++kc, a += s.chunk, b += s.wt_chunk) {
      T::template load<4>(a + o0, s.pos);
      T::template load<6>(b, s.wt_row);
      T::template multiply<0>();
      if constexpr (NT > 1) {
        T::template load<7>(b + s.wt_tile, s.wt_row);
        T::template multiply<1>();
      }
      if constexpr (MP > 1) {
        T::template load<5>(a + o1, s.pos);
        T::template multiply<2>();
        if constexpr (NT > 1) T::template multiply<3>();
      }
    }
  }
  T::template store<0>(dst[0], stride);
  if constexpr (NT > 1) T::template store<1>(dst[0] + 16, stride);
  if constexpr (MP > 1) T::template store<2>(dst[1], stride);
  if constexpr (MP > 1 && NT > 1) T::template store<3>(dst[1] + 16, stride);
}

/** An output row from its columns: position w (of W) sums the CP columns at cols + offs[k] for
 * k in [first[w], first[w + 1]) (its kw taps); lanes >= CP are 0. Positions `ostride` floats
 * apart. 4-lane vectors (SSE, every x86-64): a position's sums stay in registers and go
 * straight to its 64 bytes. */
template <int CP>
void scatter_row(const float* cols, const int* first, const int* offs, int W, float* out, int64_t ostride) {
  const __m128 zero = _mm_setzero_ps();
  for (int w = 0; w < W; ++w) {
    float* o = out + w * ostride;
    if constexpr (CP >= 4) {
      __m128 v[CP / 4];
      for (int q = 0; q < CP / 4; ++q) v[q] = zero;
      for (int k = first[w]; k < first[w + 1]; ++k)
        for (int q = 0; q < CP / 4; ++q) v[q] = _mm_add_ps(v[q], _mm_loadu_ps(cols + offs[k] + 4 * q));
      for (int q = 0; q < 4; ++q) _mm_storeu_ps(o + 4 * q, q < CP / 4 ? v[q] : zero);
    } else {
      float v[16] = {};
      for (int k = first[w]; k < first[w + 1]; ++k)
        for (int l = 0; l < CP; ++l) v[l] += cols[offs[k] + l];
      std::memcpy(o, v, sizeof v);
    }
  }
}

void scatter(int lanes, const float* cols, const int* first, const int* offs, int W, float* out, int64_t ostride) {
  switch (lanes) {
    case 1: return scatter_row<1>(cols, first, offs, W, out, ostride);
    case 2: return scatter_row<2>(cols, first, offs, W, out, ostride);
    case 4: return scatter_row<4>(cols, first, offs, W, out, ostride);
    default: return scatter_row<8>(cols, first, offs, W, out, ostride);
  }
}

/** The extern stage on tile registers T: a bounds query's answer, or the sums. */
template <class T>
int amx_dx_cols(halide_buffer_t* dyb, halide_buffer_t* wt, const Geometry& g, halide_buffer_t* out) {
  const halide_dimension_t* o = out->dim;  // (c0, w, h, c1, d, b)
  const int nt = tbex::amx_dx_cols_tiles(g.Kw, g.lanes), half = g.cout_g / 2;
  const int wt_rows = g.Kd * g.Kh * nt * half;
  const Range wr = range(out, 1), hr = range(out, 2), cr = range(out, 3), dr = range(out, 4),
              br = range(out, 5);
  if (dyb->host == nullptr || wt->host == nullptr || out->host == nullptr) {
    // A bounds query: inputs without memory ask what the call reads.
    if (dyb->host == nullptr) {
      set_dims(dyb, {16, g.Wo, g.Ho, g.Co1, g.Do});
      dyb->dim[5].min = br.lo, dyb->dim[5].extent = br.size();
    }
    if (wt->host == nullptr) set_dims(wt, {2, 16, wt_rows});
    return 0;
  }
  const bool lanes_ok = g.lanes == 1 || g.lanes == 2 || g.lanes == 4 || g.lanes == 8;
  const halide_dimension_t* wd = wt->dim;
  if (o[0].stride != 1 || o[0].min != 0 || o[0].extent != 16 || cr.lo != 0 || cr.hi != 0 ||
      dyb->dim[0].stride != 1 || dyb->dim[0].extent != 16 || wd[0].stride != 1 || wd[0].min != 0 ||
      wd[1].stride != 2 || wd[1].min != 0 || wd[1].extent < 16 || wd[2].min > 0 ||
      wd[2].min + wd[2].extent < wt_rows || !lanes_ok || g.Kw * g.lanes > 32 || g.kk < 2 ||
      g.kk % 2 != 0 || g.kk > 32 || g.cout_g % g.kk != 0 || g.Wo < 1)
    return -1;
  const View6 dy = view(dyb);
  const int M = tbex::amx_dx_cols_rows(g.Wo), tiles = (g.Wo + M - 1) / M, ncols = nt * 16;
  // The dy rows the call's rows read (oh), per depth tap below.
  std::vector<char> needed(g.Ho, 0);
  int oh_lo = g.Ho, oh_hi = -1;
  for (int h = hr.lo; h <= hr.hi; ++h)
    for (int kh = 0; kh < g.Kh; ++kh)
      if (const int oh = source_of(h, kh, g.sh, g.dh, g.pt, g.Ho); oh >= 0)
        needed[oh] = 1, oh_lo = std::min(oh_lo, oh), oh_hi = std::max(oh_hi, oh);
  const int rows = std::max(0, oh_hi - oh_lo + 1);
  Steps s;
  s.chunks = g.cout_g / g.kk;
  s.pos = staged_position_bytes(g.kk);
  s.chunk = int64_t(g.Wo) * s.pos;
  const int64_t row_bytes = s.chunks * s.chunk, plane_bytes = rows * row_bytes;
  s.wt_row = int64_t(wd[2].stride) * 2;
  s.wt_chunk = int64_t(g.kk / 2) * s.wt_row, s.wt_tile = int64_t(half) * s.wt_row;
  const uint8_t* wt0 = wt->host - int64_t(wd[2].min) * s.wt_row;  // weight row 0
  Scratch staged(size_t(std::max<int64_t>(1, g.Kd * plane_bytes)));
  const int R = hr.size();
  const int64_t col_row = int64_t(g.Wo) * ncols;  // floats of a row's columns
  Scratch cols(size_t(R) * col_row * sizeof(float));
  if (staged.p == nullptr || cols.p == nullptr) return -1;
  float* const col = reinterpret_cast<float*>(cols.p);
  // Each output position's kw taps: the columns it sums (dy position ow, tap kw).
  const int W = wr.size();
  std::vector<int> first(W + 1, 0), offs;
  for (int i = 0; i < W; ++i) {
    for (int kw = 0; kw < g.Kw; ++kw)
      if (const int ow = source_of(wr.lo + i, kw, g.sw, g.dw, g.pl, g.Wo); ow >= 0)
        offs.push_back(ow * ncols + kw * g.lanes);
    first[i + 1] = (int)offs.size();
  }
  offs.push_back(0);  // data() of an empty list is not to be read, but keep it non-null
  auto* base = reinterpret_cast<float*>(out->host);
  auto out_row = [&](int h, int d, int b) {
    return base + int64_t(h - hr.lo) * o[2].stride + int64_t(d - dr.lo) * o[4].stride +
           int64_t(b - br.lo) * o[5].stride;
  };
  // The call's rows in stride-phase order along h (rows of one phase read the same taps'
  // weights), and each row's live taps (per depth).
  std::vector<int> order;
  for (int ph = 0; ph < g.sh; ++ph)
    for (int h = hr.lo; h <= hr.hi; ++h)
      if ((h + g.pt) % g.sh == ph) order.push_back(h);
  std::vector<Tap> taps(size_t(R) * g.Kd * g.Kh);
  std::vector<int> ntaps(R);
  T::begin(g.kk, M);
  // Kd slots of staged dy planes (the call's rows of one depth od each), kept while the call's
  // depths ascend: depth d reads od = (d + pf - kd*dd)/sd, and consecutive depths share all but
  // one plane where sd = dd = 1, so each plane is staged once a call.
  std::vector<int> slot_od(g.Kd), slot_of(g.Kd), od_of(g.Kd);
  std::vector<char> kept(g.Kd);
  for (int b = br.lo; b <= br.hi; ++b) {
    std::fill(slot_od.begin(), slot_od.end(), -1);
    for (int d = dr.lo; d <= dr.hi; ++d) {
      // The planes already staged keep their slots; the others go to slots no tap of d reads.
      std::fill(kept.begin(), kept.end(), 0);
      for (int kd = 0; kd < g.Kd; ++kd) {
        od_of[kd] = source_of(d, kd, g.sd, g.dd, g.pf, g.Do);
        const auto at = std::find(slot_od.begin(), slot_od.end(), od_of[kd]);
        slot_of[kd] = od_of[kd] >= 0 && at != slot_od.end() ? int(at - slot_od.begin()) : -1;
        if (slot_of[kd] >= 0) kept[slot_of[kd]] = 1;
      }
      for (int kd = 0; kd < g.Kd; ++kd) {
        if (od_of[kd] < 0 || slot_of[kd] >= 0) continue;
        const int slot = int(std::find(kept.begin(), kept.end(), 0) - kept.begin());
        const int od = od_of[kd];
        slot_od[slot] = od, kept[slot] = 1, slot_of[kd] = slot;
        for (int r = 0; r < rows; ++r)
          if (needed[oh_lo + r])
            stage_row(staged.p + slot * plane_bytes + r * row_bytes, {s.pos, s.chunk, 0, 0}, dy, g.cout_g, g.kk,
                      g.Co1, 0, 1, oh_lo + r, od, b, g.Wo, g.Wo);
      }
      for (int h = hr.lo; h <= hr.hi; ++h) {
        Tap* t = &taps[size_t(h - hr.lo) * g.Kd * g.Kh];
        int n = 0;
        for (int kd = 0; kd < g.Kd; ++kd) {
          if (slot_of[kd] < 0) continue;
          for (int kh = 0; kh < g.Kh; ++kh)
            if (const int oh = source_of(h, kh, g.sh, g.dh, g.pt, g.Ho); oh >= 0) {
              t[n].a = staged.p + slot_of[kd] * plane_bytes + (oh - oh_lo) * row_bytes;
              t[n++].b = wt0 + int64_t((kd * g.Kh + kh) * nt) * half * s.wt_row;
            }
        }
        ntaps[h - hr.lo] = n;
      }
      // Pairs of position tiles outside the rows: consecutive rows read mostly the same dy rows
      // (the pair's 3.5 KB of each), which then come from L1 across rows; the weights of a
      // phase's taps stream from L2.
      const int64_t stride = int64_t(ncols) * 4;
      for (int i = 0; i < tiles; i += 2) {
        const int p0 = std::min(i * M, g.Wo - M), p1 = std::min((i + 1) * M, g.Wo - M);
        const bool pair = i + 1 < tiles;
        for (int h : order) {
          float* c = col + (h - hr.lo) * col_row;
          float* dst[2] = {c + int64_t(p0) * ncols, c + int64_t(p1) * ncols};
          const Tap* t = &taps[size_t(h - hr.lo) * g.Kd * g.Kh];
          const int n = ntaps[h - hr.lo];
          if (pair && nt == 2) block<T, 2, 2>(t, n, s, p0, p1, dst, stride);
          else if (pair) block<T, 2, 1>(t, n, s, p0, p1, dst, stride);
          else if (nt == 2) block<T, 1, 2>(t, n, s, p0, p1, dst, stride);
          else block<T, 1, 1>(t, n, s, p0, p1, dst, stride);
        }
      }
      for (int h = hr.lo; h <= hr.hi; ++h)
        scatter(g.lanes, col + (h - hr.lo) * col_row, first.data(), offs.data(), W, out_row(h, d, b),
                o[1].stride);
    }
  }
  T::end();
  return 0;
}

}  // namespace

#define TBEX_AMX_DX_COLS_GEOMETRY                                                                   \
  Geometry{out_d, out_h, out_w, out_c1, kd_extent, kh_extent, kw_extent, stride_d, stride_h, stride_w, \
           dil_d, dil_h, dil_w, pad_d, pad_h, pad_w, cout_g, kk, lanes}

extern "C" int tbex_amx_dx_cols(TBEX_AMX_DX_COLS_ARGS) {
  return amx_dx_cols<AmxTiles>(dy, wt, TBEX_AMX_DX_COLS_GEOMETRY, out);
}

// Tests only: left out of the object cached kernels link (EMBEDDED_KERNELS_OBJECT, CMakeLists.txt).
#ifndef EMBEDDED_KERNELS_OBJECT
extern "C" int tbex_amx_dx_cols_emulated(TBEX_AMX_DX_COLS_ARGS) {
  return amx_dx_cols<EmulatedTiles>(dy, wt, TBEX_AMX_DX_COLS_GEOMETRY, out);
}
#endif
