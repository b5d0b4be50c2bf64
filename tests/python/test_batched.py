"""Operands past a kernel's 32-bit indexing run as one kernel per batch slice
(codegen/batched.cpp). TBEX_KERNEL_MAX_ELEMENTS lowers the limit so small problems take that
path: dX, dW (slices summed) and the forward conv (a transposed conv's grad_input) must match
the unsliced kernels. The real > 2^31-element run is `make test-large`."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

CODE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tbex
    rng = np.random.default_rng(0)
    out = {}
    for name, transposed in ((sys.argv[1], sys.argv[1] == "transposed"),):
        x = rng.standard_normal((6, 32, 5, 6, 7)).astype(np.float32)
        if transposed:
            w = rng.standard_normal((32, 8, 3, 3, 3)).astype(np.float32)
            gy = rng.standard_normal((6, 16, 9, 11, 13)).astype(np.float32)
            args = ([16], [2], [1], [1], True, [0], 2)
        else:
            w = rng.standard_normal((16, 16, 3, 3, 3)).astype(np.float32)
            gy = rng.standard_normal((6, 16, 3, 3, 4)).astype(np.float32)
            args = ([16], [2], [1], [1], False, [0], 2)
        gi, gw, gb = tbex.convolution_backward(gy, x, w, *args, [True, True, True])
        out[name] = [gi.tolist(), gw.tolist(), gb.tolist()]
    print(json.dumps(out))
""")


def _run(limit, case):
    env = dict(os.environ, TBEX_CACHE="0")
    if limit:
        env["TBEX_KERNEL_MAX_ELEMENTS"] = str(limit)
    r = subprocess.run([sys.executable, "-c", CODE, case], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.parametrize("case,limit", [("normal", 15000), ("transposed", 45000)])
def test_batch_slices_match_one_kernel(case, limit):
    # 6 samples; the limit leaves room for 2 of them per kernel (3 slices).
    whole, sliced = _run(None, case)[case], _run(limit, case)[case]
    for i, what in enumerate(("grad_input", "grad_weight", "grad_bias")):
        np.testing.assert_allclose(np.array(sliced[i]), np.array(whole[i]), rtol=1e-5, atol=1e-4,
                                   err_msg=f"{case} {what}")
