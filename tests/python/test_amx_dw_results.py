"""dw_amx_blocked (bf16 dW on AMX tiles in 2 x 2 blocks, tbex's own kernel) through the DSL:
every tile variant it offers (the reduction cut into parts over batch or depth, each summed by
its own kernel calls and then added in order) against the float64 oracle, at 1 and 2 threads
with equal results (threads take whole parts and blocks; the sums never depend on them). Runs
where the host has AMX-BF16 (skipped with the reason elsewhere; tests/cpp/test_amx.cpp runs the
kernel and its parts on emulated tile registers on every machine)."""
import numpy as np
import pytest

import oracle as O
import tbex

# One batch, depth 7 split in parts of 2 (the last part one slice), padded 3 x 3 x 3 taps.
DEPTH = O.Geometry(1, 32, 32, (7, 6, 10), (3, 3, 3), pads=(1, 1, 1, 1, 1, 1), name="depth")
# Five batches (split over batch: parts of 2, the last of one), strided, two output blocks.
BATCH = O.Geometry(5, 16, 32, (3, 7, 17), (2, 3, 3), strides=(1, 2, 2), pads=(0, 1, 1, 1, 1, 0),
                   name="batch")
# Two real groups (split over depth), 1 x 1 x 1: the entries are input blocks.
GROUPS = O.Geometry(2, 64, 64, (6, 5, 8), (1, 1, 1), groups=2, name="groups")

CASES = [DEPTH, BATCH, GROUPS]


@pytest.mark.parametrize("geo", CASES, ids=[g.name for g in CASES])
def test_amx_dw_blocked_variants(geo):
    names = {r["schedule"] for r in O.ranked_schedules(geo, "dW", dtype="bfloat16")}
    if "dw_amx_blocked" not in names:
        pytest.skip("dw_amx_blocked does not apply here (no AMX-BF16 on this host?): ranked %s" %
                    ", ".join(sorted(names)))
    variants = O.candidates(geo, "dW", "dw_amx_blocked", dtype="bfloat16")
    # The schedule's own choice splits these (fewer than 4 real groups); unsplit and other
    # counts are offered beside it.
    assert variants[0] == "" and "parts=1" in variants and len(variants) >= 3, variants
    rng = np.random.default_rng(72)
    x = O.random_data(rng, geo.x_shape, "bfloat16")
    dy = O.random_data(rng, geo.dy_shape, "bfloat16")
    ref = O.ref_dw(x, dy, geo)
    for variant in variants:
        raws = []
        for threads in (1, 2):
            with tbex.knobs.threads(threads):
                raws.append(O.run_dw(geo, x, dy, "bfloat16", schedule="dw_amx_blocked",
                                     variant=variant))
        what = "%s dW bf16 dw_amx_blocked [%s]" % (geo.name, variant)
        O.check_dw(raws[0], ref, geo, what=what)
        np.testing.assert_array_equal(raws[1], raws[0], err_msg=what + ": 2 threads against 1")
