#pragma once
/** AMX tile state for this process. Linux keeps the 8 KB tile register state off until a process
 * asks for it (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); a tile instruction before
 * that faults with SIGILL. Kernels that use AMX tiles are chosen only where the request was
 * granted (the JIT asks when a schedule considers them; AOT wrappers ask before running one). */

namespace tbex {

/** Asks once per process; true when this process may run AMX tile instructions (false where the
 * kernel refuses, the CPU has no AMX, or the OS is not Linux). Thread-safe. */
bool amx_tiles_permitted();

}  // namespace tbex
