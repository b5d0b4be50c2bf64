/** tbex_amx_dw (tbex/amx_dw.h): bf16 dW sums in 2 x 2 blocks of AMX tiles.
 *
 * Why by hand: with one accumulator (all Halide 21 lowers) every tile multiply loads both of
 * its 1 KB operands, and the accumulator goes through memory once per chunk of a few hundred
 * positions. Here two dy tiles (two blocks of 16 output channels) and two x tiles (two taps, or
 * two input blocks, of one real group) feed four accumulators, so each operand load serves two
 * multiplies, and the accumulators stay in their registers over a chunk of output rows.
 *
 * Why the kernel stages its operands: Halide's staging of x transposed ran ~2 cycles an element
 * at root (c2 dW bf16 2.2 of 9.8 ms, the seed's 17.5 of 20, d's 2.4 of 4.4 on Emerald Rapids),
 * and its stages took most of the schedule's compile time. Here dy is the transposed operand
 * (16 output channels x positions, each tile multiply's kk positions in a cache line of their
 * own: four rounds of two-source word shuffles per 512 elements)
 * and x the paired one: position q of a staged row holds x at q and q + We/2 side by side (one
 * shuffle per 32 elements), so every tap of a phase along w reads the same staged row at an
 * offset. Both are staged per chunk of output rows, into memory that stays in L2.
 *
 * Loop order per call (Halide calls it per share of the output's blocks and parts of the
 * reduction): the parts, chunks of a part's output rows, their operands staged, then the pairs of
 * (tap, input block) entries, the pairs of output blocks, and inside a visit the chunk's rows and
 * a row's steps of kk positions. A tile's sum runs over a part's rows in order whatever the
 * chunks, pairs and calls: the result does not depend on them (the accumulators are stored and
 * reloaded exactly, as fp32), only on the parts, which the caller fixes from the problem. */
#include "tbex/amx_dw.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "HalideRuntime.h"
#include "amx_tiles.h"
#include "tile_kernel.h"

namespace {

using namespace tbex::amx;

/** The kernel's scalar arguments. */
struct Geometry {
  int N, D, H, W, C1, Do, Ho, Wo, Co1, we, G, cin1_g, cout_g, sd, sh, sw, dd, dh, dw, pf, pt, pl;
  int part_by_batch, part_len, kk;
};

/** Bytes of a channel's staged dy a tile multiply's kk positions take: a cache line each (see
 * amx_dw's staging). */
constexpr int64_t kStepBytes = 64;

/** The staging routines, scalar (any CPU; the reference the tests hold the vector ones to) and
 * AVX-512 (every CPU with AMX has it). Both write the same bytes. */
struct ScalarStage {
  /** x's row `src` (16 lanes a position, `ws` bytes apart; W positions, 0 outside) as `rows`
   * position pairs: dst[q][2c + e] = x(c, (q + e*half)*sw + off). */
  static void pairs(uint8_t* dst, const uint8_t* src, int64_t ws, int W, int sw, int off, int half,
                    int rows) {
    auto* o = reinterpret_cast<uint16_t*>(dst);
    for (int q = 0; q < rows; ++q)
      for (int e = 0; e < 2; ++e) {
        const int p = (q + e * half) * sw + off;
        for (int c = 0; c < 16; ++c) {
          uint16_t v = 0;
          if (p >= 0 && p < W) std::memcpy(&v, src + p * ws + 2 * c, 2);
          o[q * 32 + 2 * c + e] = v;
        }
      }
  }
  /** dy's row `src` (16 channels a position, `ws` bytes apart; Wo positions, 0 past them)
   * transposed: a channel's pairs (dy(c, q), dy(c, q + half)) for q < half, in steps of `step`
   * pairs kStepBytes apart (bytes past a step's pairs are left as they are), channels `row`
   * bytes apart. */
  static void transpose(uint8_t* dst, const uint8_t* src, int64_t ws, int Wo, int half, int64_t row,
                        int step) {
    auto* o = reinterpret_cast<uint16_t*>(dst);
    for (int c = 0; c < 16; ++c)
      for (int q = 0; q < half; ++q)
        for (int e = 0; e < 2; ++e) {
          const int p = q + e * half;
          uint16_t v = 0;
          if (p < Wo) std::memcpy(&v, src + p * ws + 2 * c, 2);
          o[(c * row + q / step * kStepBytes) / 2 + 2 * (q % step) + e] = v;
        }
  }
};

#define TBEX_AMX_STAGE __attribute__((target("avx512f,avx512bw")))

struct VectorStage {
  TBEX_AMX_STAGE static __m256i position(const uint8_t* src, int64_t ws, int p, int W) {
    return p >= 0 && p < W ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + p * ws))
                           : _mm256_setzero_si256();
  }
  TBEX_AMX_STAGE static __m512i two(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
  }
  TBEX_AMX_STAGE static void pairs(uint8_t* dst, const uint8_t* src, int64_t ws, int W, int sw,
                                   int off, int half, int rows) {
    alignas(64) static const uint16_t kIdx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                  21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                  11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_load_si512(kIdx);
    for (int q = 0; q < rows; ++q) {
      const int p = q * sw + off;
      const __m512i v = two(position(src, ws, p, W), position(src, ws, p + half * sw, W));
      _mm512_storeu_si512(dst + q * 64, _mm512_permutexvar_epi16(idx, v));
    }
  }
  /** One round of the transpose: registers a and a | 1 << J trade element bit I for register
   * bit J (each output takes the elements whose bit I matches its own register bit). */
  template <int J, int I>
  TBEX_AMX_STAGE static void exchange(__m512i* r) {
    alignas(64) static const auto kIdx = [] {
      struct {
        uint16_t a[32], b[32];
      } t;
      for (int i = 0; i < 32; ++i) {
        const int from_b = i >> I & 1 ? 32 : 0;
        t.a[i] = uint16_t((i & ~(1 << I)) | from_b);
        t.b[i] = uint16_t((i | 1 << I) | from_b);
      }
      return t;
    }();
    const __m512i ia = _mm512_load_si512(kIdx.a), ib = _mm512_load_si512(kIdx.b);
    for (int a = 0; a < 16; ++a)
      if (!(a >> J & 1)) {
        const __m512i x = r[a], y = r[a | 1 << J];
        r[a] = _mm512_permutex2var_epi16(x, ia, y);
        r[a | 1 << J] = _mm512_permutex2var_epi16(x, ib, y);
      }
  }
  TBEX_AMX_STAGE static void transpose(uint8_t* dst, const uint8_t* src, int64_t ws, int Wo, int half,
                                       int64_t row, int step) {
    // Per step of up to 16 pairs (q, q + half): registers j < 8 hold positions q + 2j,
    // q + 2j + 1 (element i = 16*(position's low bit) + channel), j >= 8 the same positions past
    // half. Three rounds move channel bits 0-2 into the register index; the last moves bit 3 and
    // writes each register's elements in the order of the tile's k: 2*(pair) + (which half).
    alignas(64) static const auto kLast = [] {
      struct {
        uint16_t a[32], b[32];
      } t;
      for (int k = 0; k < 32; ++k) {
        const int r = k >> 1, e = k & 1;
        const int i = (r >> 1 & 7) | (r & 1) << 4;
        t.a[k] = uint16_t(i | (e ? 32 : 0));
        t.b[k] = uint16_t(i | 8 | (e ? 32 : 0));
      }
      return t;
    }();
    // A step (kk/2 <= 16 pairs: one tile multiply's) at a time, each from its own line.
    for (int qb = 0; qb < half; qb += step) {
      const int nq = std::min(step, half - qb);
      uint8_t* out = dst + qb / step * kStepBytes;
      __m512i r[16];
      for (int e = 0; e < 2; ++e)
        for (int j = 0; j < 8; ++j) {
          const int p = qb + 2 * j, base = e * half;
          // Pairs past the last (q >= half) are left 0: the store below leaves them out.
          r[e * 8 + j] = two(position(src, ws, p < qb + nq ? p + base : Wo, Wo),
                             position(src, ws, p + 1 < qb + nq ? p + 1 + base : Wo, Wo));
        }
      exchange<0, 0>(r);
      exchange<1, 1>(r);
      exchange<2, 2>(r);
      const __m512i ia = _mm512_load_si512(kLast.a), ib = _mm512_load_si512(kLast.b);
      const __mmask32 keep = nq == 16 ? ~__mmask32(0) : __mmask32((1u << (2 * nq)) - 1);
      for (int a = 0; a < 8; ++a) {
        _mm512_mask_storeu_epi16(out + a * row, keep, _mm512_permutex2var_epi16(r[a], ia, r[a + 8]));
        _mm512_mask_storeu_epi16(out + (a + 8) * row, keep,
                                 _mm512_permutex2var_epi16(r[a], ib, r[a + 8]));
      }
    }
  }
};

/** One x tile's source: a (kw, kh, c1g, kd, g) of the call, its offset in a plane of the staged
 * x for a chunk's first row, and its sums' offset (floats) in out for output block 0. */
struct Entry {
  int64_t x_off, out_off;
  int gi;  // real group, from the call's first
};

/** A chunk's staged operands and how a row finds them. */
struct Chunk {
  int r0, r1;           // output rows (b*Do + do)*Ho + ho
  int first_plane, ho0; // the plane of r0 and r0's row in it
  uint8_t* x;           // staged x: planes of plane_bytes, rows of x's h sh*h_bytes apart
  int64_t plane_bytes, row_bytes;
  uint8_t* dy;          // staged dy: per row, real group and output block, 16 channels' rows
  int64_t t_bytes, blk_bytes, ch_bytes;  // ch_bytes: a channel's staged row (a tile row's stride)
  int blocks, Ho, half, kk;
  bool first;           // the part's first chunk: accumulators start at 0
};

/** One visit: output blocks bi, bi+1 (MA of them) x entries e[0..NB), rows [r0, r1). The
 * accumulator (i, j) sums at out + e[j].out_off + (bi + i)*16*out_n floats, its rows (output
 * channels) out_n floats apart; zeroed on the call's first chunk, else loaded. */
template <class T, int MA, int NB>
TBEX_AMX void visit(const Chunk& c, const Entry* e, int bi, float* out, int64_t out_n) {
  float* dst[4];
  for (int i = 0; i < MA; ++i)
    for (int j = 0; j < NB; ++j) dst[i * 2 + j] = out + e[j].out_off + (bi + i) * 16 * out_n;
  const int64_t stride = out_n * 4;
  if (c.first) {
    T::template zero<0>();
    if constexpr (NB > 1) T::template zero<1>();
    if constexpr (MA > 1) T::template zero<2>();
    if constexpr (MA > 1 && NB > 1) T::template zero<3>();
  } else {
    T::template load_acc<0>(dst[0], stride);
    if constexpr (NB > 1) T::template load_acc<1>(dst[1], stride);
    if constexpr (MA > 1) T::template load_acc<2>(dst[2], stride);
    if constexpr (MA > 1 && NB > 1) T::template load_acc<3>(dst[3], stride);
  }
  const int step = c.kk / 2;
  const int64_t a_stride = c.ch_bytes;
  int pc = 0, ho = c.ho0;
  const uint8_t* a = c.dy + (int64_t(e[0].gi) * c.blocks + bi) * c.blk_bytes;
  for (int t = c.r0; t < c.r1; ++t, a += c.t_bytes) {
    const uint8_t* xrow = c.x + pc * c.plane_bytes + int64_t(ho - c.ho0) * c.row_bytes;
    if (++ho == c.Ho) ho = 0, ++pc;
    const uint8_t* a0 = a;
    const uint8_t* b0 = xrow + e[0].x_off;
    const uint8_t* b1 = xrow + e[NB - 1].x_off;
    for (int q = 0; q < c.half; q += step, a0 += kStepBytes, b0 += 32 * c.kk, b1 += 32 * c.kk) {
      T::template load<4>(a0, a_stride);
      T::template load<6>(b0, 64);
      T::template multiply<0>();
      if constexpr (NB > 1) {
        T::template load<7>(b1, 64);
        T::template multiply<1>();
      }
      if constexpr (MA > 1) {
        T::template load<5>(a0 + c.blk_bytes, a_stride);
        T::template multiply<2>();
        if constexpr (NB > 1) T::template multiply<3>();
      }
    }
  }
  T::template store<0>(dst[0], stride);
  if constexpr (NB > 1) T::template store<1>(dst[1], stride);
  if constexpr (MA > 1) T::template store<2>(dst[2], stride);
  if constexpr (MA > 1 && NB > 1) T::template store<3>(dst[3], stride);
}

/** A call's staged x per chunk: [plane][g][kd][h][c1g][phase][q][32 values]; h runs over the
 * rows the chunk's output rows read with the call's taps along h (sh apart a row). */
struct XLayout {
  int64_t ph_bytes, c1_bytes, h_bytes, kd_bytes, g_bytes, plane_bytes;
  int ph_lo, ph_hi;  // the call's phases along w
  int Q;             // position pairs a staged row holds (half and the taps' shift)
};

/** What of the call's box staging x reads: real groups, taps along d and h, input blocks. */
struct Taps {
  Range gr, kd, kh, c1;
};

/** Stages plane p's x (rows from row ho0 of the chunk's first plane, `reach` rows of its
 * reach) into `dst`: per real group, tap along d, needed row, input block and phase along w, as
 * position pairs; rows outside x as zeros. */
template <class S>
void stage_x_plane(uint8_t* dst, const XLayout& l, const View6& x, const Geometry& g, const Taps& k, int p,
                   int ho0, int reach, const std::vector<char>& needed) {
  const int b = p / g.Do, od = p % g.Do, half = g.we / 2;
  for (int gi = 0; gi < k.gr.size(); ++gi)
    for (int d = k.kd.lo; d <= k.kd.hi; ++d) {
      const int di = od * g.sd + d * g.dd - g.pf;
      for (int hh = 0; hh < reach; ++hh) {
        if (!needed[hh]) continue;
        const int hi = ho0 * g.sh + k.kh.lo * g.dh + hh - g.pt;
        uint8_t* row = dst + gi * l.g_bytes + (d - k.kd.lo) * l.kd_bytes + hh * l.h_bytes;
        if (di < 0 || di >= g.D || hi < 0 || hi >= g.H) {
          std::memset(row, 0, size_t(l.h_bytes));
          continue;
        }
        for (int ci = 0; ci < k.c1.size(); ++ci) {
          const int blk = std::min((k.gr.lo + gi) * g.cin1_g + k.c1.lo + ci, g.C1 - 1);
          for (int ph = l.ph_lo; ph <= l.ph_hi; ++ph)
            S::pairs(row + ci * l.c1_bytes + (ph - l.ph_lo) * l.ph_bytes, x.row(hi, blk, di, b), x.w, g.W,
                     g.sw, ph - g.pl, half, l.Q);
        }
      }
    }
}

/** Stages dy's output row t ((b*Do + do)*Ho + ho) into `dst` transposed: per real group and
 * output block (of the call's channels n), 16 channels of We values ch_bytes apart, blocks
 * blk_bytes apart. */
template <class S>
void stage_dy_row(uint8_t* dst, int64_t blk_bytes, int64_t ch_bytes, const View6& dy, const Geometry& g,
                  Range gr, Range n, int t) {
  const int ho = t % g.Ho, od = t / g.Ho % g.Do, b = t / (g.Ho * g.Do), blocks = n.size() / 16;
  for (int gi = 0; gi < gr.size(); ++gi)
    for (int bi = 0; bi < blocks; ++bi) {
      const int blk = std::min(((gr.lo + gi) * g.cout_g + n.lo) / 16 + bi, g.Co1 - 1);
      S::transpose(dst + (gi * blocks + bi) * blk_bytes, dy.row(ho, blk, od, b), dy.w, g.Wo, g.we / 2,
                   ch_bytes, g.kk / 2);
    }
}

/** One chunk of output rows: its operands staged (x: the chunk's planes, each from its first
 * row's reach; dy: each row), then every pair of entries x pair of output blocks visited. */
template <class T, class S>
void run_chunk(const Chunk& c, const XLayout& l, const View6& x, const View6& dy, const Geometry& g,
               const Taps& taps, const std::vector<char>& needed, const std::vector<Entry>& entries,
               Range n, float* sums, int64_t out_n) {
  for (int p = c.first_plane; p <= (c.r1 - 1) / g.Ho; ++p) {
    const int used = std::min(c.r1, (p + 1) * g.Ho) - std::max(c.r0, p * g.Ho);  // rows in the plane
    stage_x_plane<S>(c.x + (p - c.first_plane) * l.plane_bytes, l, x, g, taps, p, c.ho0,
                     (used - 1) * g.sh + (taps.kh.size() - 1) * g.dh + 1, needed);
  }
  for (int t = c.r0; t < c.r1; ++t)
    stage_dy_row<S>(c.dy + (t - c.r0) * c.t_bytes, c.blk_bytes, c.ch_bytes, dy, g, taps.gr, n, t);
  for (size_t i = 0; i < entries.size();) {
    // Two entries where the next one is of the same real group (they share dy's rows).
    const int nb = i + 1 < entries.size() && entries[i + 1].gi == entries[i].gi ? 2 : 1;
    const Entry* e = &entries[i];
    for (int bi = 0; bi < c.blocks; bi += 2) {
      if (nb == 2 && bi + 1 < c.blocks) visit<T, 2, 2>(c, e, bi, sums, out_n);
      else if (nb == 2) visit<T, 1, 2>(c, e, bi, sums, out_n);
      else if (bi + 1 < c.blocks) visit<T, 2, 1>(c, e, bi, sums, out_n);
      else visit<T, 1, 1>(c, e, bi, sums, out_n);
    }
    i += nb;
  }
}

/** The extern stage with tile registers T and staging S: a bounds query's answer, or the sums. */
template <class T, class S>
int amx_dw(halide_buffer_t* xb, halide_buffer_t* dyb, const Geometry& g, halide_buffer_t* out) {
  // A bounds query: inputs without memory ask what the call reads (inputs Halide holds as
  // buffers of its caller arrive with theirs, beside an output without memory).
  if (xb->host == nullptr || dyb->host == nullptr || out->host == nullptr) {
    if (xb->host == nullptr) set_dims(xb, {16, g.W, g.H, g.C1, g.D, g.N});
    if (dyb->host == nullptr) set_dims(dyb, {16, g.Wo, g.Ho, g.Co1, g.Do, g.N});
    return 0;
  }
  // out: (c0, n, kw, kh, c1g, kd, g)
  const Range n = range(out, 1), kw = range(out, 2), kh = range(out, 3), c1 = range(out, 4),
              kd = range(out, 5), gr = range(out, 6);
  const halide_dimension_t* od = out->dim;
  if (out->dimensions != 8 || g.part_len < 1) return -1;
  const Range parts = range(out, 7);
  // Whole tiles: 16 lanes of c0 side by side, n in blocks of 16 of a group's channels; a
  // position's 16 lanes (x) or channels (dy) side by side; kk positions a tile multiply.
  if (od[0].stride != 1 || od[0].min != 0 || od[0].extent != 16 || n.lo % 16 != 0 || n.size() % 16 != 0 ||
      g.cout_g % 16 != 0 || xb->dim[0].stride != 1 || dyb->dim[0].stride != 1 ||
      xb->dim[0].extent != 16 || dyb->dim[0].extent != 16 || g.kk < 2 || g.kk % 2 != 0 ||
      g.kk > 32 || g.we % g.kk != 0 || g.we < g.Wo)
    return -1;
  const View6 x = view(xb), dy = view(dyb);
  const Taps taps{gr, kd, kh, c1};
  const int half = g.we / 2, blocks = n.size() / 16;
  // Phases along w (kw*dw % sw) and shifts (kw*dw / sw) of the call's taps.
  int ph_lo = g.sw, ph_hi = 0, shift = 0;
  for (int k = kw.lo; k <= kw.hi; ++k) {
    ph_lo = std::min(ph_lo, k * g.dw % g.sw), ph_hi = std::max(ph_hi, k * g.dw % g.sw);
    shift = std::max(shift, k * g.dw / g.sw);
  }
  // Staged x per chunk: [plane][g][kd][h][c1g][phase][q][32 values]; h runs over the rows the
  // chunk's output rows read with the call's taps along h (sh apart a row).
  const int chunk = tbex::amx_dw_chunk_rows(g.we, g.Ho);
  const int planes = chunk >= g.Ho ? chunk / g.Ho : 1, span = std::min(chunk, g.Ho);
  XLayout l;
  l.ph_lo = ph_lo, l.ph_hi = ph_hi, l.Q = half + shift;
  l.ph_bytes = int64_t(l.Q) * 64, l.c1_bytes = (ph_hi - ph_lo + 1) * l.ph_bytes, l.h_bytes = c1.size() * l.c1_bytes;
  const int Hs = (span - 1) * g.sh + (kh.size() - 1) * g.dh + 1;
  l.kd_bytes = Hs * l.h_bytes, l.g_bytes = kd.size() * l.kd_bytes, l.plane_bytes = gr.size() * l.g_bytes;
  // Staged dy per chunk: [row][g][block][channel][step][64 bytes]: each step's kk positions
  // (2*kk bytes, a tile row) in a cache line of their own, not straddling two. Emerald Rapids
  // with AMX, 1 thread, against steps packed back to back (paired runs): b dW bf16 (kk 28, two
  // steps a row) 0.79x, d and e1 (one step of 28) 0.91x, g 0.93x, the seed (kk 18) 0.93x.
  const int64_t ch_bytes = (half / (g.kk / 2)) * kStepBytes;
  const int64_t blk_bytes = 16 * ch_bytes, t_bytes = gr.size() * blocks * blk_bytes;
  Scratch xs(size_t(planes) * l.plane_bytes), ys(size_t(chunk) * t_bytes);
  if (xs.p == nullptr || ys.p == nullptr) return -1;

  std::vector<Entry> entries;
  for (int gi = 0; gi < gr.size(); ++gi)
    for (int d = kd.lo; d <= kd.hi; ++d)
      for (int c = c1.lo; c <= c1.hi; ++c)
        for (int h = kh.lo; h <= kh.hi; ++h)
          for (int w = kw.lo; w <= kw.hi; ++w) {
            Entry e;
            e.gi = gi;
            e.x_off = gi * l.g_bytes + (d - kd.lo) * l.kd_bytes + int64_t(h - kh.lo) * g.dh * l.h_bytes +
                      (c - c1.lo) * l.c1_bytes + (w * g.dw % g.sw - ph_lo) * l.ph_bytes + (w * g.dw / g.sw) * 64;
            e.out_off = int64_t(w - kw.lo) * od[2].stride + int64_t(h - kh.lo) * od[3].stride +
                        int64_t(c - c1.lo) * od[4].stride + int64_t(d - kd.lo) * od[5].stride +
                        int64_t(gi) * od[6].stride;
            entries.push_back(e);
          }
  // The staged rows of x a chunk's rows read (sh > the taps' reach along h skips some).
  std::vector<char> needed(Hs, 0);
  for (int r = 0; r < span; ++r)
    for (int k = 0; k < kh.size(); ++k) needed[r * g.sh + k * g.dh] = 1;

  const int64_t out_n = od[1].stride;
  T::begin(g.kk);
  for (int k = parts.lo; k <= parts.hi; ++k) {
    float* sums = reinterpret_cast<float*>(out->host) + int64_t(k - parts.lo) * od[7].stride;
    // The part's planes (b*Do + do) as runs of consecutive ones: one run of whole batches, or
    // its depths of each batch.
    std::vector<std::pair<int, int>> runs;
    if (g.part_by_batch) {
      runs.push_back({std::min(g.N, k * g.part_len) * g.Do, std::min(g.N, (k + 1) * g.part_len) * g.Do});
    } else {
      for (int b = 0; b < g.N; ++b)
        runs.push_back({b * g.Do + std::min(g.Do, k * g.part_len), b * g.Do + std::min(g.Do, (k + 1) * g.part_len)});
    }
    bool first = true;
    for (auto [p0, p1] : runs)
      for (int r0 = p0 * g.Ho, r1, end = p1 * g.Ho; r0 < end; r0 = r1) {
        r1 = chunk >= g.Ho ? std::min(end, r0 + chunk) : std::min(r0 + chunk, (r0 / g.Ho + 1) * g.Ho);
        run_chunk<T, S>(Chunk{r0, r1, r0 / g.Ho, r0 % g.Ho, xs.p, l.plane_bytes, g.sh * l.h_bytes, ys.p,
                              t_bytes, blk_bytes, ch_bytes, blocks, g.Ho, half, g.kk, first},
                        l, x, dy, g, taps, needed, entries, n, sums, out_n);
        first = false;
      }
    // A part without output positions (more parts than planes) sums nothing.
    if (first)
      for (const Entry& e : entries)
        for (int bi = 0; bi < blocks; ++bi)
          for (int r = 0; r < 16; ++r) std::memset(sums + e.out_off + (bi * 16 + r) * out_n, 0, 64);
  }
  T::end();
  return 0;
}

Geometry geometry(int32_t N, int32_t D, int32_t H, int32_t W, int32_t C1, int32_t Do, int32_t Ho,
                  int32_t Wo, int32_t Co1, int32_t we, int32_t G, int32_t cin1_g, int32_t cout_g,
                  int32_t sd, int32_t sh, int32_t sw, int32_t dd, int32_t dh, int32_t dw, int32_t pf,
                  int32_t pt, int32_t pl, int32_t part_by_batch, int32_t part_len, int32_t kk) {
  return {N, D, H, W, C1, Do, Ho, Wo, Co1, we, G, cin1_g, cout_g, sd, sh, sw, dd, dh, dw, pf, pt, pl,
          part_by_batch, part_len, kk};
}

}  // namespace

#define TBEX_AMX_DW_GEOMETRY                                                                    \
  geometry(batch, in_d, in_h, in_w, in_c1, out_d, out_h, out_w, out_c1, row_positions, real_g, \
           cin1_g, cout_g, stride_d, stride_h, stride_w, dil_d, dil_h, dil_w, pad_d, pad_h,    \
           pad_w, part_by_batch, part_len, kk)

extern "C" int tbex_amx_dw(TBEX_AMX_DW_ARGS) {
  return amx_dw<AmxTiles, VectorStage>(x, dy, TBEX_AMX_DW_GEOMETRY, out);
}

// Tests only: left out of the object cached kernels link (EMBEDDED_KERNELS_OBJECT, CMakeLists.txt).
#ifndef EMBEDDED_KERNELS_OBJECT
extern "C" int tbex_amx_dw_emulated(TBEX_AMX_DW_ARGS) {
  return amx_dw<EmulatedTiles, ScalarStage>(x, dy, TBEX_AMX_DW_GEOMETRY, out);
}
#endif
