#!/usr/bin/env python3
"""Where a tbex kernel spends its time: a sampling profile of its stages and inner loops.

    .venv/bin/python bench/bench_profile.py h_stem_3x7x7 dx f32                 # the "auto" kernel, 1 thread
    .venv/bin/python bench/bench_profile.py g_strided_s2 dx f32 --threads 2
    .venv/bin/python bench/bench_profile.py h_stem_3x7x7 dx f32 --schedule dx_cout_lanes --variant qt=3,ord=1
    .venv/bin/python bench/bench_profile.py d_i3d_1x1x1 dw bf16 --out bench/build/profile.md --json p.json

The kernel the JIT compiles for the workload (bench/bench_workloads.json) is emitted ahead of
time (tbex.aot.emit, the same schedule and tile variant), linked into bench/profile_harness.cpp,
checked against the JIT kernel's output on the same inputs (bit for bit: the same code), then
called for --seconds under `perf record -e cpu-clock`. The software clock samples where guests
give no hardware counters. The report lists each stage's share (a parallel loop of a Func, from
its symbol) and each loop of the hot stages (a backward branch in the disassembly) with its share
of the samples and what its body holds: instructions, FMAs (dot products included), loads, stores,
stack accesses (spills), broadcasts. A share is of all samples (the harness and the OS
faults included); `self` leaves out the loops nested inside.

Needs `perf` (Debian's linux-perf), `objdump` (binutils) and a C++ compiler (CXX, else g++).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench  # noqa: E402

HARNESS = HERE / "profile_harness.cpp"


class ProfileError(RuntimeError):
    """A step of the profile failed (a tool missing, a build or run error): the message says
    which and why."""


# --------------------------------------------------------------------------------------------
# parsing perf's and objdump's text (pure functions: tested without a profile)

_REPORT = re.compile(r"^\s*([0-9.]+)%\s+\[([.k])\]\s+(\S.*?)\s*$")
_ANNOTATE = re.compile(r"^\s*([0-9.]+)\s*:\s*([0-9a-f]+):")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*?)\s*$")
_SYMBOL = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_PAR_FOR = re.compile(r"^k_halide_par_for_(.+?)_s(\d+)_(.*)$")


def parse_report(text):
    """`perf report --stdio --sort symbol` lines -> [(percent, 'user' | 'kernel', symbol)]."""
    rows = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _REPORT.match(line)
        if m:
            # perf may append columns (IPC, coverage) after two or more spaces.
            sym = re.split(r"\s{2,}", m.group(3))[0]
            rows.append((float(m.group(1)), "kernel" if m.group(2) == "k" else "user", sym))
    return rows


def stage_of(symbol):
    """A kernel symbol's stage: Halide names a parallel loop's closure
    `<pipeline>_par_for_<func>_s<stage>_<loop vars>` (a Func's `$` becomes `__`), the pipeline's
    serial body `<pipeline>`. None for a symbol not of the kernel `k`."""
    if symbol == "k_halide":
        return "serial part (k_halide)"
    m = _PAR_FOR.match(symbol)
    if not m:
        return None
    func, stage, loops = m.group(1).replace("__", "$"), m.group(2), m.group(3)
    # A par-for nested in another names both; the first Func is the one that owns the loop.
    loops = loops.split("_par_for_")[0]
    return f"{func} (stage s{stage}, parallel over {loops})"


def parse_annotate(text):
    """`perf annotate --stdio` lines -> {address: percent of the symbol's samples}."""
    out = {}
    for line in text.splitlines():
        m = _ANNOTATE.match(line)
        if m:
            out[int(m.group(2), 16)] = out.get(int(m.group(2), 16), 0.0) + float(m.group(1))
    return out


def parse_objdump(text):
    """`objdump -d --no-show-raw-insn` (AT&T) -> {symbol: [(address, mnemonic, operands)]}."""
    funcs, cur = {}, None
    for line in text.splitlines():
        m = _SYMBOL.match(line.strip())
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = _INSN.match(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def _is_mul_add(op):
    return bool(re.match(r"^v?f(n?)m(add|sub)(\d{3})?[ps][sdh]$", op)) or op in (
        "vdpbf16ps", "vdpphps", "vpdpbusd", "vpdpwssd", "tdpbf16ps", "tdpfp16ps", "tdpbssd")


def _operands(args):
    """AT&T operands, split at the commas outside an address's parentheses: the destination
    is the last ("%ymm0,0x4a0(%rsi,%r10,1)" -> ["%ymm0", "0x4a0(%rsi,%r10,1)"])."""
    out, depth, cur = [], 0, ""
    for ch in args:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def body_counts(insns):
    """What a loop body holds: instructions, FMAs (multiply-adds and dot products), FMAs with a
    memory operand, other loads, stores, stack (%rsp) accesses, broadcasts (a broadcast instruction or
    an embedded `{1toN}` operand)."""
    c = dict(instructions=len(insns), fmas=0, fma_mem=0, loads=0, stores=0, stack=0, broadcasts=0)
    for _, op, args in insns:
        mem = "(" in args
        store = mem and "(" in _operands(args)[-1] and not op.startswith(("cmp", "test", "prefetch"))
        if _is_mul_add(op):
            c["fmas"] += 1
            c["fma_mem"] += int(mem)
        elif store:
            c["stores"] += 1
        elif mem and not op.startswith(("lea", "nop", "prefetch")):
            c["loads"] += 1
        # Halide's code keeps no frame pointer: %rbp is a base register like any other.
        c["stack"] += int("(%rsp" in args)
        c["broadcasts"] += int("broadcast" in op or "{1to" in args)
    return c


def find_loops(insns):
    """Loops of a function: each backward branch to an address inside it names one, from its
    target to the branch. Returns [{start, end, depth, index range}], outermost first where
    nested; depth counts the loops that hold it."""
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    spans = set()
    for i, (addr, op, args) in enumerate(insns):
        if not op.startswith("j"):
            continue
        m = re.match(r"([0-9a-f]+)\b", args)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target <= addr and target in index:
            spans.add((index[target], i))
    loops = []
    for lo, hi in sorted(spans, key=lambda s: (s[0], -s[1])):
        depth = sum(1 for a, b in spans if a <= lo and hi <= b and (a, b) != (lo, hi))
        loops.append(dict(start=insns[lo][0], end=insns[hi][0], depth=depth, lo=lo, hi=hi))
    return loops


def loop_table(insns, percent, symbol_share):
    """Each loop of a function with its share of all samples (`symbol_share` x the percent of the
    function's samples its addresses hold), its self share (less its nested loops') and its body's
    counts."""
    loops = find_loops(insns)
    rows = []
    for L in loops:
        body = insns[L["lo"]:L["hi"] + 1]
        share = sum(percent.get(a, 0.0) for a, _, _ in body)
        inner = [M for M in loops if M is not L and L["lo"] <= M["lo"] and M["hi"] <= L["hi"]]
        covered = set()
        for M in inner:
            covered.update(range(M["lo"], M["hi"] + 1))
        own = sum(percent.get(insns[i][0], 0.0) for i in range(L["lo"], L["hi"] + 1)
                  if i not in covered)
        rows.append(dict(start=L["start"], end=L["end"], depth=L["depth"],
                         share=symbol_share * share / 100.0, self=symbol_share * own / 100.0,
                         **body_counts(body)))
    return rows


# --------------------------------------------------------------------------------------------
# running


def _tool(name, hint):
    path = shutil.which(name)
    if not path:
        raise ProfileError(f"{name} not found: {hint}")
    return path


def _run(cmd, what, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise ProfileError(f"{what} failed (exit {r.returncode}): {shlex.join(map(str, cmd))}\n"
                           f"{(r.stderr or r.stdout)[-2000:]}")
    return r.stdout


def workload(name, workloads_file=None):
    ws = bench.load_workloads(workloads_file)
    for w in ws:
        if w["name"] == name:
            return w
    raise ProfileError(f"workload {name!r} not in the workloads file: "
                       + ", ".join(w["name"] for w in ws))


def profile(w, pass_, dtype, threads=1, schedule="auto", variant="", seconds=2.0, workdir=None,
            top=8, min_share=1.0):
    """Profiles workload `w`'s kernel; returns the report as a dict (see `markdown`)."""
    import tbex

    perf = _tool("perf", "install Debian's linux-perf (apt-get install linux-perf)")
    objdump = _tool("objdump", "install binutils")
    cxx = shutil.which(os.environ.get("CXX", "g++")) or _tool("c++", "set CXX to a C++ compiler")
    if pass_ not in ("dw", "dx") or dtype not in bench.TBEX_DTYPES:
        raise ProfileError(f"pass {pass_!r} must be dw or dx and dtype {dtype!r} one of "
                           + ", ".join(bench.TBEX_DTYPES))
    if threads < 1:
        raise ProfileError(f"threads {threads} must be at least 1")

    # The pool's size first: "auto" plans for it (another thread count may pick another variant,
    # whose sums round differently: docs/arithmetic.md).
    tbex.set_num_threads(threads)
    data = bench.Data(w, dtype)
    case = bench.TbexCase(w, pass_, dtype, data, schedule=schedule, variant=variant)
    jit_ms = case.time(threads, 0.3)["ms"]  # runs the kernel: case.out is its output
    sched, var = case.kernel.schedule, case.kernel.variant

    d = Path(workdir or tempfile.mkdtemp(prefix="tbex_profile_"))
    d.mkdir(parents=True, exist_ok=True)
    tbex.aot.emit(case.problem, "k", str(d), ["static_library", "header"], "host", sched, var)
    manifest = json.loads((d / "k.manifest.json").read_text())
    if (manifest["schedule"], manifest["variant"]) != (sched, var):
        raise ProfileError(f"the AOT kernel is {manifest['schedule']} [{manifest['variant']}], "
                           f"the JIT's {sched} [{var}]: the profile would not be of the same code")
    target = manifest["target"]
    tbex.aot.emit_runtime("k_runtime", str(d), target)
    inputs = []
    for i, a in enumerate(case.inputs):
        p = d / f"in{i}.bin"
        p.write_bytes(np.ascontiguousarray(a).tobytes())
        inputs.append(str(p))
    exe = d / "harness"
    _run([cxx, "-O2", "-std=c++17", "-I", str(d), "-I", tbex.aot.include_dir(), str(HARNESS),
          str(d / "k.a"), str(d / "k_runtime.a"), tbex.aot.runtime_library(), "-lpthread", "-ldl",
          "-o", str(exe)], "building the harness")

    out = d / "out.bin"
    run = [str(exe), str(threads), str(seconds), str(out), *inputs]
    data_file = d / "perf.data"
    harness_out = _run([perf, "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", str(data_file),
                        "--", *run], "perf record")
    timing = json.loads(harness_out.strip().splitlines()[-1])
    got = np.frombuffer(out.read_bytes(), np.float32)
    want = np.ascontiguousarray(case.out, np.float32).reshape(-1)
    if got.shape != want.shape or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
        raise ProfileError(f"the AOT kernel's output differs from the JIT kernel's (max |diff| "
                           f"{diff:.3g}): the profile would not be of the same code")

    report = parse_report(_run([perf, "report", "-i", str(data_file), "--stdio", "--sort", "symbol"],
                               "perf report"))
    stages, other_user, other_kernel = [], 0.0, 0.0
    for pct, kind, sym in report:
        st = stage_of(sym) if kind == "user" else None
        if st:
            stages.append(dict(stage=st, symbol=sym, share=pct))
        elif kind == "kernel":
            other_kernel += pct
        else:
            other_user += pct

    funcs = parse_objdump(_run([objdump, "-d", "--no-show-raw-insn", str(exe)], "objdump"))
    loops = []
    for s in stages[:top]:
        if s["share"] < min_share or s["symbol"] not in funcs:
            continue
        ann = parse_annotate(_run([perf, "annotate", "-i", str(data_file), "--stdio",
                                   "--no-source", "-s", s["symbol"]], "perf annotate"))
        for row in loop_table(funcs[s["symbol"]], ann, s["share"]):
            if row["share"] >= min_share:
                loops.append(dict(row, stage=s["stage"]))
    return dict(
        workload=w["name"], pass_=pass_, dtype=dtype, threads=threads, schedule=sched,
        variant=var, describe=manifest.get("schedule_detail", ""), jit_ms=jit_ms, aot=timing,
        stages=stages, other_user=other_user, other_kernel=other_kernel, loops=loops,
        machine=bench.machine_label(), workdir=str(d))


def markdown(r, command):
    lines = [
        f"### Profile: {r['workload']} {r['pass_']} {r['dtype']}, {r['threads']} thread(s)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {r['machine']}  ",
        f"Kernel: {r['schedule']}{' [' + r['variant'] + ']' if r['variant'] else ''} "
        f"({r['describe']})  ",
        f"AOT kernel {r['aot']['median_ms']:.3f} ms a call (median of {r['aot']['calls']}), the "
        f"JIT's {r['jit_ms']:.3f} ms; outputs equal bit for bit. Shares are of all samples "
        f"(perf cpu-clock).",
        "",
        "| stage | share |",
        "|---|---|",
    ]
    for s in r["stages"]:
        lines.append(f"| {s['stage']} | {s['share']:.1f}% |")
    lines.append(f"| harness, thread pool, libraries | {r['other_user']:.1f}% |")
    lines.append(f"| OS (page faults, scheduling) | {r['other_kernel']:.1f}% |")
    if r["loops"]:
        lines += ["", "| stage | loop | depth | share | self | instructions | FMAs (mem) | loads "
                  "| stores | stack | broadcasts |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for L in r["loops"]:
            lines.append(
                f"| {L['stage'].split(' ')[0]} | {L['start']:x}-{L['end']:x} | {L['depth']} | "
                f"{L['share']:.1f}% | {L['self']:.1f}% | {L['instructions']} | {L['fmas']} "
                f"({L['fma_mem']}) | {L['loads']} | {L['stores']} | {L['stack']} | "
                f"{L['broadcasts']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("pass_", metavar="pass", choices=["dw", "dx"])
    ap.add_argument("dtype", choices=sorted(bench.TBEX_DTYPES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--schedule", default="auto")
    ap.add_argument("--variant", default="")
    ap.add_argument("--seconds", type=float, default=2.0, help="profiled seconds (default 2)")
    ap.add_argument("--min-share", type=float, default=1.0,
                    help="loops below this percent of the samples are left out (default 1)")
    ap.add_argument("--workdir", help="keep the kernel, harness and perf.data here")
    ap.add_argument("--workloads-file", help="default: bench/bench_workloads.json")
    ap.add_argument("--out", help="append the report (markdown) to this file")
    ap.add_argument("--json", help="write the report as JSON")
    a = ap.parse_args(argv)
    try:
        r = profile(workload(a.workload, a.workloads_file), a.pass_, a.dtype, a.threads,
                    a.schedule, a.variant, a.seconds, a.workdir, min_share=a.min_share)
    except ProfileError as e:
        print(f"profile: {e}", file=sys.stderr)
        return 2
    cmd = ".venv/bin/python bench/bench_profile.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])
    text = markdown(r, cmd)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n" + text)
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
