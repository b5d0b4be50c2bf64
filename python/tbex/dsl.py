"""The TBE DSL calls: ``conv3d_backprop_filter``, ``conv3d_backprop_input``, ``auto_schedule``,
``build``.

Op calls validate at once (a bad call raises :class:`tbex.UserError` with TBE's code) and return
a lazy :class:`tbex.tvm.Tensor` of TBE's output shape and dtype. Passed arrays instead of
placeholders, they compute at once and return an array (the eager form).
"""
from __future__ import annotations

import os

import numpy as np

from . import _C, layout
from .errors import UserError
from .tvm import Tensor, normalize_dtype

__all__ = ["conv3d_backprop_filter", "conv3d_backprop_input", "auto_schedule", "build", "Schedule", "Kernel"]


def _is_data(t) -> bool:
    return isinstance(t, np.ndarray) or hasattr(t, "__dlpack__")


def _spec(t, param):
    """(shape, dtype) of a placeholder, numpy array or DLPack tensor."""
    if isinstance(t, Tensor):
        return t.shape, t.dtype
    if _is_data(t):
        dtype = str(getattr(t, "dtype", ""))
        dtype = dtype.replace("torch.", "")
        return tuple(int(s) for s in t.shape), normalize_dtype(dtype, param)
    raise UserError(f"{param}: expected a tvm.placeholder, a numpy array or a DLPack tensor, "
                    f"got {type(t).__name__}", "E62002", param)


def _para_dict(para_dict) -> dict:
    """A copy of the caller's para_dict (None: no keys); anything but a dict is refused."""
    if para_dict is None:
        return {}
    if not isinstance(para_dict, dict):
        raise UserError(f"para_dict: [para_dict] type error: expected a dict, got {para_dict!r:.80}",
                        "E62002", "para_dict")
    return dict(para_dict)


def _result(problem, inputs, name, op) -> Tensor:
    return Tensor(problem.output_shape, problem.res_dtype, name, op=op, inputs=inputs, problem=problem)


def _eager(problem, inputs):
    kernel = _C.compile(problem)
    out = layout.empty(problem.output_shape, problem.res_dtype)
    kernel.run(list(inputs), out)
    return out


def conv3d_backprop_filter(x, out_backprop, filter_size, para_dict):
    """dW of a 3D convolution (docs/layouts.md: "What dW and dX compute").

    ``x`` and ``out_backprop`` are 6HD ``(N, D, C1, H, W, 16)``; ``filter_size`` is
    ``[Cout, Kd, Cin/groups, Kh, Kw]``; ``para_dict`` holds ``strides`` (D, H, W), ``pads`` (6),
    ``dilations`` (N, D, C, H, W), ``res_dtype``, ``kernel_name`` and optionally ``group_dict``
    (or ``groups``). The result is grouped FRACTAL_Z_3D ``(real_g, Kd*cin1_g*Kh*Kw, cout_g, 16)``
    float32.
    """
    para_dict = _para_dict(para_dict)
    x_shape, x_dtype = _spec(x, "x")
    dy_shape, dy_dtype = _spec(out_backprop, "out_backprop")
    problem = _C.make_filter_problem(list(x_shape), x_dtype, list(dy_shape), dy_dtype,
                                     filter_size, para_dict)
    inputs = (x, out_backprop)
    if any(_is_data(t) for t in inputs):
        return _eager(problem, inputs)
    return _result(problem, inputs, para_dict.get("kernel_name") or "dedw", "conv3d_backprop_filter")


def conv3d_backprop_input(filter, out_backprop, filter_size, input_size, para_dict):
    """dX of a 3D convolution, the transposed convolution (docs/layouts.md).

    ``filter`` is FRACTAL_Z_3D, ``out_backprop`` 6HD; ``filter_size`` is
    ``[Cout, Cin/groups, Kd, Kh, Kw]``, ``input_size`` ``[N, D, H, W, Cin]``; ``para_dict`` holds
    ``strides`` and ``dilations`` (N, D, H, W, C), ``pads`` (6), ``res_dtype`` (default float16),
    ``kernel_name``, optional ``group_dict`` / ``groups`` and ``tensor_bias`` (Cin values added
    to the result). The result is ``(N, D, C1, H*W, 16)``.
    """
    para_dict = _para_dict(para_dict)
    bias = para_dict.pop("tensor_bias", None)
    f_shape, f_dtype = _spec(filter, "filter")
    dy_shape, dy_dtype = _spec(out_backprop, "out_backprop")
    bias_shape, bias_dtype = ([], "float32") if bias is None else _spec(bias, "tensor_bias")
    problem = _C.make_input_problem(list(f_shape), f_dtype, list(dy_shape), dy_dtype, filter_size,
                                    input_size, para_dict, list(bias_shape), bias_dtype)
    inputs = (filter, out_backprop) + (() if bias is None else (bias,))
    if any(_is_data(t) for t in inputs):
        return _eager(problem, inputs)
    return _result(problem, inputs, para_dict.get("kernel_name") or "dedx", "conv3d_backprop_input")


class Schedule:
    """The schedule choice for one DSL result: ``"auto"`` or a registry name, with a tile
    ``variant`` of it (``""``: the schedule's own). ``tuning`` holds the measured tuning's result
    (``dsl.auto_schedule(res, tune=True)``), else None."""

    def __init__(self, res: Tensor, schedule: str = "auto", variant: str = "", tuning=None):
        self.res = res
        self.schedule = schedule
        self.variant = variant
        self.tuning = tuning

    def candidates(self, schedule: str):
        """Tile variants of ``schedule`` worth timing for this problem (``""`` first)."""
        return _C.schedule_candidates(self.res.problem, schedule)

    def explain(self):
        """[(schedule name, "" if it applies else why not)] in registry order; the cost model
        ranks them (``rank()``)."""
        return self.res.problem.explain_schedules()

    def rank(self):
        """The cost model's ranking of every schedule and tile variant ``"auto"`` may pick, best
        first: [{"schedule", "variant", "predicted_ms", "detail"}]. No compilation."""
        return _C.rank_schedules(self.res.problem)


def auto_schedule(res, schedule: str = "auto", tune: bool = False, variant: str = "",
                  max_candidates: int = 8, seconds: float = 0.25) -> Schedule:
    """Schedules a DSL result (``res`` or ``[res]``).

    ``"auto"`` uses the tuning database's entry for the problem when there is one (see
    ``tbex.knobs``: TBEX_TUNING_DB, TBEX_TUNE), else the schedule and tile variant the analytic
    cost model ranks first (``Schedule.rank()`` lists the ranking).
    ``tune=True`` times the applicable schedules and tile variants now, in the cost model's order
    (up to ``max_candidates`` variants per schedule, about ``seconds`` each), stores the fastest in
    the tuning database
    and schedules with it; ``schedule.tuning`` holds every candidate's time. ``variant`` picks a
    tile variant of a named schedule (``Schedule.candidates`` lists them)."""
    if isinstance(res, (list, tuple)):
        if len(res) != 1:
            raise UserError(f"res: expected one output tensor, got {len(res)}", "E62501", "res")
        res = res[0]
    if not isinstance(res, Tensor) or res.problem is None:
        raise UserError("res: expected the result of a dsl op", "E62002", "res")
    known = _C.schedule_names(res.op)
    if schedule != "auto" and schedule not in known:
        raise UserError(f"schedule: unknown schedule {schedule!r} for {res.op} "
                        f"(known: auto, {', '.join(known)})", "E60000", "schedule")
    if tune:
        if schedule != "auto" or variant:
            raise UserError("tune: tuning chooses the schedule; pass schedule='auto' and no variant",
                            "E60000", "tune")
        result = _C.tune(res.problem, int(max_candidates), float(seconds))
        return Schedule(res, result["schedule"], result["variant"], result)
    return Schedule(res, schedule, variant)


class Kernel:
    """A compiled kernel. Call it with the input arrays in ``tensor_list`` order (numpy arrays,
    ``ml_dtypes.bfloat16`` arrays, uint16 bits for 16-bit floats, or DLPack tensors); it returns
    the output, or writes into ``out=`` without copying."""

    def __init__(self, name, native, res: Tensor, input_order):
        self.name = name
        self._native = native
        self.res = res
        self._order = input_order  # position in the call -> position in the problem's inputs

    @property
    def problem(self):
        return self._native.problem

    @property
    def schedule(self) -> str:
        return self._native.schedule

    @property
    def variant(self) -> str:
        """The tile variant compiled (``""``: the schedule's own choice)."""
        return self._native.variant

    def __call__(self, *arrays, out=None):
        if len(arrays) != len(self._order):
            raise UserError(f"{self.name}: expected {len(self._order)} input arrays, got {len(arrays)}",
                            "E62501", "inputs")
        inputs = [None] * len(arrays)
        for call_pos, prob_pos in enumerate(self._order):
            inputs[prob_pos] = arrays[call_pos]
        if out is None:
            out = layout.empty(self.res.shape, self.res.dtype)
        self._native.run(inputs, out)
        return out


def build(sch: Schedule, config: dict) -> Kernel:
    """Compiles a schedule. ``config["tensor_list"]`` lists the inputs (and the output) in the
    order the kernel takes them; ``config["name"]`` names the kernel.

    With ``config["output_dir"]`` it also writes the kernel ahead of time, as TBE writes
    ``kernel_meta``: ``<output_dir>/kernel_meta/NAME.a``, ``NAME.h``, ``NAME.manifest.json``
    (``config["aot_emit"]``, default static_library + header; ``config["target"]``, default
    host) and the shared Halide runtime ``tbex_halide_runtime.a`` when it is missing. NAME is
    the kernel's name (``config["name"]``, else para_dict's ``kernel_name``). The AOT kernel
    takes the operands in the op's order (see NAME.h), not tensor_list's. The written paths
    are ``kernel.aot_files``."""
    if not isinstance(sch, Schedule):
        raise UserError("sch: expected the result of dsl.auto_schedule", "E62002", "sch")
    config = dict(config or {})
    res = sch.res
    tensors = list(config.get("tensor_list") or list(res.inputs) + [res])
    inputs = [t for t in tensors if t is not res]
    order = []
    for t in inputs:
        pos = [i for i, r in enumerate(res.inputs) if r is t]
        if not pos:
            raise UserError(f"tensor_list: {getattr(t, 'name', t)!r} is not an input of {res.name}",
                            "E60000", "tensor_list")
        order.append(pos[0])
    if sorted(order) != list(range(len(res.inputs))):
        names = [r.name for r in res.inputs]
        raise UserError(f"tensor_list must hold each input of {res.name} once: {names}", "E60000", "tensor_list")
    native = _C.compile(res.problem, sch.schedule, sch.variant)
    name = config.get("name") or res.name
    kernel = Kernel(name, native, res, order)
    kernel.aot_files = []
    if config.get("output_dir"):
        kernel.aot_files = _build_aot(res.problem, name, sch, config)
    return kernel


def _build_aot(problem, name, sch, config) -> list:
    from . import aot
    out_dir = os.path.join(os.fspath(config["output_dir"]), "kernel_meta")
    target = config.get("target", "host")
    # The schedule's own request (a tuned schedule + variant, or "auto"), decided as the JIT
    # kernel's was: the AOT kernel is the one the JIT runs.
    files = aot.emit(problem, name, out_dir, config.get("aot_emit", aot.DEFAULT_EMIT), target,
                     sch.schedule, sch.variant)
    runtime = "tbex_halide_runtime"
    if not os.path.exists(os.path.join(out_dir, runtime + ".a")):
        files += aot.emit_runtime(runtime, out_dir, target)
    return files
