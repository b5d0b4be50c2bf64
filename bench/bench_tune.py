#!/usr/bin/env python3
"""Measured tuning gains: per workload and pass, the untuned "auto" kernel vs the kernel
tbex.tune picks (every applicable schedule and tile variant timed), timed side by side.

    .venv/bin/python bench/bench_tune.py --workloads b_c3d,c1_unet_64cube --passes dw,dx

Uses bench.py's workloads, data and timing. Tuning results go to a scratch tuning database
(TBEX_TUNING_DB, default bench/build/tuning.json), never the user's. Prints a markdown table.
"""
import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("TBEX_TUNING_DB", str(HERE / "build" / "tuning.json"))

import numpy as np  # noqa: E402

import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(bench.QUICK))
    ap.add_argument("--workloads-file")
    ap.add_argument("--passes", default="dw,dx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target-sec", type=float, default=1.0, help="timing budget per kernel")
    ap.add_argument("--tune-sec", type=float, default=0.3, help="timing budget per candidate")
    ap.add_argument("--max-candidates", type=int, default=8)
    args = ap.parse_args()
    tbex, err = bench.import_tbex()
    if tbex is None:
        sys.exit("bench_tune: cannot import tbex: " + str(err))
    from tbex import _C
    by_name = {w["name"]: w for w in bench.load_workloads(args.workloads_file)}
    tbex.set_num_threads(args.threads)
    rows = []
    for name in args.workloads.split(","):
        w = by_name[name]
        data = bench.Data(w, "f32")
        for pass_ in args.passes.split(","):
            case = bench.TbexCase(w, pass_, "f32", data)
            problem = case.kernel.problem
            r = _C.tune(problem, args.max_candidates, args.tune_sec, True)
            # The untuned choice: the cost model's pick (the first candidate), compiled by name
            # so an existing database entry does not count.
            first = r["candidates"][0]["schedule"]
            first_variant = r["candidates"][0]["variant"]
            default_k = _C.compile(problem, first, first_variant)
            tuned_k = _C.compile(problem, r["schedule"], r["variant"])
            outs = [np.empty_like(case.out), np.empty_like(case.out)]
            inputs = list(case.inputs)
            time_default = lambda: bench.time_fn(lambda: default_k.run(inputs, outs[0]), args.target_sec)
            d_ms = time_default()["ms"]
            t_ms = bench.time_fn(lambda: tuned_k.run(inputs, outs[1]), args.target_sec)["ms"]
            d_ms = min(d_ms, time_default()["ms"])  # again, around it: drift on a shared machine
            # Another tile sums in another order: compare relative to the largest value.
            ok = np.abs(outs[0] - outs[1]).max() <= 1e-5 * max(np.abs(outs[0]).max(), 1e-30)
            rows.append((name, pass_, first + (" [%s]" % first_variant if first_variant else ""), d_ms, r["schedule"], r["variant"] or "(own)",
                         t_ms, d_ms / t_ms, len(r["candidates"])))
            print("%s %s: default %s %.2f ms, tuned %s [%s] %.2f ms (%.2fx, %d candidates)%s"
                  % (name, pass_, first, d_ms, r["schedule"], r["variant"], t_ms, d_ms / t_ms,
                     len(r["candidates"]), "" if ok else " RESULTS DIFFER"), flush=True)
    print("\n| workload | pass | default | default ms | tuned | variant | tuned ms | speed-up | candidates |")
    print("|---|---|---|---:|---|---|---:|---:|---:|")
    for r in rows:
        print("| %s | %s | %s | %.2f | %s | %s | %.2f | %.2fx | %d |" % r)


if __name__ == "__main__":
    main()
