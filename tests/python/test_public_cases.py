"""Every geometry of tests/data/tbe_public_cases.json, in both directions.

For each case:
- dW in the dtype the case names, and in float32 (res_dtype float32);
- dX in the case's dtype and in float32 with res_dtype float32, plus once in the case's dtype with
  the default res_dtype (float16).
Data are small integers (exact in fp16/bf16/fp32, fp32 accumulation exact), so one float64 torch
oracle per geometry serves every dtype. Nothing is skipped: the huge-kernel case
`conv3d_dilation_kernel2_test` (pads larger than the kernel, H-stride 4, W-stride 52) is computed.
"""
import functools
import zlib

import numpy as np
import pytest

import oracle as O

CASES = O.load_data("tbe_public_cases.json")


def _key(geo):
    return (geo.n, geo.cin, geo.cout, geo.dhw, geo.kernel, geo.strides, geo.pads, geo.dilations,
            geo.groups)


@functools.lru_cache(maxsize=4)
def _data(key):
    """x, dy, w for a geometry; seeded by the geometry so cases sharing it share data."""
    geo = O.Geometry(*key[:5], strides=key[5], pads=key[6], dilations=key[7], groups=key[8])
    rng = np.random.default_rng(zlib.crc32(repr(key).encode()))
    return (O.int_data(rng, geo.x_shape), O.int_data(rng, geo.dy_shape),
            O.int_data(rng, geo.w_shape))


@functools.lru_cache(maxsize=4)
def _ref(key, op):
    geo = O.Geometry(*key[:5], strides=key[5], pads=key[6], dilations=key[7], groups=key[8])
    x, dy, w = _data(key)
    return O.ref_dw(x, dy, geo) if op == "dW" else O.ref_dx(w, dy, geo)


def _params():
    out = []
    for case in CASES:
        assert case["expect"] == "success"
        dt = case["dtype"]
        dtypes = [dt] if dt == "float32" else [dt, "float32"]
        primary = "dW" if "Filter" in case["op"] else "dX"
        runs = []
        for d in dtypes:
            runs.append(("dW", d, "float32"))
        for d in dtypes:
            runs.append(("dX", d, "float32"))
        runs.append(("dX", dt, None))  # default res_dtype: float16
        # the op the case names first
        runs.sort(key=lambda r: r[0] != primary)
        for op, d, res in runs:
            out.append(pytest.param(case, op, d, res,
                                    id=f"{case['case_name']}-{op}-{d}-res_{res or 'default'}"))
    return out


def test_case_file_is_complete():
    assert len(CASES) == 23
    names = [c["case_name"] for c in CASES]
    assert len(set(names)) == len(names)
    assert "conv3d_dilation_kernel2_test" in names


@pytest.mark.parametrize("case,op,dtype,res_dtype", _params())
def test_public_case(case, op, dtype, res_dtype):
    geo = O.geometry_from_case(case)
    key = _key(geo)
    x, dy, w = _data(key)
    ref = _ref(key, op)
    if op == "dW":
        raw = O.run_dw(geo, x, dy, dtype)
        O.check_dw(raw, ref, geo, what=f"{case['case_name']} dW {dtype}")
    else:
        raw = O.run_dx(geo, w, dy, dtype, res_dtype=res_dtype)
        O.check_dx(raw, ref, geo, res_dtype or "float16",
                   what=f"{case['case_name']} dX {dtype}->{res_dtype or 'float16'}")


@pytest.mark.parametrize("case", CASES, ids=[c["case_name"] for c in CASES])
@pytest.mark.parametrize("op", ["dW", "dX"])
def test_every_schedule_auto_may_pick(case, op):
    """The cost model ranks each case without failing, and every schedule it may pick (each with
    its own tiles; the reference is the oracle's own method) matches the float64 oracle."""
    geo = O.geometry_from_case(case)
    key = _key(geo)
    x, dy, w = _data(key)
    ranked = O.ranked_schedules(geo, op)
    assert ranked and ranked[-1]["schedule"] == "reference"
    assert all(r["predicted_ms"] > 0 for r in ranked)
    ref = _ref(key, op)
    for name in dict.fromkeys(r["schedule"] for r in ranked if r["schedule"] != "reference"):
        what = f"{case['case_name']} {op} f32 {name}"
        if op == "dW":
            O.check_dw(O.run_dw(geo, x, dy, "float32", schedule=name), ref, geo, what=what)
        else:
            O.check_dx(O.run_dx(geo, w, dy, "float32", res_dtype="float32", schedule=name), ref,
                       geo, "float32", what=what)
