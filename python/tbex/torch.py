"""PyTorch drop-ins whose backward runs on tbex: ``Conv3d``, ``conv3d`` and ``Conv3dFunction``.

    import tbex.torch
    layer = tbex.torch.Conv3d(16, 32, 3, padding=1)   # a torch.nn.Conv3d in every other respect
    y = tbex.torch.conv3d(x, w, b, stride=2)          # like torch.nn.functional.conv3d

The forward is torch's own conv3d; the backward is one ``tbex.convolution_backward`` call that
computes only the gradients autograd asks for. Not imported by ``import tbex`` (torch is optional).

As ``torch.nn.Conv3d``: every ``padding_mode`` (non-zero modes pad with ``F.pad`` first, then
convolve without padding), unbatched ``(C, D, H, W)`` input, and gradients in the memory format
of their tensor (a ``channels_last_3d`` input gets a ``channels_last_3d`` grad_input). tbex
computes float32, float16 and bfloat16: other dtypes (float64, ...) raise ``TypeError`` in the
forward, naming tbex.torch (use ``torch.nn.Conv3d`` for them, e.g. for ``gradcheck``). A double
backward (``create_graph=True``) raises ``RuntimeError``: the backward is not differentiable.
"""
import torch
import torch.nn.functional as F

from . import convolution_backward

__all__ = ["Conv3dFunction", "Conv3d", "conv3d"]


def _triple(v, name):
    """An int or a 3-sequence of ints -> a tuple of 3 ints."""
    if isinstance(v, int):
        return (v,) * 3
    t = tuple(int(x) for x in v)
    if len(t) == 1:
        return t * 3
    if len(t) != 3:
        raise ValueError(f"tbex.torch.conv3d: {name} must be an int or 3 ints, got {v!r}")
    return t


class Conv3dFunction(torch.autograd.Function):
    """conv3d with symmetric zero padding: forward by torch, backward by tbex.

    ``Conv3dFunction.apply(input, weight, bias, stride, padding, dilation, groups)`` with
    ``stride``, ``padding``, ``dilation`` as tuples of 3 ints and ``bias`` a tensor or None.
    """

    @staticmethod
    def forward(ctx, input, weight, bias, stride, padding, dilation, groups):
        ctx.save_for_backward(input, weight)
        ctx.conv = (list(stride), list(padding), list(dilation), int(groups))
        ctx.bias_sizes = None if bias is None else list(bias.shape)
        return F.conv3d(input, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad_output):
        if torch.is_grad_enabled():
            raise RuntimeError("tbex.torch.conv3d: double backward (create_graph=True) is not "
                               "supported: tbex's backward is not differentiable; use "
                               "torch.nn.functional.conv3d for higher-order gradients")
        input, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.conv
        need = ctx.needs_input_grad
        mask = [need[0], need[1], ctx.bias_sizes is not None and need[2]]
        # saved leaves still require grad, and DLPack does not export such tensors
        grad_input, grad_weight, grad_bias = convolution_backward(
            grad_output.detach(), input.detach(), weight.detach(), ctx.bias_sizes, stride,
            padding, dilation, False, [0, 0, 0], groups, mask)
        return (_like(grad_input, input), _like(grad_weight, weight), grad_bias,
                None, None, None, None)


def _like(grad, t):
    """grad in t's memory format, as aten gives it (channels_last_3d stays channels_last_3d)."""
    if grad is None or t.is_contiguous() or not t.is_contiguous(memory_format=torch.channels_last_3d):
        return grad
    return grad.contiguous(memory_format=torch.channels_last_3d)


_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_dtypes(input, weight):
    for name, t in (("input", input), ("weight", weight)):
        if t.dtype not in _DTYPES:
            raise TypeError(f"tbex.torch.conv3d: {name} dtype {t.dtype} is not computed by tbex "
                            "(float32, float16 or bfloat16); use torch.nn.functional.conv3d / "
                            "torch.nn.Conv3d for it")


def _same_padding(weight, stride, dilation):
    """torch's padding='same': d*(k-1) in total per dim, the odd one on the far side.
    Returns (symmetric padding, extra F.pad for the far sides or None)."""
    if any(s != 1 for s in stride):
        raise ValueError("tbex.torch.conv3d: padding='same' is not supported for strided "
                         f"convolutions (stride={tuple(stride)})")
    total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    sym = tuple(t // 2 for t in total)
    odd = [t % 2 for t in total]
    extra = (0, odd[2], 0, odd[1], 0, odd[0]) if any(odd) else None  # F.pad: W, H, D
    return sym, extra


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.functional.conv3d`` with tbex computing the gradients. ``padding`` is an int,
    3 ints, ``'valid'`` or ``'same'``."""
    _check_dtypes(input, weight)
    if input.dim() == 4:  # unbatched (C, D, H, W), as torch accepts it
        out = conv3d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups)
        return out.squeeze(0)
    stride = _triple(stride, "stride")
    dilation = _triple(dilation, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0, 0)
        elif padding == "same":
            padding, extra = _same_padding(weight, stride, dilation)
            if extra is not None:
                input = F.pad(input, extra)
        else:
            raise ValueError("tbex.torch.conv3d: padding must be an int, 3 ints, 'valid' or "
                             f"'same', got {padding!r}")
    else:
        padding = _triple(padding, "padding")
    return Conv3dFunction.apply(input, weight, bias, stride, padding, dilation, int(groups))


class Conv3d(torch.nn.Conv3d):
    """``torch.nn.Conv3d`` (same constructor, parameters and state_dict) whose backward runs on
    tbex; every ``padding_mode``."""

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            # As torch.nn.Conv3d: pad with the mode first, then convolve without padding.
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv3d(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv3d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)
