"""``tbex.convolution_backward``: PyTorch's ``aten.convolution_backward`` on tbex's kernels.

Same arguments, same results: 1D / 2D / 3D convolutions (NCL / NCHW / NCDHW, by the rank of
``input``), groups, strides, dilations, transposed convolutions with ``output_padding``, and
an ``output_mask`` that computes only what is asked. numpy arrays in give numpy arrays out;
DLPack tensors (torch) in give tensors of the same library out. The native half is the same
engine as the ``aclnnConvolutionBackward`` C API.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import _C, layout
from .errors import UserError
from .tvm import normalize_dtype

__all__ = ["convolution_backward"]


# Framework callers get aclnn's status codes (the C API returns the same numbers).
_NULLPTR, _INVALID = "161001", "161002"


def _dtype_name(t, param: str) -> str:
    dtype = str(getattr(t, "dtype", "")).replace("torch.", "")
    return normalize_dtype(dtype, param, code=_INVALID)


def _is_torch(t) -> bool:
    return type(t).__module__.startswith("torch")


def _check_data(t, param: str):
    if t is None:
        raise UserError(f"{param}: a tensor is required, got None", _NULLPTR, param)
    if isinstance(t, np.ndarray) or hasattr(t, "__dlpack__"):
        return
    raise UserError(f"{param}: expected a numpy array or a DLPack tensor, got {type(t).__name__}",
                    _INVALID, param)


def _empty_like_kind(ref, shape, dtype: str):
    if _is_torch(ref):
        import torch
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype))
    return layout.empty(shape, dtype)


def convolution_backward(grad_output, input, weight, bias_sizes: Optional[Sequence[int]],
                         stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                         transposed: bool, output_padding: Sequence[int], groups: int,
                         output_mask: Sequence[bool], *, cube_math_type: int = 0):
    """Gradients of a convolution, as ``torch.ops.aten.convolution_backward``.

    Returns ``(grad_input, grad_weight, grad_bias)``, with ``None`` where ``output_mask`` is
    false. Dtypes: float32, float16, bfloat16; ``grad_input`` takes the wider of ``input``'s and
    ``grad_output``'s dtypes (fp16 with bf16 gives float32), ``grad_weight`` the wider of
    ``weight``'s and ``grad_output``'s, ``grad_bias`` ``grad_output``'s. Accumulation is fp32.
    ``cube_math_type`` is aclnn's (0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION: both compute from
    the given values; 2 USE_FP16: inputs rounded to fp16 first; 3 USE_HF32: fp32 inputs rounded
    to HF32 first). ``padding`` may also give (head, tail) per dim: 4 values in 2D
    (top, bottom, left, right) as aclnn, 6 in 3D and 2 in 1D (tbex extensions); as in torch,
    a one-value ``stride`` / ``padding`` / ``dilation`` / ``output_padding`` applies to every
    spatial dim. Unlike torch (and as aclnn), ``output_padding`` must be below ``stride``.
    """
    for t, name in ((grad_output, "grad_output"), (input, "input"), (weight, "weight")):
        _check_data(t, name)
    # DLPack refuses tensors that require grad; they are only read here.
    grad_output, input, weight = (t.detach() if getattr(t, "requires_grad", False) else t
                                  for t in (grad_output, input, weight))
    # Every other argument is converted strictly in C++ (no float, string or None where an int
    # or a bool is due; torch's one-value window lists widened there).
    args = (
        tuple(int(s) for s in grad_output.shape), _dtype_name(grad_output, "grad_output"),
        tuple(int(s) for s in input.shape), _dtype_name(input, "input"),
        tuple(int(s) for s in weight.shape), _dtype_name(weight, "weight"),
        bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask,
        cube_math_type,
    )
    # Plans are cached in C++ (keyed with the thread count; TBEX_KERNEL_CACHE_CAPACITY).
    plan = _C.conv_backward_plan(*args)
    outs = []
    for i in range(3):
        if plan.output_mask[i]:
            shape, dtype = plan.output_spec(i)
            outs.append(_empty_like_kind(input, shape, dtype))
        else:
            outs.append(None)
    plan.run(grad_output, input, weight, *outs)
    return tuple(outs)
