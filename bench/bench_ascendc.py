#!/usr/bin/env python3
"""The Ascend C example kernels (examples/ascendc) next to tbex's own dW / dX kernels.

    .venv/bin/python bench/bench_ascendc.py                      # every workload, float16, threads 1,2
    .venv/bin/python bench/bench_ascendc.py --dtypes float16,bfloat16 --workloads a_tbe_doc

For each (workload, pass, dtype, threads) build/<dir>/tbex_ascendc_bench runs the example kernel
through the host tiling and ICPU_RUN_KF on block_dim = threads logical cores (TBEX_NUM_THREADS =
threads), then tbex's own kernel for the same problem, and reports both medians. The issue's goal:
the API within 1.3x of tbex's own kernel. Grouped workloads are skipped: the API's host tiling
takes groups = 1. Writes the section "## Ascend C API vs tbex kernels (issue 13)" of this machine's
part of bench/RESULTS.md (--no-write: print only).
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as B  # noqa: E402

SECTION = "## Ascend C API vs tbex kernels (issue 13)"
NOTES = """What the API's block structure costs. A single shape is one (batch, dout, kd) slice for dW and
one (batch, din) slice for dX (CANN's API cannot take more), so the API runs N*Do*Kd (dW) or
N*Di (dX) tbex kernels where tbex's own path runs one; each slice's kernel is a little less
efficient than the whole problem's (perf on a_tbe_doc dW: 13% more cycles in the kernels), each
single shape's result is copied out block by block by GetTensorC (dW adds under per-page locks),
and every launch starts block_dim threads. On the large workloads this is within noise (0.97-1.05);
on the 5-10 ms seed workload (a_tbe_doc, 128 slices of 40-80 us) it is 1.07-1.45x and varies
from run to run (the full run with --reps 9 before this one had dX at 2 threads at 1.42x, this one
dX at 1 thread at 1.38x; 15-rep runs of the bench binary alone gave 1.14-1.22x).
Ratios below 1 are slices whose local kernel the cost model schedules better than the whole
problem (h_stem dX). Engineering notes: a CAS per element for the atomic adds cost 2-5 ms on
f_dilated (now one lock per 4 KiB page and plain adds); the first version computed a dX slice over
all Kd depth taps (most reading padding, 2.4x on a_tbe_doc) and Cin = 3 as 16 lanes (5x on h_stem);
both now use only the taps and channels that exist."""
GOAL = 1.3


def find_binary():
    found = sorted(HERE.parent.glob("build/*/tbex_ascendc_bench"), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit("tbex_ascendc_bench not found: build tbex first (make build)")
    return found[-1]


def args_of(w):
    return [w["N"], w["Cin"], w["Cout"], w["D"], w["H"], w["W"], w["Kd"], w["Kh"], w["Kw"],
            w["sd"], w["sh"], w["sw"], w["pad_front"], w["pad_back"], w["pad_top"],
            w["pad_bottom"], w["pad_left"], w["pad_right"], w["dd"], w["dh"], w["dw"]]


def fits_dx(w):
    """The dX host tiling's limits: strideD <= kD, pads <= (k-1)*dilation."""
    return (w["sd"] <= w["Kd"] and w["pad_front"] <= (w["Kd"] - 1) * w["dd"]
            and w["pad_top"] <= (w["Kh"] - 1) * w["dh"] and w["pad_left"] <= (w["Kw"] - 1) * w["dw"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="", help="comma-separated names (default: all)")
    ap.add_argument("--dtypes", default="float16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    binary = find_binary()
    wls = B.load_workloads()
    if a.workloads:
        names = a.workloads.split(",")
        wls = [w for w in wls if w["name"] in names]
    rows = []
    for w in wls:
        for pass_ in ("dw", "dx"):
            for dtype in a.dtypes.split(","):
                for thr in [int(t) for t in a.threads.split(",")]:
                    row = {"workload": w["name"], "pass": pass_, "dtype": dtype, "threads": thr}
                    if w.get("groups", 1) != 1:
                        row["skip"] = "groups %d (API takes 1)" % w["groups"]
                    elif pass_ == "dx" and not fits_dx(w):
                        row["skip"] = "pads/stride outside the dX API's limits"
                    else:
                        env = dict(os.environ, TBEX_NUM_THREADS=str(thr))
                        cmd = [str(binary), pass_, dtype] + [str(v) for v in args_of(w)] + [str(thr), str(a.reps)]
                        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                        if r.returncode != 0:
                            row["skip"] = "failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:120]
                        else:
                            row.update(json.loads(r.stdout.strip().splitlines()[-1]))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    lines = [SECTION, "",
             "Machine: %s. Command: `.venv/bin/python bench/bench_ascendc.py --dtypes %s --threads %s`"
             % (B.machine_label(), a.dtypes, a.threads), "",
             "The example kernels of examples/ascendc (host tiling -> ICPU_RUN_KF, block_dim = "
             "threads) against tbex's own kernel for the same problem and thread count; medians of "
             "%d runs after a warm-up. Goal: API / tbex <= %.1f." % (a.reps, GOAL), "",
             "| workload | pass | dtype | thr | GFLOP | API ms | API GF/s | tbex ms | tbex GF/s | API / tbex | goal | tiling | tbex schedule |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    met = total = 0
    for r in rows:
        if "skip" in r:
            lines.append("| %s | %s | %s | %d | | | | | | | | %s | |" % (r["workload"], r["pass"], r["dtype"], r["threads"], r["skip"]))
            continue
        ratio = r["api_ms"] / r["tbex_ms"]
        total += 1
        met += ratio <= GOAL
        lines.append("| %s | %s | %s | %d | %.3f | %.3f | %.1f | %.3f | %.1f | %.2f | %s | %s | %s |" % (
            r["workload"], r["pass"], r["dtype"], r["threads"], r["gflop"], r["api_ms"],
            r["gflop"] / r["api_ms"] * 1e3, r["tbex_ms"], r["gflop"] / r["tbex_ms"] * 1e3, ratio,
            "yes" if ratio <= GOAL else "**no**", r["tiling"], r["tbex_schedule"]))
    lines += ["", "%d of %d rows within %.1fx." % (met, total, GOAL), "", NOTES]
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        B.write_section(HERE / "RESULTS.md", SECTION, text)


if __name__ == "__main__":
    main()
