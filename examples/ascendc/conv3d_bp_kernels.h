#pragma once
// The two example kernels, one entry point per element type (an Ascend C kernel is compiled per
// dtype). Arguments as in CANN's operators: inputs, output, workspace, tiling.
#include "kernel_operator.h"

extern "C" __global__ __aicore__ void conv3d_bp_filter_half(GM_ADDR x, GM_ADDR dy, GM_ADDR dw,
                                                            GM_ADDR workspace, GM_ADDR tiling);
extern "C" __global__ __aicore__ void conv3d_bp_filter_bf16(GM_ADDR x, GM_ADDR dy, GM_ADDR dw,
                                                            GM_ADDR workspace, GM_ADDR tiling);
extern "C" __global__ __aicore__ void conv3d_bp_input_half(GM_ADDR w, GM_ADDR dy, GM_ADDR dx,
                                                           GM_ADDR workspace, GM_ADDR tiling);
extern "C" __global__ __aicore__ void conv3d_bp_input_bf16(GM_ADDR w, GM_ADDR dy, GM_ADDR dx,
                                                           GM_ADDR workspace, GM_ADDR tiling);
