#pragma once
/** Running Ascend C kernels on the CPU: `launch(kernel, block_dim, args...)` runs block_dim
 * logical AI cores of `kernel(args...)` in this process.
 *
 * Each logical core is a thread of its own (GetBlockIdx() is its index), so SyncAll() is a real
 * barrier whatever block_dim is; at most tbex::num_threads() cores compute at once (a core
 * waiting in SyncAll gives its turn away). With one core the kernels it runs use tbex's whole
 * thread pool; with several, each core runs its tbex kernels on its own thread. Global memory is
 * this process's memory: no files, no child processes (Ascend's CPU debug mode forks one process
 * per core and shares GM through mmap'ed files). The first exception a core throws ends the
 * launch (cores blocked in SyncAll are released) and is rethrown by launch(). */
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "tbex/ascendc/export.h"

namespace tbex::ascendc {

/** Runs body once per logical core; see above. block_dim in [1, 65535] (UserError E60011
 * otherwise). */
TBEX_ASCENDC_API void launch_cores(int64_t block_dim, const std::function<void()>& body);

template <class Kernel, class... Args>
void launch(Kernel&& kernel, int64_t block_dim, Args&&... args) {
  launch_cores(block_dim, [&] { kernel(args...); });
}

/** The calling core's index and the launch's core count (0 and 1 outside a launch). */
TBEX_ASCENDC_API int64_t core_idx();
TBEX_ASCENDC_API int64_t core_num();
/** Barrier over all cores of the current launch (no-op outside one). */
TBEX_ASCENDC_API void sync_all();

/** Zero-filled, 64-byte-aligned global memory (GmAlloc); nullptr for size 0. UserError E60020 when
 * the allocation fails. */
TBEX_ASCENDC_API void* gm_alloc(size_t bytes);
TBEX_ASCENDC_API void gm_free(void* p);

/** ICPU_SET_TILING_KEY: stored for the kernel to read back with tiling_key(). */
TBEX_ASCENDC_API void set_tiling_key(uint64_t key);
TBEX_ASCENDC_API uint64_t tiling_key();

}  // namespace tbex::ascendc

namespace AscendC {
inline void* GmAlloc(size_t size) { return ::tbex::ascendc::gm_alloc(size); }
inline void GmFree(void* p) { ::tbex::ascendc::gm_free(p); }
enum class KernelMode { MIX_MODE = 0, AIC_MODE, AIV_MODE };
/** Only the cube (AIC) instances run here: kernels that return on ASCEND_IS_AIV compute once. */
inline void SetKernelMode(KernelMode) {}
}  // namespace AscendC

/** Ascend's CPU debug-mode launch, unchanged call sites: ICPU_RUN_KF(kernel, blockDim, args...). */
#define ICPU_RUN_KF(func, blockdim, ...) ::tbex::ascendc::launch(func, blockdim, __VA_ARGS__)
#define ICPU_SET_TILING_KEY(key) ::tbex::ascendc::set_tiling_key(key)
