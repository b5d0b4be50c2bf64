#pragma once
/** The AMX-BF16 tile registers as tbex's hand-written tile kernels use them (tbex_amx_dx,
 * tbex_amx_dw): eight tiles in one fixed configuration, 0-3 fp32 accumulators of 16 x 16, 4-5
 * the first operands (16 rows x kk bf16), 6-7 the second (kk/2 rows of 16 bf16 pairs), and
 * accumulator C = i*2 + j multiplying operand 4 + i by operand 6 + j: a 2 x 2 block whose
 * operand loads each serve two multiplies. AmxTiles drives the hardware; EmulatedTiles the same
 * registers in memory, so a kernel's loops and indexing run (slowly) on any CPU. */
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tbex::amx {

constexpr int kRows = 16;  // rows of an accumulator and of a first operand (a whole tile register)

#define TBEX_AMX __attribute__((target("amx-tile,amx-bf16,prfchw")))

/** The 64-byte tile configuration (palette 1): tiles 0-3 accumulators (rows x 16 fp32), 4-5 the
 * first operands (rows x kk bf16), 6-7 the second (kk/2 rows of 16 bf16 pairs); rows 16 but
 * where a kernel's tiles hold fewer positions (a multiply costs its rows). */
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

/** The tile registers as AMX has them. Accumulator C (0-3) = i*2 + j multiplies operand 4 + i by
 * operand 6 + j. (GCC's tile intrinsics take the register number as a literal token.) */
struct AmxTiles {
  TBEX_AMX static void begin(int kk, int rows = kRows) {
    TileConfig cfg;
    for (int t = 0; t < 4; ++t) cfg.colsb[t] = 64, cfg.rows[t] = uint8_t(rows);
    for (int t = 4; t < 6; ++t) cfg.colsb[t] = uint16_t(kk * 2), cfg.rows[t] = uint8_t(rows);
    for (int t = 6; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = uint8_t(kk / 2);
    // Not _tile_loadconfig: GCC 12's names only the pointer's first 8 bytes as read, so the
    // stores filling the rest are dead to it (the tile kernels faulted on a config of zeros).
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
  }
  TBEX_AMX static void end() { _tile_release(); }
  template <int C>
  TBEX_AMX static void zero() {
    if constexpr (C == 0) _tile_zero(0);
    else if constexpr (C == 1) _tile_zero(1);
    else if constexpr (C == 2) _tile_zero(2);
    else _tile_zero(3);
  }
  /** Accumulator C loaded from its rows of 16 fp32, `stride` bytes apart (a sum carried over). */
  template <int C>
  TBEX_AMX static void load_acc(const float* p, int64_t stride) {
    if constexpr (C == 0) _tile_loadd(0, p, stride);
    else if constexpr (C == 1) _tile_loadd(1, p, stride);
    else if constexpr (C == 2) _tile_loadd(2, p, stride);
    else _tile_loadd(3, p, stride);
  }
  template <int T>
  TBEX_AMX static void load(const uint8_t* p, int64_t stride) {
    if constexpr (T == 4) _tile_loadd(4, p, stride);
    else if constexpr (T == 5) _tile_loadd(5, p, stride);
    else if constexpr (T == 6) _tile_loadd(6, p, stride);
    else _tile_loadd(7, p, stride);
  }
  template <int C>
  TBEX_AMX static void multiply() {
    if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
    else _tile_dpbf16ps(3, 5, 7);
  }
  template <int C>
  TBEX_AMX static void store(float* p, int64_t stride = 64) {
    if constexpr (C == 0) _tile_stored(0, p, stride);
    else if constexpr (C == 1) _tile_stored(1, p, stride);
    else if constexpr (C == 2) _tile_stored(2, p, stride);
    else _tile_stored(3, p, stride);
  }
};

/** The same registers emulated in memory (TDPBF16PS: per fp32 lane, the products of bf16 pairs,
 * exact in fp32, added to the sum), so the kernel's loops run on any CPU. */
struct EmulatedTiles {
  struct State {
    int kk = 32, rows = kRows;
    float acc[4][kRows][16];
    uint16_t op[4][kRows][32];  // 4-5: first operand rows (kk values), 6-7: second (32 values)
  };
  static State& state() {
    static thread_local State s;
    return s;
  }
  static float bf16(uint16_t b) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static void begin(int kk, int rows = kRows) { state().kk = kk, state().rows = rows; }
  static void end() {}
  template <int C>
  static void zero() {
    std::memset(state().acc[C], 0, sizeof state().acc[C]);
  }
  template <int C>
  static void load_acc(const float* p, int64_t stride) {
    for (int r = 0; r < state().rows; ++r)
      std::memcpy(state().acc[C][r], reinterpret_cast<const uint8_t*>(p) + r * stride, 64);
  }
  template <int T>
  static void load(const uint8_t* p, int64_t stride) {
    State& s = state();
    const int rows = T < 6 ? s.rows : s.kk / 2, bytes = T < 6 ? s.kk * 2 : 64;
    for (int r = 0; r < rows; ++r) std::memcpy(s.op[T - 4][r], p + r * stride, size_t(bytes));
  }
  template <int C>
  static void multiply() {
    State& s = state();
    const auto& a = s.op[C / 2];
    const auto& b = s.op[2 + C % 2];
    for (int m = 0; m < s.rows; ++m)
      for (int n = 0; n < 16; ++n) {
        float sum = s.acc[C][m][n];
        for (int k = 0; k < s.kk / 2; ++k)
          sum += bf16(a[m][2 * k]) * bf16(b[k][2 * n]) + bf16(a[m][2 * k + 1]) * bf16(b[k][2 * n + 1]);
        s.acc[C][m][n] = sum;
      }
  }
  template <int C>
  static void store(float* p, int64_t stride = 64) {
    for (int r = 0; r < state().rows; ++r)
      std::memcpy(reinterpret_cast<uint8_t*>(p) + r * stride, state().acc[C][r], 64);
  }
};

}  // namespace tbex::amx
