"""Test helpers: data generation, layout conversions, torch float64 references, and the test data.

Everything here is written from the definitions in docs/ (layouts.md, group_dict.md),
independently of tbex:
- `np_*` layout conversions are plain numpy versions of the 6HD / FRACTAL_Z_3D formulas in
  docs/layouts.md, used to cross-check `tbex.layout` on every conversion the tests make;
- `ref_dw` / `ref_dx` are torch float64 gradients (the oracle);
- `check_dw` / `check_dx` compare tbex's raw outputs with a reference in NCDHW / OIDHW terms and
  assert that tbex's padding lanes and cross-group entries are exactly zero;
- `load_data` reads the TBE case files in tests/data/ (the repository's own copy).

Metric: rel_err(a, ref) = max|a - ref| / max|ref|. Tolerances (explicit):
- float32 outputs: rel_err <= FP32_TOL (1e-5);
- float16 outputs (dX with the default res_dtype): the reference is rounded to float16 and every
  element must lie within one float16 ulp at the reference's max magnitude. tbex accumulates in
  fp32 and rounds once, so its result can land on the neighbouring fp16 value of the exact one,
  and the gap between neighbours never exceeds the ulp at the largest magnitude.
"""
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Tuple

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F

C0 = 16
FP32_TOL = 1e-5

NP_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def load_data(name):
    """A JSON file of tests/data/ (e.g. "tbe_public_cases.json")."""
    return json.loads((DATA_DIR / name).read_text())


def ceil_div(a, b):
    return -(-a // b)


# ----------------------------------------------------------------------------------------------
# Data


def round_to(a64, dtype):
    """Values of a64 rounded to `dtype` (round-to-nearest-even), returned as float64."""
    return np.asarray(a64, dtype=np.float64).astype(NP_DTYPES[dtype]).astype(np.float64)


def to_dtype(a64, dtype):
    """a64 (already representable) as a numpy array of `dtype`."""
    out = np.asarray(a64, dtype=np.float64).astype(NP_DTYPES[dtype])
    assert np.array_equal(out.astype(np.float64), a64), "value not representable in " + dtype
    return out


def random_data(rng, shape, dtype):
    """Standard-normal data rounded to `dtype`, as float64 (the values the oracle sees)."""
    return round_to(rng.standard_normal(shape), dtype)


def int_data(rng, shape, lo=-4, hi=4):
    """Small integers: exact in fp16, bf16 and fp32, and every partial sum of products stays an
    integer below 2**24, so fp32 accumulation is exact in any order (one oracle serves all dtypes)."""
    return rng.integers(lo, hi + 1, size=shape).astype(np.float64)


# ----------------------------------------------------------------------------------------------
# Geometry


def out_size(n, k, s, p0, p1, d):
    """The output size rule (docs/validation.md): Do = (D + pf + pb - ((Kd-1)*dd + 1)) // sd + 1."""
    return (n + p0 + p1 - ((k - 1) * d + 1)) // s + 1


def group_dict(cin, cout, groups):
    """docs/group_dict.md's derivation, written independently of tbex."""
    cin_pg, cout_pg = cin // groups, cout // groups
    mag0 = math.lcm(cin_pg, C0) // cin_pg
    mag1 = math.lcm(cout_pg, C0) // cout_pg
    mag = min(math.lcm(mag0, mag1), groups)
    return {
        "real_g": ceil_div(groups, mag),
        "mag_factor": mag,
        "cin1_g": ceil_div(mag * cin_pg, C0),
        "cout_g": ceil_div(mag * cout_pg, C0) * C0,
        "cin_ori": cin,
        "cout_ori": cout,
    }


@dataclass
class Geometry:
    """A conv3d in NCDHW terms: x (N, Cin, D, H, W), weight (Cout, Cin/groups, Kd, Kh, Kw)."""
    n: int
    cin: int
    cout: int
    dhw: Tuple[int, int, int]
    kernel: Tuple[int, int, int]
    strides: Tuple[int, int, int] = (1, 1, 1)
    pads: Tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)
    dilations: Tuple[int, int, int] = (1, 1, 1)
    groups: int = 1
    name: str = ""

    @property
    def out_dhw(self):
        return tuple(out_size(self.dhw[i], self.kernel[i], self.strides[i], self.pads[2 * i],
                              self.pads[2 * i + 1], self.dilations[i]) for i in range(3))

    @property
    def x_shape(self):
        return (self.n, self.cin) + tuple(self.dhw)

    @property
    def dy_shape(self):
        return (self.n, self.cout) + self.out_dhw

    @property
    def w_shape(self):
        return (self.cout, self.cin // self.groups) + tuple(self.kernel)

    @property
    def gd(self):
        return group_dict(self.cin, self.cout, self.groups)

    # TBE DSL arguments --------------------------------------------------------------------
    def dw_filter_size(self):
        kd, kh, kw = self.kernel
        return [self.cout, kd, self.cin // self.groups, kh, kw]

    def dw_para(self, **extra):
        p = {"strides": list(self.strides), "pads": list(self.pads),
             "dilations": [1, self.dilations[0], 1, self.dilations[1], self.dilations[2]],
             "res_dtype": "float32", "kernel_name": "dw_" + (self.name or "case")}
        if self.groups != 1:  # groups == 1 exercises the default
            p["groups"] = self.groups
        p.update(extra)
        return {k: v for k, v in p.items() if v is not None}  # None removes a key

    def dx_filter_size(self):
        return list(self.w_shape)

    def dx_input_size(self):
        d, h, w = self.dhw
        return [self.n, d, h, w, self.cin]

    def dx_para(self, **extra):
        sd, sh, sw = self.strides
        dd, dh, dw = self.dilations
        p = {"strides": [1, sd, sh, sw, 1], "pads": list(self.pads),
             "dilations": [1, dd, dh, dw, 1], "kernel_name": "dx_" + (self.name or "case")}
        if self.groups != 1:
            p["groups"] = self.groups
        p.update(extra)
        return {k: v for k, v in p.items() if v is not None}  # None removes a key

    def dw_out_shape(self):
        g = self.gd
        kd, kh, kw = self.kernel
        return (g["real_g"], kd * g["cin1_g"] * kh * kw, g["cout_g"], C0)

    def dx_out_shape(self):
        d, h, w = self.dhw
        return (self.n, d, ceil_div(self.cin, C0), h * w, C0)

    def flops(self):
        return 2 * self.n * self.cout * math.prod(self.out_dhw) * (self.cin // self.groups) \
            * math.prod(self.kernel)


def geometry_from_case(case):
    """A Geometry from one entry of tbe_public_cases.json (NCDHW terms)."""
    n, cin, d, h, w = case["x_shape_ncdhw"]
    cout, _, kd, kh, kw = case["filter_ncdhw"]
    geo = Geometry(n=n, cin=cin, cout=cout, dhw=(d, h, w), kernel=(kd, kh, kw),
                   strides=tuple(case["strides_dhw"]), pads=tuple(case["pads"]),
                   dilations=tuple(case["dilations_dhw"]), groups=case["groups"],
                   name=case["case_name"])
    assert list(geo.w_shape) == case["filter_ncdhw"], case["case_name"]
    assert list(geo.dy_shape) == case["dedy_shape_ncdhw"], case["case_name"]
    return geo


# ----------------------------------------------------------------------------------------------
# Independent numpy layouts (docs/layouts.md)


def np_shape_6hd(ncdhw):
    n, c, d, h, w = ncdhw
    return (n, d, ceil_div(c, C0), h, w, C0)


def np_ncdhw_to_6hd(a):
    n, c, d, h, w = a.shape
    c1 = ceil_div(c, C0)
    padded = np.zeros((n, c1 * C0, d, h, w), dtype=a.dtype)
    padded[:, :c] = a
    # (n, c1, c0, d, h, w) -> (n, d, c1, h, w, c0)
    return np.ascontiguousarray(padded.reshape(n, c1, C0, d, h, w).transpose(0, 3, 1, 4, 5, 2))


def np_ncdhw_from_6hd(a6, c):
    n, d, c1, h, w, c0 = a6.shape
    assert c0 == C0 and c1 == ceil_div(c, C0)
    full = a6.transpose(0, 2, 5, 1, 3, 4).reshape(n, c1 * C0, d, h, w)
    return np.ascontiguousarray(full[:, :c])


def np_shape_fz3d(oidhw, groups=1):
    cout, cin_pg, kd, kh, kw = oidhw
    g = group_dict(cin_pg * groups, cout, groups)
    return (g["real_g"] * kd * g["cin1_g"] * kh * kw, g["cout_g"] // C0, C0, C0)


def _fz3d_blocks(oidhw, groups):
    """Yields (g, p_in slice, p_out slice, out-channel slice) for each original group."""
    cout, cin_pg, _, _, _ = oidhw
    cout_pg = cout // groups
    gd = group_dict(cin_pg * groups, cout, groups)
    mag = gd["mag_factor"]
    for gg in range(groups):
        g, e = divmod(gg, mag)
        yield (g, slice(e * cin_pg, (e + 1) * cin_pg), slice(e * cout_pg, (e + 1) * cout_pg),
               slice(gg * cout_pg, (gg + 1) * cout_pg))


def np_oidhw_to_fz3d(wt, groups=1):
    cout, cin_pg, kd, kh, kw = wt.shape
    gd = group_dict(cin_pg * groups, cout, groups)
    real_g, cin1_g, cout_g = gd["real_g"], gd["cin1_g"], gd["cout_g"]
    # logical (real_g, Kd, cin1_g*16, Kh, Kw, cout_g) with a flat in-channel axis
    z = np.zeros((real_g, kd, cin1_g * C0, kh, kw, cout_g), dtype=wt.dtype)
    for g, p_in, p_out, oc in _fz3d_blocks(wt.shape, groups):
        z[g, :, p_in, :, :, p_out] = wt[oc].transpose(2, 1, 3, 4, 0)
    z = z.reshape(real_g, kd, cin1_g, C0, kh, kw, cout_g).transpose(0, 1, 2, 4, 5, 6, 3)
    return np.ascontiguousarray(z).reshape(np_shape_fz3d(wt.shape, groups))


def np_oidhw_from_fz3d(fz, oidhw, groups=1):
    cout, cin_pg, kd, kh, kw = oidhw
    gd = group_dict(cin_pg * groups, cout, groups)
    real_g, cin1_g, cout_g = gd["real_g"], gd["cin1_g"], gd["cout_g"]
    z = fz.reshape(real_g, kd, cin1_g, kh, kw, cout_g, C0).transpose(0, 1, 2, 6, 3, 4, 5)
    z = z.reshape(real_g, kd, cin1_g * C0, kh, kw, cout_g)
    wt = np.zeros(tuple(oidhw), dtype=fz.dtype)
    for g, p_in, p_out, oc in _fz3d_blocks(oidhw, groups):
        wt[oc] = z[g, :, p_in, :, :, p_out].transpose(4, 1, 0, 2, 3)
    return wt


def fz3d_valid_mask(oidhw, groups=1):
    """True where a grouped FRACTAL_Z_3D entry holds a real weight (docs/layouts.md)."""
    return np_oidhw_to_fz3d(np.ones(tuple(oidhw), dtype=np.int8), groups) != 0


def lanes_valid_mask(ncdhw):
    """True where a 6HD entry holds a real channel."""
    return np_ncdhw_to_6hd(np.ones(tuple(ncdhw), dtype=np.int8)) != 0


# ----------------------------------------------------------------------------------------------
# tbex.layout, cross-checked against the numpy versions on every use


def to_6hd(a_np):
    """NCDHW numpy array (any dtype) -> 6HD via tbex.layout; asserts it matches numpy's."""
    from tbex import layout
    a6 = np.asarray(layout.ncdhw_to_6hd(a_np))
    expect = np_ncdhw_to_6hd(a_np)
    assert a6.shape == expect.shape and a6.dtype == expect.dtype, (a6.shape, a6.dtype)
    assert np.array_equal(a6.view(np.uint8), expect.view(np.uint8)), "tbex.layout.ncdhw_to_6hd"
    return a6


def to_fz3d(w_np, groups):
    from tbex import layout
    fz = np.asarray(layout.oidhw_to_fz3d(w_np, groups=groups))
    expect = np_oidhw_to_fz3d(w_np, groups)
    assert fz.shape == expect.shape and fz.dtype == expect.dtype, (fz.shape, fz.dtype)
    assert np.array_equal(fz.view(np.uint8), expect.view(np.uint8)), "tbex.layout.oidhw_to_fz3d"
    return fz


def from_fz3d(fz, oidhw, groups):
    from tbex import layout
    wt = np.asarray(layout.oidhw_from_fz3d(fz, tuple(oidhw), groups=groups))
    expect = np_oidhw_from_fz3d(fz, oidhw, groups)
    assert wt.shape == expect.shape, wt.shape
    assert np.array_equal(wt, expect, equal_nan=True), "tbex.layout.oidhw_from_fz3d"
    return wt


def from_6hd(a6, c):
    from tbex import layout
    a = np.asarray(layout.ncdhw_from_6hd(a6, c))
    expect = np_ncdhw_from_6hd(a6, c)
    assert a.shape == expect.shape, a.shape
    assert np.array_equal(a, expect, equal_nan=True), "tbex.layout.ncdhw_from_6hd"
    return a


# ----------------------------------------------------------------------------------------------
# torch float64 references


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def _torch_pad(pads):
    f, b, t, bo, l, r = pads
    return (l, r, t, bo, f, b)  # F.pad orders from the last dim


def ref_dw(x, dy, geo):
    """dW (Cout, Cin/groups, Kd, Kh, Kw) in float64. Asymmetric pads: pad x first, conv pad 0."""
    xp = F.pad(_t(x), _torch_pad(geo.pads))
    with torch.no_grad():
        w = torch.nn.grad.conv3d_weight(xp, geo.w_shape, _t(dy), stride=tuple(geo.strides),
                                        padding=0, dilation=tuple(geo.dilations),
                                        groups=geo.groups)
    return w.numpy()


def ref_dx(wt, dy, geo, bias=None):
    """dX (N, Cin, D, H, W) in float64: the gradient w.r.t. the *padded* input (exact for any
    padded size consistent with dy), cropped back to the unpadded volume; plus bias per channel."""
    n, cin, d, h, w = geo.x_shape
    f, b, t, bo, l, r = geo.pads
    padded = (n, cin, d + f + b, h + t + bo, w + l + r)
    with torch.no_grad():
        dxp = torch.nn.grad.conv3d_input(padded, _t(wt), _t(dy), stride=tuple(geo.strides),
                                         padding=0, dilation=tuple(geo.dilations),
                                         groups=geo.groups)
    out = dxp[:, :, f:f + d, t:t + h, l:l + w].numpy().copy()
    if bias is not None:
        out += np.asarray(bias, dtype=np.float64).reshape(1, cin, 1, 1, 1)
    return out


# ----------------------------------------------------------------------------------------------
# Comparisons


def rel_err(a, ref):
    """max|a - ref| / max|ref| (0/0 counts as 0; anything/0 as inf)."""
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert a.shape == ref.shape, (a.shape, ref.shape)
    diff = float(np.max(np.abs(a - ref))) if a.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


def fp16_ulp(m):
    """Spacing of float16 values at magnitude m."""
    return float(np.spacing(np.float16(min(max(abs(m), 2.0 ** -14), 65504.0))))


def assert_close_fp32(a, ref, what, tol=FP32_TOL):
    assert np.all(np.isfinite(a)), what + ": non-finite values"
    err = rel_err(a, ref)
    assert err <= tol, f"{what}: rel_err {err:.3g} > {tol:g}"
    return err


def assert_close_fp16(a, ref, what):
    """Within one fp16 ulp (at the max |ref|) of the fp16-rounded reference."""
    assert np.all(np.isfinite(np.asarray(a, dtype=np.float64))), what + ": non-finite values"
    ref16 = np.asarray(ref, dtype=np.float64).astype(np.float16).astype(np.float64)
    tol = fp16_ulp(float(np.max(np.abs(ref)))) if np.size(ref) else 0.0
    diff = float(np.max(np.abs(np.asarray(a, dtype=np.float64) - ref16))) if np.size(ref) else 0.0
    assert diff <= tol, f"{what}: max|out - fp16(ref)| = {diff:g} > 1 ulp = {tol:g}"
    return diff


def check_dw(raw, ref_w, geo, what="dW"):
    """raw: tbex dW output (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16) float32."""
    raw = np.asarray(raw)
    assert raw.shape == geo.dw_out_shape(), f"{what}: shape {raw.shape} != {geo.dw_out_shape()}"
    assert raw.dtype == np.float32, f"{what}: dtype {raw.dtype}"
    fz = raw.reshape(np_shape_fz3d(geo.w_shape, geo.groups))
    mask = fz3d_valid_mask(geo.w_shape, geo.groups)
    # nonzero (or NaN) entries outside the real weights; counted without copying the big part
    stray = np.count_nonzero(fz) - np.count_nonzero(fz[mask])
    assert stray == 0, f"{what}: {stray} padding/cross-group entries are not 0"
    got = from_fz3d(fz, geo.w_shape, geo.groups)
    return assert_close_fp32(got, ref_w, what)


def check_dx(raw, ref_x, geo, res_dtype, what="dX"):
    """raw: tbex dX output (N, D, C1, H*W, 16) of res_dtype."""
    raw = np.asarray(raw)
    assert raw.shape == geo.dx_out_shape(), f"{what}: shape {raw.shape} != {geo.dx_out_shape()}"
    assert raw.dtype == NP_DTYPES[res_dtype], f"{what}: dtype {raw.dtype} != {res_dtype}"
    n, d, c1, _, c0 = raw.shape
    a6 = raw.reshape(n, d, c1, geo.dhw[1], geo.dhw[2], c0)
    mask = lanes_valid_mask(geo.x_shape)
    stray = np.count_nonzero(a6) - np.count_nonzero(a6[mask])
    assert stray == 0, f"{what}: {stray} padding lanes are not 0"
    got = from_6hd(a6, geo.cin).astype(np.float64)
    if res_dtype == "float16":
        return assert_close_fp16(got, ref_x, what)
    return assert_close_fp32(got, ref_x, what)


# ----------------------------------------------------------------------------------------------
# Running tbex


def dw_tensors(geo, x64, dy64, dtype, para_extra=None):
    """(placeholders x and dy, the dW result tensor, the kernel's arguments: x and dy in 6HD)
    of tbex dW, as dx_tensors."""
    from tbex import dsl, tvm
    x6 = to_6hd(to_dtype(x64, dtype))
    dy6 = to_6hd(to_dtype(dy64, dtype))
    xp = tvm.placeholder(x6.shape, name="x", dtype=dtype)
    dyp = tvm.placeholder(dy6.shape, name="dy", dtype=dtype)
    res = dsl.conv3d_backprop_filter(xp, dyp, geo.dw_filter_size(), geo.dw_para(**(para_extra or {})))
    assert tuple(res.shape) == geo.dw_out_shape(), (tuple(res.shape), geo.dw_out_shape())
    assert str(res.dtype) == "float32", res.dtype
    return [xp, dyp], res, [x6, dy6]


def run_dw(geo, x64, dy64, dtype, schedule=None, para_extra=None, variant=""):
    """Builds and runs tbex dW for float64 data already representable in `dtype` (`variant`: a
    tile variant of the named `schedule`)."""
    from tbex import dsl
    tensors, res, args = dw_tensors(geo, x64, dy64, dtype, para_extra)
    sch = (dsl.auto_schedule(res) if schedule is None
           else dsl.auto_schedule(res, schedule=schedule, variant=variant))
    kernel = dsl.build(sch, {"name": "dw_" + (geo.name or "k"), "tensor_list": tensors + [res]})
    return kernel(*args)


def check_op(geo, op, dtype, rng, schedule=None, variant="", what=""):
    """Draws `dtype`-exact data with `rng`, runs tbex's `op` ("dW", or "dX" with an fp32 result)
    with `schedule` / `variant` (None: "auto") and checks it against the float64 oracle."""
    what = what or f"{geo.name} {op} {dtype} {schedule or 'auto'} [{variant}]"
    dy = random_data(rng, geo.dy_shape, dtype)
    if op == "dW":
        x = random_data(rng, geo.x_shape, dtype)
        raw = run_dw(geo, x, dy, dtype, schedule=schedule, variant=variant)
        return check_dw(raw, ref_dw(x, dy, geo), geo, what=what)
    w = random_data(rng, geo.w_shape, dtype)
    raw = run_dx(geo, w, dy, dtype, res_dtype="float32", schedule=schedule, variant=variant)
    return check_dx(raw, ref_dx(w, dy, geo), geo, "float32", what=what)


def dw_result(geo, para_extra=None, dtype="float32"):
    """The DSL result of tbex's dW for `geo` with `dtype` inputs (shapes only: nothing runs)."""
    return dw_tensors(geo, np.zeros(geo.x_shape), np.zeros(geo.dy_shape), dtype, para_extra)[1]


def dx_result(geo, para_extra=None, dtype="float32"):
    """The DSL result of tbex's dX (fp32 result) for `geo` with `dtype` inputs (shapes only)."""
    extra = dict(para_extra or {}, res_dtype="float32")
    return dx_tensors(geo, np.zeros(geo.w_shape), np.zeros(geo.dy_shape), dtype, extra)[1]


def candidates(geo, op, schedule, para_extra=None, dtype="float32"):
    """The tile variants of `op`'s (dW or dX) `schedule` the tuner would time for `geo` ("" first)."""
    from tbex import dsl
    res = dw_result(geo, para_extra, dtype) if op == "dW" else dx_result(geo, para_extra, dtype)
    return dsl.auto_schedule(res).candidates(schedule)


def ranked_schedules(geo, op, para_extra=None, dtype="float32"):
    """The cost model's ranking (Schedule.rank()) of tbex's dW or dX (fp32 result) for `geo`
    with `dtype` inputs: every schedule and tile variant "auto" may pick, best first."""
    from tbex import dsl
    res = dw_result(geo, para_extra, dtype) if op == "dW" else dx_result(geo, para_extra, dtype)
    return dsl.auto_schedule(res).rank()


def dx_tensors(geo, w64, dy64, dtype, extra, bias=None, bias_dtype="float32"):
    """(placeholders, the dX result tensor, the kernel's arguments) of tbex dX: the filter in
    FRACTAL_Z_3D and dy in 6HD, plus a bias of `bias_dtype` when `bias` is given; `extra`: the
    para_dict's other entries."""
    from tbex import dsl, tvm
    fz = to_fz3d(to_dtype(w64, dtype), geo.groups)
    dy6 = to_6hd(to_dtype(dy64, dtype))
    fp = tvm.placeholder(fz.shape, name="filter", dtype=dtype)
    dyp = tvm.placeholder(dy6.shape, name="dy", dtype=dtype)
    extra = dict(extra)
    args, tensors = [fz, dy6], [fp, dyp]
    if bias is not None:
        bp = tvm.placeholder((geo.cin,), name="bias", dtype=bias_dtype)
        extra["tensor_bias"] = bp
        args.append(to_dtype(bias, bias_dtype))
        tensors.append(bp)
    res = dsl.conv3d_backprop_input(fp, dyp, geo.dx_filter_size(), geo.dx_input_size(),
                                    geo.dx_para(**extra))
    return tensors, res, args


def run_dx(geo, w64, dy64, dtype, res_dtype=None, schedule=None, bias=None, bias_dtype="float32",
           para_extra=None, variant=""):
    """Builds and runs tbex dX. res_dtype None means: leave it out (default float16); `variant`:
    a tile variant of the named `schedule`."""
    from tbex import dsl
    extra = dict(para_extra or {})
    if res_dtype is not None:
        extra["res_dtype"] = res_dtype
    tensors, res, args = dx_tensors(geo, w64, dy64, dtype, extra, bias, bias_dtype)
    expect_dtype = res_dtype or "float16"
    assert tuple(res.shape) == geo.dx_out_shape(), (tuple(res.shape), geo.dx_out_shape())
    assert str(res.dtype) == expect_dtype, res.dtype
    sch = (dsl.auto_schedule(res) if schedule is None
           else dsl.auto_schedule(res, schedule=schedule, variant=variant))
    kernel = dsl.build(sch, {"name": "dx_" + (geo.name or "k"), "tensor_list": tensors + [res]})
    return kernel(*args)
