#pragma once
/** Ascend's CPU debug-mode header for host programs: ICPU_RUN_KF, GmAlloc, GmFree. */
#include "tbex/ascendc/launch.h"
