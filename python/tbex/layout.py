"""Converters between framework layouts and TBE's (docs/layouts.md).

* NCDHW <-> 6HD (NDC1HWC0): ``t6[n, d, c1, h, w, c0] = t[n, c1*16 + c0, d, h, w]``, padding
  lanes (``c1*16 + c0 >= C``) are zero.
* OIDHW ``[Cout, Cin/groups, Kd, Kh, Kw]`` <-> FRACTAL_Z_3D
  ``(real_g*Kd*cin1_g*Kh*Kw, cout_g/16, 16, 16)``, grouped packing with ``mag_factor`` included;
  padded and cross-group entries are zero.

The converters only move elements: any dtype with a 2- or 4-byte itemsize works (float16,
``ml_dtypes.bfloat16``, float32, ...). Each returns a new C-contiguous array of the input's dtype;
round trips are exact. Bad shapes or dtypes raise ``tbex`` user errors.
"""

import numpy as np

from ._C import layout as _l
from .errors import UserError

__all__ = [
    "empty",
    "shape_6hd",
    "shape_fz3d",
    "ncdhw_to_6hd",
    "ncdhw_from_6hd",
    "oidhw_to_fz3d",
    "oidhw_from_fz3d",
]


#: Bytes of a cache line: where ``empty`` starts an array's data.
LINE_BYTES = 64


def empty(shape, dtype="float32"):
    """A new uninitialized C-contiguous array whose data starts on a 64-byte cache line.

    numpy starts large arrays 16 bytes into a line as often as not; a kernel's 64-byte rows (16
    fp32 lanes) then each straddle two lines, which costs a store-bound kernel up to 1.5x
    (bench/RESULTS.md). tbex allocates the outputs it returns this way; pass such an array as
    ``out=`` to get the same. ``dtype``: a numpy dtype or name ("bfloat16" via ml_dtypes).
    """
    if isinstance(dtype, str) and dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    dt = np.dtype(dtype)
    shape = tuple(int(s) for s in (shape if np.iterable(shape) else (shape,)))
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(nbytes + LINE_BYTES, np.uint8)
    start = -raw.ctypes.data % LINE_BYTES
    return raw[start:start + nbytes].view(dt).reshape(shape)


def shape_6hd(ncdhw):
    """6HD shape ``(N, D, ceil(C/16), H, W, 16)`` of the NCDHW shape ``ncdhw`` (5 ints)."""
    return _l.shape_6hd(ncdhw)


def shape_fz3d(oidhw, groups=1):
    """FRACTAL_Z_3D shape ``(real_g*Kd*cin1_g*Kh*Kw, cout_g/16, 16, 16)`` of weights with shape
    ``oidhw = [Cout, Cin/groups, Kd, Kh, Kw]`` (group_dict derived from Cin, Cout, groups)."""
    return _l.shape_fz3d(oidhw, groups)


def ncdhw_to_6hd(a):
    """NCDHW array ``a`` -> new 6HD array ``(N, D, C1, H, W, 16)``; padding lanes are zero."""
    return _l.ncdhw_to_6hd(a)


def ncdhw_from_6hd(a6, c, hw=None):
    """6HD array ``a6`` -> new NCDHW array with ``c`` channels (``ceil(c/16)`` must equal C1);
    padding lanes are ignored. dX's output ``(N, D, C1, H*W, 16)`` is taken as it is, with
    ``hw=(H, W)``."""
    if getattr(a6, "ndim", None) == 5:
        if hw is None or len(hw) != 2:
            raise UserError("hw: dX's (N, D, C1, H*W, 16) output needs hw=(H, W), got "
                            f"{hw!r}", "E62501", "hw")
        h, w = (int(v) for v in hw)
        if h * w != a6.shape[3]:
            raise UserError(f"hw: {h} * {w} should be the output's H*W {a6.shape[3]}", "E60000", "hw")
        a6 = a6.reshape(tuple(a6.shape[:3]) + (h, w, a6.shape[4]))
    return _l.ncdhw_from_6hd(a6, c)


def oidhw_to_fz3d(w, groups=1):
    """OIDHW weights ``w`` ``[Cout, Cin/groups, Kd, Kh, Kw]`` -> new FRACTAL_Z_3D array
    ``(real_g*Kd*cin1_g*Kh*Kw, cout_g/16, 16, 16)``; padded / cross-group entries are zero."""
    return _l.oidhw_to_fz3d(w, groups)


def oidhw_from_fz3d(fz, oidhw_shape, groups=1):
    """FRACTAL_Z_3D array ``fz`` -> new OIDHW array of shape ``oidhw_shape`` (5 ints);
    ``fz.shape`` must equal ``shape_fz3d(oidhw_shape, groups)``, or be dW's output
    ``(real_g, Kd*cin1_g*Kh*Kw, cout_g, 16)`` (the same bytes, docs/layouts.md)."""
    want = tuple(shape_fz3d(oidhw_shape, groups))
    shape = tuple(getattr(fz, "shape", ()))
    if len(shape) == 4 and shape != want and shape[3] == 16 and shape[0] * shape[1] == want[0] \
            and shape[2] == want[1] * 16:
        fz = fz.reshape(want)
    return _l.oidhw_from_fz3d(fz, oidhw_shape, groups)
