"""Geometry fuzzer: random small convolutions (pads up to the dilated kernel + 2, strides up to 4,
dilations up to 3, the channel and group mixes of tests/python/test_random.py), inputs in fp32,
bf16 and fp16 in turn (--dtypes), each op computed by every schedule the cost model ranks for
that dtype (its own tiles) and, for dW, by dw_tiled's tile variants with x read in place and
staged, against the float64 oracle. 16-bit inputs are exact in fp32 products, so every dtype
meets the same fp32 summation bound.

A mismatch or an error is a finding; the run prints each with its geometry and exits non-zero.
It found the dW tap that reads nothing but pads (tests/python/test_random.py::
test_dw_tap_reading_only_pads).

    python tests/fuzz/fuzz_geometries.py --cases 400 --seed 1    # about 5 minutes on 2 cores
    python tests/fuzz/fuzz_geometries.py --tiles --dtypes bfloat16   # the AMX tile schedules
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import oracle as O  # noqa: E402
import test_random as T  # noqa: E402


# Channel mixes the tile-multiply schedules take (AMX: cout_g a multiple of 16 for dW, channel
# pairs for dX), grouped and not, with a partial cin1 block in some, and few input channels
# (dx_amx_cols: at most 8 valid lanes; appended after the seeds of 2026-11-28, 1130 and before).
TILE_CHANNELS = [
    (32, 32, 1), (16, 48, 1), (40, 32, 1), (64, 32, 2), (32, 64, 2), (48, 96, 3), (20, 56, 4),
    (24, 34, 1), (3, 32, 1), (6, 48, 2),
]


def geometry(rng, i, batch_max=2, grow=1, tiles=False):
    """Geometry i: test_random's draw; with batch_max > 2, a batch of 3..batch_max instead on
    every other geometry (dW splits its reduction over batch from 4 entries, with a tail from
    5); with grow > 1, each input size times 1..grow (larger problems reach other chunkings and
    splits). Both are drawn after the rest, so the default draws stay those of earlier runs.
    tiles: the channels of TILE_CHANNELS, and on every other geometry stride 1 in W (every
    fourth: in every dim) with at least 6 output positions per row (what the AMX schedules
    need to apply)."""
    mixes = TILE_CHANNELS if tiles else T.CHANNELS
    cin, cout, groups = mixes[i % len(mixes)]
    geo = T.draw_geometry(rng, cin, cout, groups, f"g{i}")
    if batch_max > 2 and i % 2:
        geo = dataclasses.replace(geo, n=int(rng.integers(3, batch_max + 1)))
    if grow > 1:
        geo = dataclasses.replace(geo, dhw=tuple(int(v * rng.integers(1, grow + 1)) for v in geo.dhw))
    if tiles and i % 2 == 0:
        reach = geo.dilations[2] * (geo.kernel[2] - 1) + 1 - geo.pads[4] - geo.pads[5]
        w = max(geo.dhw[2], reach + 5 + int(rng.integers(0, 12)))
        strides = geo.strides[:2] + (1,) if i % 4 else (1, 1, 1)
        geo = dataclasses.replace(geo, dhw=geo.dhw[:2] + (w,), strides=strides)
    return geo


PAIRS = "pair=2"  # the pair form (row pairs), its other tiles the schedule's own
BATCH_PAIRS = "pair=3"  # dw_tiled's batch pair form (even batches), likewise
FORCED = "forced"  # the schedule's own tiles, run even where the model does not rank it
AMX = (("dW", "dw_amx"), ("dW", "dw_amx_blocked"), ("dX", "dx_amx"), ("dX", "dx_amx_blocked"),
       ("dX", "dx_amx_cols"))


def runs(geo, dtype):
    """(op, schedule, variant) of every computation the fuzzer checks for `geo`: per op, each
    ranked schedule's own tiles and the next best of its ranked tile variants; dw_tiled's x
    variants; for bf16, dw_tiled's and dx_tiled's pair forms (and dw_tiled's batch pairs)."""
    out = []
    for op in ("dW", "dX"):
        ranked = [r for r in O.ranked_schedules(geo, op, dtype=dtype) if r["schedule"] != "reference"]
        for name in dict.fromkeys(r["schedule"] for r in ranked):
            out.append((op, name, ""))
            out += [(op, name, v) for v in [r["variant"] for r in ranked
                                            if r["schedule"] == name and r["variant"]][1:2]]
    keys = [k for k in O.candidates(geo, "dW", "dw_tiled", dtype=dtype) if ",x=" in k]
    out += [("dW", "dw_tiled", k) for k in keys[:3] if ("dW", "dw_tiled", k) not in out]
    # bf16: the pair forms (dot products of row pairs), forced: the model offers them only where
    # the host's bf16 dot products beat its FMAs (not on Sapphire or Emerald Rapids)
    if dtype == "bfloat16":
        out += [(op, name, PAIRS) for op, name in (("dW", "dw_tiled"), ("dX", "dx_tiled"))
                if (op, name, "") in out]
        if ("dW", "dw_tiled", "") in out:
            out.append(("dW", "dw_tiled", BATCH_PAIRS))
        # the AMX tile schedules where the model does not rank them (refused on hosts without
        # AMX-BF16 and where the geometry does not suit them)
        out += [(op, name, FORCED) for op, name in AMX if (op, name, "") not in out]
    return out


def refused(variant, e):
    """Whether `e` is tbex refusing a forced form that does not apply here, as it should: any
    UserError for a pair form (a variant the schedule does not offer: batch pairs for an odd
    batch), a "does not apply" one for a forced schedule."""
    if type(e).__name__ != "UserError":
        return False
    return variant in (PAIRS, BATCH_PAIRS) or (variant == FORCED and "does not apply" in str(e))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100, help="geometries drawn")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-flops", type=float, default=None,
                    help="larger draws are skipped (default 3e6; 3e7 with --tiles, whose channels are wider)")
    ap.add_argument("--batch-max", type=int, default=2,
                    help="above 2: every other geometry has a batch of 3 to this")
    ap.add_argument("--grow", type=int, default=1,
                    help="above 1: each input size times a random 1 to this")
    ap.add_argument("--tiles", action="store_true",
                    help="channels and rows the AMX tile schedules take (TILE_CHANNELS)")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16",
                    help="input dtypes, taken in turn by the geometries")
    args = ap.parse_args(argv)
    dtypes = args.dtypes.split(",")
    max_flops = args.max_flops or (3e7 if args.tiles else 3e6)
    rng = np.random.default_rng(args.seed)
    checked = 0
    per_schedule = collections.Counter()  # computations checked (refused ones left out)
    findings = []
    for i in range(args.cases):
        geo = geometry(rng, i, args.batch_max, args.grow, args.tiles)
        if min(geo.out_dhw) < 1 or geo.flops() > max_flops:
            continue
        checked += 1
        dtype = dtypes[i % len(dtypes)]
        for op, schedule, variant in runs(geo, dtype):
            try:
                O.check_op(geo, op, dtype, rng, schedule, "" if variant == FORCED else variant)
            except Exception as e:  # a finding: report it with its geometry, go on
                if refused(variant, e):
                    continue
                findings.append(f"{geo.name} {op} {dtype} {schedule} [{variant}] in={geo.dhw} "
                                f"N={geo.n} Cin={geo.cin} Cout={geo.cout} "
                                f"k={geo.kernel} s={geo.strides} pads={geo.pads} "
                                f"dil={geo.dilations} groups={geo.groups}: {str(e)[:300]}")
                print("FINDING", findings[-1], flush=True)
            per_schedule[op + " " + schedule] += 1
    print(f"{checked} geometries, {sum(per_schedule.values())} computations, {len(findings)} findings")
    print("computations per schedule:", ", ".join(f"{k} {v}" for k, v in sorted(per_schedule.items())))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
