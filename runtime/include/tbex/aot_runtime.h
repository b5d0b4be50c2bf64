#ifndef TBEX_AOT_RUNTIME_H
#define TBEX_AOT_RUNTIME_H
/* C ABI of libtbex_aot_runtime: runs the parallel loops of AOT kernels on tbex's thread pool,
 * their buffers from tbex's scratch cache.
 * Kernel wrappers call tbex_aot_init() on every call (cheap after the first), so a program never
 * has to; the thread count follows TBEX_NUM_THREADS, tbex::set_num_threads or the setter here. */
#ifdef __cplusplus
extern "C" {
#endif

/* Installs tbex's pool as the Halide runtime's do_par_for handler, and tbex's scratch cache
 * (tbex/scratch.h: large blocks kept for the next call) as its malloc and free (once). A block
 * the runtime's previous allocator made goes back to that allocator. */
void tbex_aot_init(void);
/* Worker threads of AOT kernels (0 = all cores); the same pool as tbex::set_num_threads. */
void tbex_aot_set_num_threads(int n);
int tbex_aot_num_threads(void);
/* 1 when this process may run AMX tile instructions (asked of the OS once: tbex/amx.h), else 0.
 * Wrappers of kernels that multiply AMX tiles call it before the kernel. */
int tbex_aot_amx_tiles(void);

#ifdef __cplusplus
}
#endif
#endif
