#pragma once
/** The subset of Ascend C's kernel_operator.h that kernels using the Conv3DBackpropFilter /
 * Conv3DBackpropInput high-level APIs touch, for compiling them with g++ or clang++ on x86.
 * Qualifiers are empty (as in Ascend's CPU debug mode); global memory is ordinary memory. */
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tbex/ascendc/conv_common.h"
#include "tbex/ascendc/launch.h"
#include "tbex/ascendc/tiling_data.h"
#include "tbex/ascendc/types.h"

#ifndef __aicore__
#define __aicore__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef GM_ADDR
#define GM_ADDR __gm__ uint8_t*
#endif
#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/** `if ASCEND_IS_AIV { return; }`: only cube (AIC) instances run here. */
#define ASCEND_IS_AIC (true)
#define ASCEND_IS_AIV (false)

/** Compile-time metadata on Ascend; nothing to do here. */
enum KernelMetaType {
  KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIV_1_0, KERNEL_TYPE_MIX_AIC_1_0,
  KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2, KERNEL_TYPE_MAX
};
#define KERNEL_TASK_TYPE_DEFAULT(type)
#define KERNEL_TASK_TYPE(key, type)
#define ENABLE_DETERMINISTIC()
/** GET_TILING_DATA reads the type REGISTER_TILING_DEFAULT named (in the same or an outer scope). */
#define REGISTER_TILING_DEFAULT(type) using tbex_ascendc_default_tiling_t = type
#define GET_TILING_DATA_WITH_STRUCT(type, var, tiling)         \
  type var;                                                    \
  std::memcpy(static_cast<void*>(&var), (const void*)(tiling), sizeof(type))
#define GET_TILING_DATA(var, tiling) \
  GET_TILING_DATA_WITH_STRUCT(tbex_ascendc_default_tiling_t, var, tiling)
#define TILING_KEY_IS(key) (::tbex::ascendc::tiling_key() == (uint64_t)(key))

namespace AscendC {

/** Kernel-side buffer positions (CANN: enum class TPosition : uint8_t). */
enum class TPosition : uint8_t {
  GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM,
  TSCM, C2PIPE2GM, C2PIPE2LOCAL, MAX
};
using QuePosition = TPosition;
enum CoreType : uint8_t { AIC = 1, AIV = 2, MIX = 3 };

inline int64_t GetBlockIdx() { return ::tbex::ascendc::core_idx(); }
inline int64_t GetBlockNum() { return ::tbex::ascendc::core_num(); }
inline int64_t GetSubBlockIdx() { return 0; }
inline int64_t GetTaskRation() { return 1; }
inline void SyncAll() { ::tbex::ascendc::sync_all(); }
template <bool isAIVOnly = true>
inline void SyncAll() { ::tbex::ascendc::sync_all(); }
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }
inline GM_ADDR GetSysWorkSpacePtr() { return nullptr; }

template <class T, class U>
inline constexpr T DivCeil(T a, U b) { return (a + (T)b - 1) / (T)b; }
template <class T, class U>
inline constexpr T Ceil(T a, U b) { return DivCeil(a, b); }
template <class T, class U>
inline constexpr T AlignUp(T a, U b) { return DivCeil(a, b) * (T)b; }

template <class A, class B>
struct IsSameType { static constexpr bool value = std::is_same<A, B>::value; };

/** A view of global memory: a pointer and (optionally) an element count. */
template <class T>
class GlobalTensor {
 public:
  using PrimType = T;
  void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize) {
    addr_ = buffer;
    size_ = bufferSize;
  }
  void SetGlobalBuffer(__gm__ T* buffer) { SetGlobalBuffer(buffer, 0); }
  /** The view starting `offset` elements further. */
  GlobalTensor operator[](uint64_t offset) const {
    GlobalTensor r;
    r.addr_ = addr_ + offset;
    r.size_ = size_ > offset ? size_ - offset : 0;
    return r;
  }
  __gm__ T* GetPhyAddr() const { return addr_; }
  __gm__ T* GetPhyAddr(uint64_t offset) const { return addr_ + offset; }
  T GetValue(uint64_t offset) const { return addr_[offset]; }
  void SetValue(uint64_t offset, T value) { addr_[offset] = value; }
  T& operator()(uint64_t offset) { return addr_[offset]; }
  uint64_t GetSize() const { return size_; }
  template <class U>
  GlobalTensor<U> ReinterpretCast() const {
    GlobalTensor<U> r;
    r.SetGlobalBuffer(reinterpret_cast<__gm__ U*>(addr_), size_ * sizeof(T) / sizeof(U));
    return r;
  }
  template <class Mode>
  void SetL2CacheHint(Mode) {}

 private:
  __gm__ T* addr_ = nullptr;
  uint64_t size_ = 0;
};

/** The pipe the conv APIs keep in ctx.pipe_: on the CPU there are no on-chip buffers to carve. */
class TPipe {
 public:
  void Init() {}
  void Destroy() {}
  void Reset() {}
  template <class Q>
  bool InitBuffer(Q&, uint32_t = 0, uint32_t = 0) { return true; }
};

}  // namespace AscendC

/** Ascend's kernels read these as globals. */
#define block_idx (AscendC::GetBlockIdx())
#define block_num (AscendC::GetBlockNum())
