"""The geometry fuzzer's draws and selection (tests/fuzz/fuzz_geometries.py): what it claims to
check is what it checks. A change that stopped drawing geometries the AMX schedules take, or
stopped forcing them, would leave those schedules unfuzzed without failing anything else."""
import sys
from pathlib import Path

import numpy as np

import oracle as O

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzz_geometries as F  # noqa: E402


def test_tiles_draws_suit_the_tile_schedules():
    rng = np.random.default_rng(3)
    for i in range(24):
        geo = F.geometry(rng, i, tiles=True)
        assert (geo.cin, geo.cout, geo.groups) == F.TILE_CHANNELS[i % len(F.TILE_CHANNELS)]
        if i % 2 == 0:
            assert geo.strides[2] == 1, geo
            assert geo.out_dhw[2] >= 6, geo
        if i % 4 == 0:
            assert geo.strides == (1, 1, 1), geo


def test_default_draws_stay_those_of_earlier_runs():
    """tiles=False draws test_random's channel mixes, unchanged (the docs' rows repeat)."""
    import test_random as T
    a = F.geometry(np.random.default_rng(9), 5)
    rng = np.random.default_rng(9)
    cin, cout, groups = T.CHANNELS[5]
    assert a == T.draw_geometry(rng, cin, cout, groups, "g5")


def test_bf16_runs_include_every_tile_schedule_and_f32_none():
    geo = O.Geometry(1, 32, 32, (3, 4, 20), (3, 3, 3), pads=(1, 1, 1, 1, 1, 1), name="t")
    bf16 = {(op, s) for op, s, _ in F.runs(geo, "bfloat16")}
    assert set(F.AMX) <= bf16
    assert not {(op, s) for op, s, v in F.runs(geo, "float32") if v == F.FORCED}


def test_a_short_tiles_run_is_clean():
    """Two bf16 geometries through main: on a host with AMX-BF16 the tile schedules run (and
    where they do not apply, or the host lacks AMX, they are refused, not reported)."""
    assert F.main(["--tiles", "--dtypes", "bfloat16", "--cases", "2", "--seed", "3"]) == 0
