#include "tbex/amx.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tbex {

bool amx_tiles_permitted() {
#if defined(__linux__) && defined(__x86_64__)
  // asm/prctl.h's ARCH_REQ_XCOMP_PERM and the XTILEDATA state component (bit 18 of XCR0); the
  // header is not on every build machine, the numbers are Linux ABI.
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  // The grant is per process and every thread created later inherits it; a static makes the
  // request once (a second request would also succeed).
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
#else
  return false;
#endif
}

}  // namespace tbex
