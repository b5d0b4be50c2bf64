"""``tvm.placeholder``: the symbolic tensors TBE DSL calls take."""
from __future__ import annotations

from . import _C
from .errors import UserError

DTYPES = ("float16", "bfloat16", "float32")


class Tensor:
    """A symbolic tensor: a placeholder, or the lazy result of a DSL op."""

    def __init__(self, shape, dtype, name, op="placeholder", inputs=(), problem=None):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.name = name
        self.op = op
        self.inputs = tuple(inputs)
        self.problem = problem

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Tensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype!r}, op={self.op!r})"


def normalize_dtype(dtype, param="dtype", code="E60000") -> str:
    """The dtype's name (aliases fp16, half, bf16, fp32, float accepted); UserError(code) for any
    other dtype."""
    name = getattr(dtype, "name", None) or str(dtype)
    name = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32",
            "float": "float32"}.get(name, name)
    if name not in DTYPES:
        raise UserError(f"{param}: dtype {dtype!r} should be one of {', '.join(DTYPES)}", code, param)
    return name


def placeholder(shape, name="placeholder", dtype="float32") -> Tensor:
    """A named input of the given shape and dtype ("float16", "bfloat16" or "float32")."""
    if not isinstance(name, str):
        raise UserError(f"name: expected a string, got {name!r}", "E62002", "name")
    return Tensor(_C.to_ints(shape, name), normalize_dtype(dtype, name), name)
