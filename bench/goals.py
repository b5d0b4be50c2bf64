#!/usr/bin/env python3
"""Issue 11's goals, checked against a bench.py run on the machine it ran on (its raw results,
bench/build/results.json). oneDNN primitive time, 1 and 2 threads:

- f32 and f16 inputs: >= 1.0x oneDNN f32 on every workload a-h, both passes, both thread counts,
  and none below 0.9x;
- >= 75% of the FP32 FMA peak on b, c1, c2, d, e1 and g (f32);
- 1 -> 2 threads >= 1.85x on the same workloads (f32);
- bf16: >= 1.0x oneDNN bf16 where the CPU has AVX512_BF16, >= 3x where oneDNN has to emulate it;
- keep: depthwise (e2) >= 20x, dilated dW (f) >= 3x, stem dX (h) >= 3x oneDNN (f32);
- cold compile (schedule choice + JIT) <= 1 s per kernel.

    .venv/bin/python bench/bench.py --dtypes f32,f16,bf16 --threads 1,2 --halide-auto ''
    .venv/bin/python bench/goals.py       # writes `## Issue 11 goals` in that machine's part

The section goes into the part of bench/RESULTS.md of the machine the run was on (`--out ''`
prints it only), unless the section there is from a run of dtypes this one lacks (`--replace`
writes it anyway); the analysis of the misses is a hand-written section beside it.
"""
import argparse
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench  # noqa: E402

SECTION = "## Issue 11 goals"
DENSE = ("b_c3d", "c1_unet_64cube", "c2_unet_32cube", "d_i3d_1x1x1", "e1_grouped_g4",
         "g_strided_s2")
MULTIPLES = {("e2_depthwise", "dw"): 20, ("e2_depthwise", "dx"): 20, ("f_dilated_d2", "dw"): 3,
             ("h_stem_3x7x7", "dx"): 3}
PEAK_GOAL, SCALING_GOAL, FLOOR = 75.0, 1.85, 0.9


def ms(d):
    return d.get("ms") if d and "ms" in d else None


def short(w):
    return w.split("_")[0]


def mark(*ds):
    """"!" when one of the measurements was flagged by bench.py (cores busy or shared)."""
    return "!" if any(bench.flagged(d) for d in ds) else ""


class Goals:
    """The rows of one run, indexed, and the goal table built from them."""

    def __init__(self, run):
        self.run = run
        self.rows = run["rows"]
        self.by = {(r["workload"], r["pass"], r["dtype"], r["threads"]): r for r in self.rows}
        self.native_bf16 = "avx512_bf16" in run.get("machine", "") or "amx_bf16" in run.get(
            "machine", "")
        self.lines = ["| goal | met | measured |", "|---|---|---|"]

    def ratio(self, r, against_f32=False):
        """oneDNN time / tbex time for row r (against oneDNN's f32 time when asked)."""
        t = ms(r.get("tbex"))
        o = r if not against_f32 else self.by.get((r["workload"], r["pass"], "f32", r["threads"]))
        o = ms((o or {}).get("onednn"))
        return o / t if t and o else None

    def add(self, goal, ok, total, measured):
        self.lines.append("| %s | %d of %d | %s |" % (goal, ok, total, measured or "none"))

    def vs_onednn_f32(self):
        met, below, floor = 0, [], []
        for r in self.rows:
            if r["dtype"] not in ("f32", "f16"):
                continue
            x = self.ratio(r, against_f32=True)
            if x is None:
                continue
            met += x >= 1.0
            o = self.by.get((r["workload"], r["pass"], "f32", r["threads"])) or {}
            cell = "%s %s %s %dt %.2fx%s" % (short(r["workload"]), r["pass"], r["dtype"],
                                             r["threads"], x, mark(r.get("tbex"), o.get("onednn")))
            if x < 1.0:
                below.append(cell)
            if x < FLOOR:
                floor.append(cell)
        total = met + len(below)
        self.add(">= 1.0x oneDNN f32, f32 and f16 inputs, every workload, pass, thread count",
                 met, total, "below: " + "; ".join(below) if below else "")
        self.add("none below %.1fx oneDNN f32" % FLOOR, total - len(floor), total,
                 "below: " + "; ".join(floor) if floor else "")

    def peak(self):
        cells, ok = [], 0
        for w in DENSE:
            for p in ("dw", "dx"):
                for n in (1, 2):
                    r = self.by.get((w, p, "f32", n))
                    t = ms((r or {}).get("tbex"))
                    if t is None or not r.get("peak"):
                        continue
                    pk = 100 * r["flops"] / (t * 1e6) / r["peak"]
                    ok += pk >= PEAK_GOAL
                    cells.append("%s %s %dt %.0f%%%s%s" % (short(w), p, n, pk, mark(r["tbex"]),
                                                           "" if pk >= PEAK_GOAL else " (no)"))
        self.add(">= %.0f%% of FP32 FMA peak on b, c1, c2, d, e1, g (f32)" % PEAK_GOAL, ok,
                 len(cells), "; ".join(cells))

    def scaling(self):
        cells, ok = [], 0
        for w in DENSE:
            for p in ("dw", "dx"):
                t1 = (self.by.get((w, p, "f32", 1)) or {}).get("tbex")
                t2 = (self.by.get((w, p, "f32", 2)) or {}).get("tbex")
                one, two = ms(t1), ms(t2)
                if one and two:
                    ok += one / two >= SCALING_GOAL
                    cells.append("%s %s %.2fx%s%s" % (short(w), p, one / two, mark(t1, t2),
                                                      "" if one / two >= SCALING_GOAL else " (no)"))
        self.add("1 -> 2 threads >= %.2fx on b, c1, c2, d, e1, g (f32)" % SCALING_GOAL, ok,
                 len(cells), "; ".join(cells))

    def bf16(self):
        want = 1.0 if self.native_bf16 else 3.0
        xs, below = [], []
        for r in self.rows:
            if r["dtype"] != "bf16":
                continue
            x = self.ratio(r)
            if x is None:
                continue
            xs.append(x)
            if x < want:
                below.append("%s %s %dt %.2fx" % (short(r["workload"]), r["pass"], r["threads"], x))
        geo = math.exp(sum(map(math.log, xs)) / len(xs)) if xs else 0.0
        self.add(">= %.0fx oneDNN bf16 (%s)" % (
            want, "the CPU has AVX512_BF16: oneDNN uses it" if self.native_bf16
            else "no AVX512_BF16: oneDNN emulates"), len(xs) - len(below), len(xs),
            ("geomean %.2fx" % geo) + ("; below: " + "; ".join(below) if below else "") if xs
            else "no bf16 row with a oneDNN bf16 time (bf16 not run, or oneDNN has no bf16 "
                 "backward on this CPU: 'unsupported')")

    def multiples(self):
        for (w, p), want in MULTIPLES.items():
            cells, ok = [], 0
            for n in (1, 2):
                r = self.by.get((w, p, "f32", n)) or {"tbex": None}
                x = self.ratio(r)
                if x:
                    ok += x >= want
                    cells.append("%dt %.1fx%s" % (n, x, mark(r.get("tbex"), r.get("onednn"))))
            self.add(">= %dx oneDNN on %s %s (f32)" % (want, w, p), ok, len(cells),
                     "; ".join(cells))

    def compile(self):
        # A "!" marks a compile during which the host shared our core or the memory path
        # (bench.flagged).
        comp = [(r["workload"], r["pass"], r["dtype"], r["tbex"]["compile_ms"],
                 "!" if bench.flagged(r["tbex"], "compile_avail") else "") for r in self.rows
                if r.get("tbex") and "compile_ms" in r["tbex"] and r["threads"] == 1]
        if not comp:
            return
        worst = max(comp, key=lambda c: c[3])
        over = [c for c in comp if c[3] > 1000]
        self.add("cold compile (schedule choice + JIT) <= 1 s per kernel", len(comp) - len(over),
                 len(comp), "max %.0f ms%s (%s %s %s)%s" % (
                     worst[3], worst[4], *worst[:3],
                     "; over: " + ", ".join("%s %s %s %.0f ms%s" % c for c in over) if over else ""))


def render(run):
    g = Goals(run)
    g.vs_onednn_f32()
    g.peak()
    g.scaling()
    g.bf16()
    g.multiples()
    g.compile()
    return "\n".join([
        SECTION, "",
        "From the run `%s` (%s) on this machine. Ratios are oneDNN's time / tbex's time (> 1: tbex "
        "is faster); f16 inputs are compared with oneDNN's f32 time; `!` marks a figure from a "
        "measurement bench.py flagged (cores busy, or shared by the host: unreliable)." % (
            " ".join(run["command"]), run.get("date", "?")),
        ""] + g.lines) + "\n"


def dtypes_left_out(run, section):
    """The dtypes the run behind the written `section` measured (its command's --dtypes) that
    `run` did not: a section from a fuller run is not replaced by a partial one's."""
    m = re.search(r"--dtypes[ =](\S+)", section or "")
    if m is None:
        return set()
    return set(m.group(1).strip("`").split(",")) - {r["dtype"] for r in run["rows"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=str(HERE / "build" / "results.json"))
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="'' = print only")
    ap.add_argument("--replace", action="store_true",
                    help="write the section even where the one there is from a run of more dtypes")
    args = ap.parse_args()
    if not Path(args.json).is_file():
        sys.exit("goals: %s not found: run bench/bench.py first" % args.json)
    run = json.loads(Path(args.json).read_text())
    text = render(run)
    print(text)
    if not args.out:
        return
    machine = run.get("machine_label")
    missing = dtypes_left_out(run, bench.read_section(args.out, SECTION, machine))
    if missing and not args.replace:
        print("goals: %s left as it is: its run measured %s, this one did not (--replace to "
              "write it anyway)" % (args.out, ",".join(sorted(missing))), file=sys.stderr)
        return
    bench.write_section(args.out, SECTION, text, machine)


if __name__ == "__main__":
    main()
