#pragma once
/** Umbrella header of tbex's C++ API. */
#include "tbex/dtype.h"
#include "tbex/errors.h"
#include "tbex/group_dict.h"
#include "tbex/kernel.h"
#include "tbex/layout.h"
#include "tbex/problem.h"
#include "tbex/tune.h"
