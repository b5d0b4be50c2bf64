"""dx_amx_cols (bf16 dX of few input channels on AMX tiles of (kw, channel) columns) through the
DSL: the results Halide finishes from the kernel's fp32 sums (a bias added, fp16 cast) as well
as the one the kernel writes itself (fp32, no bias), against the float64 oracle. Runs where the
host has AMX-BF16 (skipped with the reason elsewhere; tests/cpp/test_amx.cpp runs the kernel on
emulated tile registers on every machine)."""
import numpy as np
import pytest

import oracle as O

# The stem's shape, small: 3 channels, 3 x 5 x 7 taps, stride 2 along h and w.
STEM = O.Geometry(2, 3, 32, (4, 10, 23), (3, 5, 7), strides=(1, 2, 2), pads=(1, 1, 2, 2, 3, 3),
                  name="stem")


def _skip_unless_ranked(geo):
    names = {r["schedule"] for r in O.ranked_schedules(geo, "dX", dtype="bfloat16")}
    if "dx_amx_cols" not in names:
        pytest.skip("dx_amx_cols does not apply here (no AMX-BF16 on this host): ranked " +
                    ", ".join(sorted(names)))


@pytest.mark.parametrize("res_dtype,bias_dtype", [("float32", None), ("float32", "float32"),
                                                  ("float16", None), ("float16", "bfloat16")])
def test_dx_amx_cols_results(res_dtype, bias_dtype):
    _skip_unless_ranked(STEM)
    rng = np.random.default_rng(71)
    w = O.random_data(rng, STEM.w_shape, "bfloat16")
    dy = O.random_data(rng, STEM.dy_shape, "bfloat16")
    bias = O.random_data(rng, (STEM.cin,), bias_dtype) if bias_dtype else None
    raw = O.run_dx(STEM, w, dy, "bfloat16", res_dtype=res_dtype, schedule="dx_amx_cols", bias=bias,
                   bias_dtype=bias_dtype or "float32")
    O.check_dx(raw, O.ref_dx(w, dy, STEM, bias=bias), STEM, res_dtype,
               what="stem dX dx_amx_cols %s bias %s" % (res_dtype, bias_dtype))
