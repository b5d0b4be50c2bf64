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
 * Why the kernel stages dy: a tile row is one position's kk channels, two 6HD blocks apart in
 * dy. Halide staged all of dy at root before the calls (c2 dX ~1 ms of 6); here each call
 * stages the rows its (batch, depth) reads, a copy of 32-byte runs into memory that stays in
 * L2, and skips the taps whose rows lie outside the volume along h and d (Halide's stage held
 * zeros there, and the tiles multiplied them).
 *
 * The tile loads' rows must not cross cache lines: the staged rows and the weights are 64-byte
 * aligned, so a tile of 16 positions is one contiguous kk*32-byte run and a weight tile kk/2
 * whole lines. (A microbenchmark of c2's calls from buffers only 16-byte aligned ran 42 cycles
 * a multiply instead of 18.) */
#include "tbex/amx_dx.h"

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
  int Do, Ho, Wo, Co1, Kd, Kh, Kw, sd, sh, sw, dd, dh, dw, pf, pt, pl, cin1_g, cout_g, kk;
};

/** The fewest steps (tile multiplies of one channel chunk and tap) of a block that fetches its
 * output lines for writing (see block). */
constexpr int kMinPrefetchSteps = 4;

/** Weight bytes of a visit's blocks (2 x 1 KB a tap and chunk of 32 channels) up to which
 * the kernel walks the rows inside the blocks (the weights stay in L1 across rows). */
constexpr int64_t kL1Weights = 24 * 1024;

/** Of a dX position t + pad (its index plus the head pad, less the tap's reach k*dil), the dy
 * index its tap reads along a dim of stride s: whether the tap is one of the position's stride
 * phase (t divisible by s), and then t / s in `o`. */
inline bool phase_tap(int t, int s, int* o) {
  if (t % s != 0) return false;
  *o = t / s;
  return true;
}

/** A (kd, kh) tap of a row of positions whose dy row is staged: the tap's index kd*Kh + kh and
 * the row's byte offset in the staged dy of a group. */
struct RowTap {
  int kdh;
  int64_t off;
};
/** A kw tap of a stride phase along w: the staged position its tile starting at the phase's
 * first position reads (later tiles add their first position's phase index). */
struct WTap {
  int kw, q;
};

/** Where a block finds its operands: the call's staged dy for one (batch, depth), and the
 * weights. */
struct Frame {
  const uint8_t* dy;        // staged: [group][kd][row][chunk][position], kk channels a position
  int64_t pos, chunk, row, kd, group;  // byte strides
  int pw0, oh0, rows;       // the first staged position and row; rows per kd
  const uint8_t* wt;        // wt(0, 0, rowmin)
  int64_t wt_row;           // byte stride of a row
  int32_t wt_rowmin;
  const Geometry* g;         // the conv
  int taps;
};

/** One block: MP position tiles of one stride phase along w (the first from the phase's
 * position k0, the second `second` positions later; 16 positions each, sw apart in dX) x NB
 * input blocks (from c1, real group gl of the call), over the row's live (kd, kh) taps `rows`
 * and the phase's kw taps `ws`, and every channel chunk. Within a phase the taps read
 * consecutive dy positions, so a tile is one staged run as without a stride. Accumulator (i, j)
 * is tile i*2 + j, stored at dst[i*2 + j] as 16 rows (positions) of 16 lanes, dst_stride[i*2 +
 * j] bytes apart. */
template <class T, int MP, int NB>
TBEX_AMX void block(const Frame& f, const std::vector<RowTap>& rows, const std::vector<WTap>& ws,
                    int k0, int second, int gl, int c1, float* const* dst, const int64_t* dst_stride) {
  T::template zero<0>();
  if constexpr (NB > 1) T::template zero<1>();
  if constexpr (MP > 1) T::template zero<2>();
  if constexpr (MP > 1 && NB > 1) T::template zero<3>();
  const Geometry& g = *f.g;
  const int chunks = g.cout_g / g.kk, half = g.cout_g / 2, pair_rows = g.kk / 2;
  const uint8_t* dyg = f.dy + gl * f.group;
  // The accumulators' destination lines (MP x NB tiles of 16) fetched for writing while the
  // tiles multiply, spread over the block's steps, so that the stores at its end find them in
  // L1: a tile store into lines not owned waits for each one (an output of 33 MB, c1's, lives
  // in L3), and the next block's tiles wait for the stores. Alternated run by run in one
  // process (bench/RESULTS.md): c1 dX 15.0 -> 12.8 ms, b and c2 6% faster, d, e1, f 3%.
  // An output not 64-byte aligned (a caller's buffer 16 bytes into a line, as numpy's often
  // are) puts each 64-byte row across two lines, and both are fetched: with the first only, g
  // dX bf16 ran 10-16 ms by where its buffer started against 8.0 aligned; with both, 8.0 at
  // every address (bench/RESULTS.md, eighth session).
  // A block of fewer than kMinPrefetchSteps steps fetches nothing: the fetches' address
  // arithmetic (64 lines in 2 steps) costs more than they save (d_i3d's visits of 2 steps ran
  // 0.84x as long without them, at 1 and 2 threads; g's of 4-32 steps 1.27x as long).
  bool split = false;
  for (int k = 0; k < 4; ++k) split |= (reinterpret_cast<uintptr_t>(dst[k]) & 63) != 0;
  const int steps = std::max<int>(1, rows.size() * ws.size() * chunks);
  const int span_bits = split ? 1 : 0;
  const int lines = steps < kMinPrefetchSteps ? 0 : (MP * NB * kRows) << span_bits;
  const int per_step = (lines + steps - 1) / steps;
  int line = 0;
  auto prefetch = [&] {
    for (int e = line + per_step; line < e && line < lines; ++line) {
      const int row = line >> span_bits, k = NB == 2 ? row / kRows : (row / kRows) * 2;
      _m_prefetchw(reinterpret_cast<char*>(dst[k]) + (row % kRows) * dst_stride[k] + (line & span_bits) * 63);
    }
  };
  for (const RowTap& rt : rows) {
    const uint8_t* row = dyg + rt.off;
    for (const WTap& wt : ws) {
      const uint8_t* a0 = row + int64_t(wt.q + k0) * f.pos;
      const uint8_t* a1 = a0 + second * f.pos;
      const int tap = rt.kdh * g.Kw + wt.kw;
      const uint8_t* b0 =
          f.wt + (int64_t((c1 * f.taps + tap) * half) - f.wt_rowmin) * f.wt_row;
      const uint8_t* b1 = b0 + int64_t(f.taps) * half * f.wt_row;
      for (int kc = 0; kc < chunks; ++kc) {
        const int64_t ka = kc * f.chunk, kb = int64_t(kc) * pair_rows * f.wt_row;
        prefetch();
        T::template load<4>(a0 + ka, f.pos);
        T::template load<6>(b0 + kb, f.wt_row);
        T::template multiply<0>();
        if constexpr (NB > 1) {
          T::template load<7>(b1 + kb, f.wt_row);
          T::template multiply<1>();
        }
        if constexpr (MP > 1) {
          T::template load<5>(a1 + ka, f.pos);
          T::template multiply<2>();
          if constexpr (NB > 1) T::template multiply<3>();
        }
      }
    }
  }
  T::template store<0>(dst[0], dst_stride[0]);
  if constexpr (NB > 1) T::template store<1>(dst[1], dst_stride[1]);
  if constexpr (MP > 1) T::template store<2>(dst[2], dst_stride[2]);
  if constexpr (MP > 1 && NB > 1) T::template store<3>(dst[3], dst_stride[3]);
}

/** The extern stage on tile registers T: a bounds query's answer, or the sums. */
template <class T>
int amx_dx(halide_buffer_t* dyb, halide_buffer_t* wt, const Geometry& g, halide_buffer_t* out) {
  const halide_dimension_t* o = out->dim;  // (c0, w, h, c1, d, b)
  const int taps = g.Kd * g.Kh * g.Kw, half = g.cout_g / 2;
  const Range wr = range(out, 1), hr = range(out, 2), cr = range(out, 3), dr = range(out, 4),
              br = range(out, 5);
  if (dyb->host == nullptr || wt->host == nullptr || out->host == nullptr) {
    // A bounds query: inputs without memory ask what the call reads (dy, held by the caller,
    // may arrive with its memory beside an output without).
    if (dyb->host == nullptr) {
      set_dims(dyb, {16, g.Wo, g.Ho, g.Co1, g.Do});
      dyb->dim[5].min = br.lo, dyb->dim[5].extent = br.size();
    }
    if (wt->host == nullptr) {
      set_dims(wt, {2, 16});
      wt->dim[2].min = cr.lo * taps * half, wt->dim[2].extent = cr.size() * taps * half;
    }
    return 0;
  }
  // Whole 16-lane blocks of out; 16 channels a dy position side by side; chunks of whole blocks.
  if (o[0].stride != 1 || o[0].min != 0 || o[0].extent != 16 || dyb->dim[0].stride != 1 ||
      dyb->dim[0].extent != 16 || g.kk < 2 || g.kk % 2 != 0 || g.kk > 32 || g.cout_g % g.kk != 0)
    return -1;
  const View6 dy = view(dyb);
  const bool strided = g.sd > 1 || g.sh > 1 || g.sw > 1;
  if (g.sd < 1 || g.sh < 1 || g.sw < 1) return -1;
  // The sums' rows back to back (each row's 16-position tiles end where the next row's start):
  // a tile reaching past its row's end is stored straight into the output where what it spills
  // is the call's later rows, which are computed after it (and overwrite the spill). Strided,
  // a tile's positions are a phase's, sw apart, and its spill would land on other phases.
  const bool rows_abut = !strided && o[2].stride == int64_t(wr.size()) * o[1].stride;
  // Pointwise along h and w, whole rows back to back in dy and in the sums: the call's rows are
  // one row of hr.size() x W positions, so only the call's last tile is ragged and none is
  // padded (d_i3d: 28 positions a row in two tiles of 16).
  const bool flat = tbex::amx_dx_flat_rows(g.Kh, g.Kw, g.pt, g.pl, wr.size(), g.Wo, hr.size()) &&
                    wr.lo == 0 && dy.h == g.Wo * dy.w && rows_abut;
  const Range hc = flat ? Range{hr.lo, hr.lo} : hr;  // the rows the loops walk
  const int W = flat ? wr.size() * hr.size() : wr.size(), w0 = wr.lo;
  const int Wo = flat ? (g.Ho - hr.lo) * g.Wo : g.Wo;  // dy positions a staged row may read
  const int g_lo = cr.lo / g.cin1_g, groups = cr.hi / g.cin1_g - g_lo + 1, chunks = g.cout_g / g.kk;
  // The stride phases along w (one without a stride): phase j holds positions w0 + j + k*sw,
  // k < count, walked in tiles of 16.
  struct Phase {
    int count, tiles;
  };
  std::vector<Phase> phases;
  for (int j = 0; j < std::min(g.sw, W); ++j) {
    const int count = (W - j + g.sw - 1) / g.sw;
    phases.push_back({count, (count + kRows - 1) / kRows});
  }
  // Staged dy per (batch, depth): the positions and rows the call's tiles and taps reach (of
  // each phase, its own taps only).
  Frame f;
  std::vector<std::vector<WTap>> wtaps(phases.size());  // each phase's kw taps
  int pw_lo = INT32_MAX, pw_hi = INT32_MIN, q;
  for (int j = 0; j < (int)phases.size(); ++j)
    for (int kw = 0; kw < g.Kw; ++kw)
      if (phase_tap(w0 + j + g.pl - kw * g.dw, g.sw, &q)) {
        wtaps[j].push_back({kw, q});
        pw_lo = std::min(pw_lo, q), pw_hi = std::max(pw_hi, q + phases[j].tiles * kRows);
      }
  int oh_lo = INT32_MAX, oh_hi = INT32_MIN;
  for (int h = hc.lo; h <= hc.hi; ++h)
    for (int kh = 0; kh < g.Kh; ++kh)
      if (phase_tap(h + g.pt - kh * g.dh, g.sh, &q)) oh_lo = std::min(oh_lo, q), oh_hi = std::max(oh_hi, q);
  if (pw_lo > pw_hi) pw_lo = 0, pw_hi = 1;  // no tap reaches dy: one zero position, never read
  if (oh_lo > oh_hi) oh_lo = oh_hi = 0;     // no row reaches dy: one row, never staged
  f.pw0 = pw_lo, f.oh0 = oh_lo, f.rows = oh_hi - oh_lo + 1;
  for (auto& ws : wtaps)
    for (WTap& wt : ws) wt.q -= f.pw0;
  const int positions = pw_hi - pw_lo;
  // A position's kk channels (2*kk bytes) padded to a divisor of 64 bytes, so no tile row
  // straddles two lines (kk 24: 48 bytes padded to 64).
  f.pos = staged_position_bytes(g.kk);
  f.chunk = positions * f.pos, f.row = chunks * f.chunk, f.kd = f.rows * f.row;
  f.group = g.Kd * f.kd;
  Scratch staged(size_t(groups) * f.group);
  if (staged.p == nullptr) return -1;
  f.dy = staged.p;
  std::vector<char> needed(f.rows, 0), live(size_t(g.Kd) * f.rows, 0);  // dilations skip rows
  for (int h = hc.lo; h <= hc.hi; ++h)
    for (int kh = 0; kh < g.Kh; ++kh)
      if (phase_tap(h + g.pt - kh * g.dh, g.sh, &q)) needed[q - f.oh0] = 1;
  std::vector<std::vector<RowTap>> row_taps(hc.size());  // per row: its live (kd, kh) taps
  f.wt = wt->host;
  f.wt_row = int64_t(wt->dim[2].stride) * 2;
  f.wt_rowmin = wt->dim[2].min;
  f.g = &g, f.taps = taps;

  constexpr int kTile = kRows * 16;  // floats of one accumulator tile
  alignas(64) float sums[4 * kTile];
  auto* base = reinterpret_cast<float*>(out->host);
  // The output of 16 positions from wi, block c1, row (h, d, b): 16 rows sw * o[1].stride apart.
  const int64_t tile_row = int64_t(g.sw) * o[1].stride;
  auto at = [&](int wi, int c1, int h, int d, int b) {
    return base + int64_t(wi - w0) * o[1].stride + int64_t(h - hr.lo) * o[2].stride +
           int64_t(c1 - cr.lo) * o[3].stride + int64_t(d - dr.lo) * o[4].stride +
           int64_t(b - br.lo) * o[5].stride;
  };
  // The (row, first block) visits of each (batch, depth): two blocks where the next one is in
  // the region and in the same real group. Rows inside blocks where the blocks' weights stay in
  // L1 across the rows (e1's groups of 16 channels: 14 KB a block; the call's dy rows come from
  // L2 either way): 8% faster there; else blocks inside rows, so a row's dy tiles stay in L1
  // across the blocks (c2's and b's weights, 55-110 KB a block, stream from L2 either way).
  struct Visit {
    int h, c1, nb;  // row, first block, blocks
  };
  std::vector<Visit> visits;
  {
    std::vector<std::pair<int, int>> firsts;  // (first block, blocks)
    for (int c1 = cr.lo; c1 <= cr.hi; c1 += firsts.back().second)
      firsts.push_back({c1, (c1 + 1 <= cr.hi && (c1 + 1) / g.cin1_g == c1 / g.cin1_g) ? 2 : 1});
    const int64_t block_weights = int64_t(taps) * g.cout_g * 32 * std::min(2, g.cin1_g);
    if (block_weights <= kL1Weights) {
      for (auto [c1, nb] : firsts)
        for (int h = hc.lo; h <= hc.hi; ++h) visits.push_back({h, c1, nb});
    } else {
      for (int h = hc.lo; h <= hc.hi; ++h)
        for (auto [c1, nb] : firsts) visits.push_back({h, c1, nb});
    }
  }
  T::begin(g.kk);
  for (int b = br.lo; b <= br.hi; ++b)
    for (int d = dr.lo; d <= dr.hi; ++d) {
      for (int kd = 0; kd < g.Kd; ++kd) {
        int od = -1;
        const bool tap = phase_tap(d + g.pf - kd * g.dd, g.sd, &od);
        for (int r = 0; r < f.rows; ++r) {
          const int oh = f.oh0 + r;
          char& l = live[size_t(kd) * f.rows + r];
          l = needed[r] && tap && od >= 0 && od < g.Do && oh >= 0 && oh < g.Ho;
          if (l)
            stage_row(staged.p + kd * f.kd + r * f.row, {f.pos, f.chunk, f.group, f.pw0}, dy, g.cout_g, g.kk,
                      g.Co1, g_lo, groups, oh, od, b, positions, Wo);
        }
      }
      for (int h = hc.lo; h <= hc.hi; ++h) {
        auto& rt = row_taps[h - hc.lo];
        rt.clear();
        for (int kd = 0; kd < g.Kd; ++kd)
          for (int kh = 0; kh < g.Kh; ++kh)
            if (phase_tap(h + g.pt - kh * g.dh, g.sh, &q) && live[size_t(kd) * f.rows + q - f.oh0])
              rt.push_back({kd * g.Kh + kh, kd * f.kd + (q - f.oh0) * f.row});
      }
      for (const auto& [h, c1, nb] : visits) {
        const int gl = c1 / g.cin1_g - g_lo;
        const std::vector<RowTap>& rows = row_taps[h - hc.lo];
        for (int j = 0; j < (int)phases.size(); ++j) {
          const auto [count, tiles] = phases[j];
          // A phase of 16 positions or more ends in a whole tile, shifted back to end at its
          // last position (positions computed twice, stored twice with the same bits), so every
          // tile is stored straight into the output. (Through `sums` and copied out, g dX bf16's
          // ragged tiles of 12 cost 1 / 0.825 of the time: a vector reload waits for the tile
          // store.)
          auto first = [&, count = count](int t) {
            return count >= kRows ? std::min(t * kRows, count - kRows) : t * kRows;
          };
          for (int t = 0; t < tiles; t += 2) {
            const int mp = std::min(2, tiles - t), k0 = first(t);
            const int second = mp == 2 ? first(t + 1) - first(t) : kRows;
            // A tile is stored straight into the output when it ends in its row or (a row
            // shorter than a tile) spills into the call's later rows (rows_abut); else into
            // `sums`, its valid rows copied out after.
            float* dst[4] = {sums, sums + kTile, sums + 2 * kTile, sums + 3 * kTile};
            int64_t stride[4] = {64, 64, 64, 64};
            for (int i = 0; i < mp; ++i)
              for (int jb = 0; jb < nb; ++jb) {
                const int k0 = first(t + i), wi = w0 + j + k0 * g.sw;
                const bool fits = count - k0 >= kRows ||
                                  (rows_abut && int64_t(hc.hi - h + 1) * W - (wi - w0) >= kRows);
                if (fits) dst[i * 2 + jb] = at(wi, c1 + jb, h, d, b), stride[i * 2 + jb] = tile_row * 4;
              }
            if (mp == 2 && nb == 2) block<T, 2, 2>(f, rows, wtaps[j], k0, second, gl, c1, dst, stride);
            else if (mp == 2) block<T, 2, 1>(f, rows, wtaps[j], k0, second, gl, c1, dst, stride);
            else if (nb == 2) block<T, 1, 2>(f, rows, wtaps[j], k0, second, gl, c1, dst, stride);
            else block<T, 1, 1>(f, rows, wtaps[j], k0, second, gl, c1, dst, stride);
            for (int i = 0; i < mp; ++i)
              for (int jb = 0; jb < nb; ++jb) {
                const float* s = sums + (i * 2 + jb) * kTile;
                if (dst[i * 2 + jb] != s) continue;  // stored in place
                const int k0 = first(t + i), wi = w0 + j + k0 * g.sw;
                float* o_ij = at(wi, c1 + jb, h, d, b);
                for (int r = 0; r < count - k0; ++r) std::memcpy(o_ij + r * tile_row, s + r * 16, 64);
              }
          }
        }
      }
    }
  T::end();
  return 0;
}

}  // namespace

#define TBEX_AMX_DX_GEOMETRY                                                                \
  Geometry{out_d,    out_h,    out_w,  out_c1, kd_extent, kh_extent, kw_extent,              \
           stride_d, stride_h, stride_w, dil_d,  dil_h,     dil_w,     pad_d,     pad_h, pad_w, \
           cin1_g,   cout_g,   kk}

extern "C" int tbex_amx_dx(TBEX_AMX_DX_ARGS) {
  return amx_dx<AmxTiles>(dy, wt, TBEX_AMX_DX_GEOMETRY, out);
}

// Tests only: left out of the object cached kernels link (EMBEDDED_KERNELS_OBJECT, CMakeLists.txt).
#ifndef EMBEDDED_KERNELS_OBJECT
extern "C" int tbex_amx_dx_emulated(TBEX_AMX_DX_ARGS) {
  return amx_dx<EmulatedTiles>(dy, wt, TBEX_AMX_DX_GEOMETRY, out);
}
#endif
