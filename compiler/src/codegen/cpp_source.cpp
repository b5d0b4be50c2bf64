/** C++ source output through Halide's C backend, made to build and run well with g++ and clang.
 *
 * What Halide 21's C++ output gets wrong for tbex's kernels, and what this file does about it:
 *  - fp16 inputs: the code names a type `float16_t` that nothing defines (Halide only maps it to
 *    _Float16 for g++ >= 12 / clang >= 15 in its runtime header, and clang 14 has no x86
 *    _Float16 at all), so fp16 kernels do not compile. tbex writes a prelude that defines
 *    `float16_t` as 16 bits with F16C conversions, carries fp16 vectors as uint16 bit vectors,
 *    and rewrites each fp16 <-> fp32 vector conversion into one call that converts 16 lanes per
 *    vcvtph2ps / vcvtps2ph (an element-wise loop otherwise).
 *  - g++ and register tiles: a schedule's register tile is a small local array (`float
 *    _acc[256]`) indexed by constants. g++'s scalar replacement of aggregates (SRA) turns it into
 *    16 loop-carried vectors, and its register allocator then copies every accumulator each
 *    iteration and spills one, whose store-load chain bounds the loop. Without SRA, g++ keeps the
 *    tile in registers by its later passes and matches LLVM (bench/bench_cpp_source.py compares
 *    them), so the file turns SRA off for itself with `#pragma GCC optimize("no-tree-sra")`
 *    (g++ only; clang does not need it).
 *  - clang and fused multiply-add: Halide writes a*b and +c as separate statements, and clang
 *    fuses only within one expression, so its tiles ran vmulps + vaddps instead of FMAs.
 *    `#pragma clang fp contract(fast)` lets it fuse as LLVM's Halide code does
 *    (g++ already contracts across statements), which also keeps results equal to LLVM's.
 * The rest of Halide's output (native vector types via vector_size / ext_vector_type, its
 * helper classes, the runtime declarations) is kept as emitted: it is readable C++. */
#include "codegen/cpp_source.h"

#include <unistd.h>

#include <regex>
#include <sstream>

#include "schedules/cost_model.h"
#include "support/files.h"
#include "tbex/errors.h"

namespace tbex::codegen {
namespace {

using support::write_text;

/** Defines what Halide's output needs but does not declare; goes first in NAME.cpp. */
constexpr const char* kPrelude = R"(#if defined(__GNUC__) && !defined(__clang__)
/* g++: scalar replacement of the register-tile arrays makes its register allocator copy and
 * spill accumulators every iteration; without it the tile stays in zmm registers. */
#pragma GCC optimize("no-tree-sra")
#endif
/* 16-lane vectors (the tiles' c0 lanes) on targets without AVX-512 are two registers each; g++
 * and clang note that passing them by value between functions changes the ABI. Only the file's
 * own internal helpers pass them, compiled together, so the note does not apply. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#if defined(__clang__)
/* clang: fuse a*b + c across Halide's statements into FMAs, as LLVM-compiled Halide does. */
#pragma clang fp contract(fast)
#endif

/* tbex prelude: IEEE fp16 for Halide's C++ output (tbex::codegen::emit_cpp_source).
 * float16_t holds the bits of a half; scalar conversions are F16C's vcvtsh2ss / vcvtss2sh
 * (round to nearest even) when the target has F16C, else exact bit manipulation. Vectors of
 * fp16 are uint16 vectors of bits, converted by tbex_from_half_bits / tbex_to_half_bits. */
#include <stdint.h>
#include <string.h>
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tbex_prelude {

inline float half_to_float(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf, nan
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalize
    int e = -1;
    uint32_t m = man;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400) == 0);
    u = sign | ((uint32_t)(112 - e) << 23) | ((m & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}

inline uint16_t float_to_half(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, 0);  // 0: round to nearest even
#else
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // nan
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  // rounds to inf
  if (a < 0x38800000u) {  // subnormal or zero: add the implicit bit, shift, round to even
    const int shift = 126 - (int)(a >> 23);
    if (shift > 24) return sign;
    const uint32_t m = (a & 0x7fffff) | 0x800000;
    const uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return (uint16_t)(sign | (r + (rem > half || (rem == half && (r & 1)))));
  }
  const uint32_t r = a - 0x38000000u;  // rebias 127 -> 15
  return (uint16_t)(sign | ((r + 0xfff + ((r >> 13) & 1)) >> 13));
#endif
}

/** n halves to floats, 16 / 8 lanes per instruction where the target has them. The maskz forms:
 * g++ 12's _mm512_cvtph_ps / _mm512_cvtps_ph pass an uninitialized source (-Wuninitialized). */
__attribute__((always_inline)) inline void halves_to_floats(const uint16_t* in, float* out, int n) {
  int i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256((const __m256i*)(in + i))));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(in + i))));
#endif
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

__attribute__((always_inline)) inline void floats_to_halves(const float* in, uint16_t* out, int n) {
  int i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i*)(out + i), _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(in + i),
                                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), 0));
#endif
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}

}  // namespace tbex_prelude

/** A half: Halide's scalar fp16 type. Loads and stores move bits; (float)h and (float16_t)f
 * convert. */
struct float16_t {
  uint16_t bits;
  float16_t() = default;
  explicit float16_t(float f) : bits(tbex_prelude::float_to_half(f)) {}
  explicit operator float() const { return tbex_prelude::half_to_float(bits); }
};

/** Vector conversions: Lanes fp16 lanes (a uint16 bit vector) to / from a float vector. */
template <typename FloatVec, int Lanes, typename HalfVec>
__attribute__((always_inline)) inline FloatVec tbex_from_half_bits(const HalfVec& h) {
  uint16_t in[Lanes];
  float out[Lanes];
  memcpy(in, &h, sizeof(in));
  tbex_prelude::halves_to_floats(in, out, Lanes);
  FloatVec r;
  memcpy(&r, out, sizeof(out));
  return r;
}

template <typename HalfVec, int Lanes, typename FloatVec>
__attribute__((always_inline)) inline HalfVec tbex_to_half_bits(const FloatVec& f) {
  float in[Lanes];
  uint16_t out[Lanes];
  memcpy(in, &f, sizeof(in));
  tbex_prelude::floats_to_halves(in, out, Lanes);
  HalfVec r;
  memcpy(&r, out, sizeof(out));
  return r;
}
/* end of tbex prelude */

)";

/** Carries fp16 vectors as uint16 bits and converts them with the prelude's templates. */
std::string fix_float16(std::string src, const std::string& name) {
  if (src.find("float16_t") == std::string::npos) return src;
  // Vector types: NativeVector<float16_t, N> etc. become uint16 bit vectors.
  src = std::regex_replace(src, std::regex(R"(\b(NativeVector|NativeVectorOps|CppVector|CppVectorOps)<float16_t, )"),
                           "$1<uint16_t, ");
  // float<N>_ops::convert_from<float16_t<N>>(x) and the reverse.
  src = std::regex_replace(src, std::regex(R"(\b(float(\d+))_ops::convert_from<float16_t\d+>\()"),
                           "tbex_from_half_bits<$1, $2>(");
  src = std::regex_replace(src, std::regex(R"(\b(float16_t(\d+))_ops::convert_from<float\d+>\()"),
                           "tbex_to_half_bits<$1, $2>(");
  // A prefetch of an fp16 buffer: Halide declares its (unused) value with the buffer's element
  // type, `float16_t _7 = (__builtin_prefetch(...), 0);`, which no half type can be
  // initialized from; the value is an int.
  src = std::regex_replace(src, std::regex(R"(\bfloat16_t (_\w+) = \(__builtin_prefetch\()"),
                           "int $1 = (__builtin_prefetch(");
  // Anything else converting fp16 vectors would now see integers: refuse rather than miscompute.
  internal_check(!std::regex_search(src, std::regex(R"(convert_from<float16_t\d+>|float16_t\d+_ops::convert_from)")),
                 "C++ source of " + name + " converts fp16 vectors to a type tbex's prelude does not handle");
  return src;
}

/** Halide names the header's include guard after the path it wrote (here the in-memory
 * file's): `guard` instead, the same wherever the header is. */
std::string with_guard(std::string header, const std::string& guard) {
  const std::string ifndef = "#ifndef ";
  if (header.rfind(ifndef, 0) != 0) return header;
  const std::string old = header.substr(ifndef.size(), header.find('\n') - ifndef.size());
  for (size_t at = header.find(old); at != std::string::npos; at = header.find(old, at + guard.size()))
    header.replace(at, old.size(), guard);
  return header;
}

}  // namespace

Halide::Target cpp_source_target(const Halide::Target& t) { return sched::without_bf16_dot(t); }

std::vector<std::string> emit_cpp_source(const lower::Lowered& l, const std::string& name,
                                         const Halide::Target& target, const std::string& dir,
                                         const std::string& file_stem) {
  const std::string src = dir + "/" + (file_stem.empty() ? name : file_stem) + ".cpp";
  const std::string hdr = dir + "/" + name + ".h";
  Halide::Pipeline p = l.pipeline;
  // Written in memory first: Halide's writers do not report a full disk; write_text does.
  support::MemFile src_mem, hdr_mem;
  try {
    p.compile_to({{Halide::OutputFileType::c_source, src_mem.path()},
                  {Halide::OutputFileType::c_header, hdr_mem.path()}},
                 l.args, name, target);
  } catch (const Halide::Error& e) {
    throw InternalError("Halide's C backend failed on " + name + ": " + e.what());
  }
  std::string code = fix_float16(src_mem.bytes(), name);
  const std::string banner = "/* MACHINE GENERATED By Halide. */\n";
  const size_t at = code.rfind(banner, 0) == 0 ? banner.size() : 0;
  code.insert(at, "/* " + name + ": " + l.schedule + " (" + l.schedule_detail + ") */\n" + kPrelude);
  write_text(src, code);
  try {
    write_text(hdr, with_guard(hdr_mem.bytes(), "HALIDE_" + name + "_H"));
  } catch (const UserError&) {
    ::unlink(src.c_str());  // both or neither
    throw;
  }
  return {src, hdr};
}

}  // namespace tbex::codegen
