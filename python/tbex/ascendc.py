"""The Ascend C host tiling of Conv3DBackpropFilter / Conv3DBackpropInput for a problem.

The C++ side (kernel headers, launcher, ``tbex::ascendc``) is in the wheel's CMake package; this
module gives Python what a host program gets from ``Conv3dBpFilterTiling::GetTiling``: the tiling
struct as the kernel reads it (``data``, bytes) and its fields by name (``fields``)::

    t = tbex.ascendc.filter_tiling([64, 32, 3, 3, 3], [2, 32, 8, 28, 28], [2, 64, 8, 28, 28],
                                   pads=[1] * 6)
    t.fields["dwTiling"]["singleCoreHo"], len(t.data)   # Conv3DBackpropFilterTilingData

Shapes are NCDHW (weight: Cout, Cin, Kd, Kh, Kw). Invalid input raises tbex.UserError (param
"tiling") with the tiler's message.
"""
from dataclasses import dataclass
from typing import Dict, Sequence

from . import _C

__all__ = ["Tiling", "filter_tiling", "input_tiling"]


@dataclass(frozen=True)
class Tiling:
    #: the kernel struct's bytes (Conv3DBackpropFilterTilingData / Conv3DBackpropInputTilingData)
    data: bytes
    #: its fields by sub-struct name, CANN's spelling
    fields: Dict[str, Dict[str, int]]


def filter_tiling(weight_shape: Sequence[int], input_shape: Sequence[int],
                  grad_output_shape: Sequence[int], *, dtype: str = "float16",
                  strides=(1, 1, 1), pads=(0, 0, 0, 0, 0, 0), dilations=(1, 1, 1),
                  groups: int = 1) -> Tiling:
    """Conv3dBpFilterTiling for x / dy of `dtype` (float16 or bfloat16) and an fp32 dW."""
    data, fields = _C._ascendc_filter_tiling(weight_shape, input_shape, grad_output_shape, dtype,
                                             strides, pads, dilations, groups)
    return Tiling(data, fields)


def input_tiling(weight_shape: Sequence[int], input_shape: Sequence[int],
                 grad_output_shape: Sequence[int], *, dtype: str = "float16",
                 out_dtype: str = None, strides=(1, 1, 1), pads=(0, 0, 0, 0, 0, 0),
                 dilations=(1, 1, 1), groups: int = 1) -> Tiling:
    """Conv3DBpInputTiling for weight / dy of `dtype` and a dX of `out_dtype` (default: dtype)."""
    data, fields = _C._ascendc_input_tiling(weight_shape, input_shape, grad_output_shape, dtype,
                                            out_dtype or dtype, strides, pads, dilations, groups)
    return Tiling(data, fields)
