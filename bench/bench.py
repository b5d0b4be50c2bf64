#!/usr/bin/env python3
"""Benchmark tbex's conv3d backprop kernels (dW, dX) against oneDNN and PyTorch on this CPU.

    .venv/bin/python bench/bench.py                       # all workloads, dw+dx, f32, threads 1,2
    .venv/bin/python bench/bench.py --quick               # a_tbe_doc, b_c3d, c1_unet_64cube
    .venv/bin/python bench/bench.py --no-tbex --dtypes f32,bf16 --threads 1
    .venv/bin/python bench/bench.py --workloads b_c3d --passes dw --target-sec 2
    .venv/bin/python bench/bench.py --halide-auto adams2019 --halide-auto-dtypes f32

Workloads come from bench/bench_workloads.json (--workloads-file to use another file).
The oneDNN helper and the peak kernel are built on demand into bench/build/ by bench/build.sh.
Halide's autoschedulers (tbex's kernels compiled with schedule=halide_<name>) are timed the same
way and get a table of their own. Prints the tables and writes them as the section
"## bench.py: ..." of this machine's part of bench/RESULTS.md (other sections and other machines'
parts stay; --out to change, --out '' to skip); raw results go to bench/build/results.json. See bench/README.md for the columns.
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUILD = HERE / "build"
QUICK = ["a_tbe_doc", "b_c3d", "c1_unet_64cube"]
NP_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
TBEX_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
# Halide's autoschedulers, as tbex schedules (schedules/halide_auto.cpp): short name -> table name
HALIDE_AUTO = {"mullapudi2016": "Mullapudi2016", "adams2019": "Adams2019", "li2018": "Li2018"}


# --------------------------------------------------------------------------------------------
# workloads


def find_workloads_file(arg):
    """--workloads-file when given, else the repository's bench/bench_workloads.json."""
    path = Path(arg) if arg else HERE / "bench_workloads.json"
    if not path.is_file():
        sys.exit(f"bench: workloads file {path} not found")
    return path


def load_workloads(arg=None):
    """The workloads (a list of dicts) of --workloads-file, else of bench/bench_workloads.json."""
    return json.loads(find_workloads_file(arg).read_text())["workloads"]


def out_dims(w):
    def o(i, p0, p1, k, d, s):
        return (i + p0 + p1 - ((k - 1) * d + 1)) // s + 1

    return (
        o(w["D"], w["pad_front"], w["pad_back"], w["Kd"], w["dd"], w["sd"]),
        o(w["H"], w["pad_top"], w["pad_bottom"], w["Kh"], w["dh"], w["sh"]),
        o(w["W"], w["pad_left"], w["pad_right"], w["Kw"], w["dw"], w["sw"]),
    )


def flops(w):
    Do, Ho, Wo = out_dims(w)
    return (
        2.0 * w["N"] * w["Cout"] * Do * Ho * Wo * (w["Cin"] // w["groups"])
        * w["Kd"] * w["Kh"] * w["Kw"]
    )


def np_dtype(dtype):
    if dtype == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(NP_DTYPES[dtype])


class Data:
    """Random NCDHW / OIDHW tensors of one workload, rounded to the benchmark dtype, shared by
    every implementation (so their results can be compared)."""

    def __init__(self, w, dtype, seed=0):
        rng = np.random.default_rng(seed)
        Do, Ho, Wo = out_dims(w)
        g = w["groups"]
        self.x_shape = (w["N"], w["Cin"], w["D"], w["H"], w["W"])
        self.dy_shape = (w["N"], w["Cout"], Do, Ho, Wo)
        self.w_shape = (w["Cout"], w["Cin"] // g, w["Kd"], w["Kh"], w["Kw"])
        dt = np_dtype(dtype)
        # x, dy, w in the benchmark dtype (contiguous NCDHW / OIDHW)
        self.x = rng.uniform(-1, 1, self.x_shape).astype(np.float32).astype(dt)
        self.dy = rng.uniform(-1, 1, self.dy_shape).astype(np.float32).astype(dt)
        self.w = rng.uniform(-1, 1, self.w_shape).astype(np.float32).astype(dt)


# --------------------------------------------------------------------------------------------
# timing


# Seconds each timing first spends running its function untimed (bench.py --warmup-sec). On a
# KVM guest a kernel ran 1.4-2x slower for about half a second after its cores had idled (e1 dX:
# 11-18 ms per call, then 7.9), longer than a whole measurement of a short kernel (50 calls).
WARMUP_S = 0.3


def time_fn(fn, target_s, min_k=3, max_k=50):
    """Warm-up runs (at least one, until WARMUP_S is spent), then runs until about target_s is
    spent, at least min_k (1 when the first warm-up run took longer than 4*target_s), at most
    max_k; the median and min of those. The policy of onednn_bench's time_it (warmup_time =
    WARMUP_S), so both sides are timed alike. A first run longer than 10*target_s is not
    repeated: its time is reported (k = 0)."""
    t0 = time.perf_counter()
    fn()
    warm = time.perf_counter() - t0
    if warm > 10 * target_s:
        return {"ms": warm * 1e3, "min_ms": warm * 1e3, "k": 0}
    warmed = warm
    while warmed < WARMUP_S:
        t1 = time.perf_counter()
        fn()
        warmed += time.perf_counter() - t1
    lo = min_k if warm <= 4 * target_s else 1
    ts, spent = [], 0.0
    while len(ts) < max_k and (len(ts) < lo or spent < target_s):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        spent += ts[-1]
    return {"ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3, "k": len(ts)}


def faster_round(a, b):
    """Of two rounds' results of one measurement, the one of the lower median (an error or a
    missing time loses), with every round's median in "rounds_ms"."""
    rounds = a.get("rounds_ms", [a["ms"]]) + ([b["ms"]] if "ms" in b else [])
    best = b if "ms" in b and b["ms"] < a["ms"] else a
    return dict(best, rounds_ms=rounds)


def short_err(e, limit=300):
    s = "%s: %s" % (type(e).__name__, e)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# helpers built from C++ (bench/build.sh)


def ensure_built(force=False):
    srcs = [HERE / "onednn_bench.cpp", HERE / "peak.cpp", HERE / "build.sh"]
    outs = [BUILD / "onednn_bench", BUILD / "peak", BUILD / "onednn_info.json"]
    newest_src = max(p.stat().st_mtime for p in srcs)
    if not force and all(p.exists() and p.stat().st_mtime >= newest_src for p in outs):
        return
    print("bench: building helpers (bench/build.sh) ...", file=sys.stderr, flush=True)
    env = dict(os.environ)
    env.setdefault("PYTHON", sys.executable)
    subprocess.run(["bash", str(HERE / "build.sh")], check=True, env=env)


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def onednn_info():
    try:
        return json.loads((BUILD / "onednn_info.json").read_text())
    except Exception:
        return {}


def thread_env(n, runtime):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(n)
    env.pop("ONEDNN_VERBOSE", None)
    prefix = []
    # TBB / SYCL builds do not read OMP_NUM_THREADS: restrict the CPU set instead.
    if runtime not in ("omp", "seq") and shutil_which("taskset"):
        prefix = ["taskset", "-c", "0-%d" % (n - 1)]
    return env, prefix


def shutil_which(cmd):
    import shutil

    return shutil.which(cmd)


def run_peak(threads, quick=False, memory=False):
    """bench/build/peak per thread count: FMA GFLOP/s, or with `memory` read GB/s (peak -m)."""
    r = subprocess.run(
        [str(BUILD / "peak")] + (["-q"] if quick else []) + (["-m"] if memory else [])
        + [str(t) for t in threads],
        capture_output=True, text=True, check=True,
    )
    key = "read_gbps" if memory else "gflops"
    return {d["threads"]: d[key] for d in json_lines(r.stdout)}


def probe_cores(n):
    """n threads' FMA GFLOP/s right now (peak -q: about 0.3 s)."""
    return run_peak([n], quick=True)[n]


MEM_PROBE_BYTES = 64 << 20  # each thread's buffer in peak -m (bench/peak.cpp)


def probe_memory(n):
    """n threads' read GB/s streaming their own 64 MB now (peak -m: about 0.15 s)."""
    return run_peak([n], memory=True)[n]


def l3_bytes():
    """The L3's size as tbex's cost model reads it (schedules/calibrate.h: sysfs, else
    sysconf); 0 where it does not tell or tbex is not importable."""
    try:
        from tbex import _C
    except ImportError:
        return 0
    return int(_C.host_cache(3)[0])


def memory_probe_reaches_memory(l3):
    """Whether the memory probe's buffer (64 MB a thread) is at least twice the last-level
    cache, so that its stream reads the memory path and not that cache. On an Intel guest with a
    260 MB L3 (shared with the host's other guests) one idle thread's probe read 14-25 GB/s from
    one call to the next: as a reference it flagged 52 of 60 one-thread rows. `l3`: bytes, 0 for
    unknown (not taken for a small cache)."""
    return 0 < 2 * l3 <= MEM_PROBE_BYTES


MEM_REF_FILE = BUILD / "mem_ref.json"


def measure_memory(threads, tries=3, store=None):
    """The memory path's reference per thread count: the best of `tries` probes now and of the
    best readings earlier runs on this machine kept in `store` (bench/build/mem_ref.json, keyed
    by machine_label): a whole run can fall in a slow phase (the seed dW read 13-14 ms and
    19-21 ms in runs minutes apart, the probe 14-15 and 9.7 GB/s)."""
    store = Path(store or MEM_REF_FILE)
    try:
        kept = json.loads(store.read_text())
    except (OSError, ValueError):
        kept = {}
    mine = {int(k): v for k, v in kept.get(machine_label(), {}).items()}
    ref = {n: max([probe_memory(n) for _ in range(tries)] + [mine.get(n, 0.0)])
           for n in sorted(set(threads))}
    mine.update(ref)
    kept[machine_label()] = {str(k): v for k, v in sorted(mine.items())}
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(kept, indent=1))
    except OSError as e:  # a read-only or full disk: this run's reference only
        print("bench: cannot keep the memory reference in %s: %s" % (store, e), file=sys.stderr)
    return ref


def measure_peak(threads, tries=6):
    """FP32 FMA peak per thread count -> ({n: GFLOP/s used as reference}, {n: measured}).
    On a shared (virtualised) host the second core is not always ours: n threads should give
    n times the 1-thread figure, so re-measure (best of up to `tries`) while they fall short of
    90% of that; if they still do, the reference is n x the 1-thread peak."""
    counts = sorted(set(threads) | {1})
    best = {}
    for i in range(tries):
        for n, g in run_peak(counts).items():
            best[n] = max(best.get(n, 0.0), g)
        if all(best[n] >= 0.9 * n * best[1] for n in counts):
            break
        time.sleep(1.0)
    ref = {n: max(best[n], n * best[1]) if best[n] < 0.9 * n * best[1] else best[n]
           for n in threads}
    return ref, {n: best[n] for n in threads}


class Availability:
    """Other processes on this (shared, 2-core) machine skew multi-thread timings badly: with n
    threads on n cores, one busy core stalls every barrier. Around each measurement this reads
    /proc/stat (all CPU time) and os.times() (ours and our children's): the difference is the
    CPU time others used. Before a measurement it waits (up to max_wait s per measurement and
    budget s per run) until others leave our n cores free; with the result it stores
    "others" (cores others used meanwhile) and "avail" = min(1, (ncpu - others) / n).

    /proc/stat cannot see the host: a KVM guest's two vCPUs were at times placed on the two SMT
    threads of one physical core for minutes (the 2-thread FMA peak read 96 GFLOP/s, the
    1-thread one 96; a dW ran as fast on 2 threads as on 1). For n threads a probe
    (`probe(n)`: n threads' FMA GFLOP/s right now, bench/peak.cpp -q) is compared with n times
    the 1-thread peak `peak1`: before a measurement it waits for full cores like for free ones,
    and "cores" (the smaller share of the probes before and after) caps "avail". One thread is
    probed too: its core's SMT sibling can run another guest's thread just the same.

    The FMA probe cannot see a neighbour that shares only the memory path (or a core's caches
    and load ports): on a Zen 3 guest d dW (1x1x1) read 8-10 ms in some processes and 5.7 in
    others minutes apart, the FMA probe whole in both. A memory probe (`mem_probe(n)`: n
    threads' read GB/s, peak -m) before and after, against the run's reference `mem_ref[n]`,
    gives "mem": the smaller reading over MEM_FULL x the reference (capped at 1), which caps
    "avail" too. The reference is the best reading on this machine (measure_memory keeps
    earlier runs'), raised by any better reading of this run."""

    OK = 0.9  # results with a lower avail are flagged "!"
    WAIT_FOR = 0.95
    PROBE_AGE = 2.0  # seconds a probe's reading stands for the next measurement's "before"
    # A read bandwidth this share of the reference counts as the whole memory path: one thread's
    # probe varied 13.4-15.5 GB/s on an idle Zen 3 guest (9-10 GB/s in its slow phases, 8-9
    # with a streaming copy on the other vCPU).
    MEM_FULL = 0.85

    def __init__(self, enabled=True, max_wait=15.0, budget=180.0, probe=None, peak1=None,
                 mem_probe=None, mem_ref=None):
        self.enabled = enabled and os.path.exists("/proc/stat")
        self.ncpu = os.cpu_count() or 1
        self.max_wait = max_wait
        self.budget = budget
        self.waited = 0.0
        self.tck = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.probe = probe
        self.peak1 = peak1
        self.last = {}  # (kind, n) -> (time, share) of the last probe
        self.mem_probe = mem_probe
        self.mem_ref = mem_ref or {}

    def sample(self):
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        busy = (sum(v) - v[3] - v[4]) / self.tck  # all but idle and iowait (steal counts)
        t = os.times()
        ours = t.user + t.system + t.children_user + t.children_system
        return busy, ours, time.perf_counter()

    def others(self, a, b):
        dt = b[2] - a[2]
        if dt <= 0:
            return 0.0
        return max(0.0, ((b[0] - a[0]) - (b[1] - a[1])) / dt)

    def avail(self, n, others):
        return min(1.0, (self.ncpu - others) / max(1, n))

    def watch_cores(self, peaks, measured):
        """Probes the cores around every measurement from now on (peak -q), against
        the 1-thread peak of measure_peak's (peaks, measured)."""
        self.probe = probe_cores
        # With --threads 2 only, the reference is 2 x the 1-thread peak or better.
        self.peak1 = measured.get(1) or peaks[max(peaks)] / max(peaks)

    def cores(self, n, fresh=False):
        """The share of n full cores the host gives now: n threads' FMA rate over n x the
        1-thread peak (1.0 without a probe). A reading younger than PROBE_AGE s is reused
        unless `fresh`."""
        if self.probe is None or not self.peak1:
            return 1.0
        return self._share("cores", n, fresh, lambda: self.probe(n) / (n * self.peak1))

    def single_core(self, fn):
        """fn() (a compile: one thread) -> (its result, the smaller share of a full core and of
        the memory path that one thread's probes before and after it read; None when not
        probing). Compiles slowed with the host: in run o the stem's and g's dX took 1.25-1.47 s
        (0.6-0.8 in quiet runs) while the memory probe read 64-72% of its reference."""
        if not self.enabled or self.probe is None:
            return fn(), None
        before = min(self.cores(1), self.memory(1))
        res = fn()
        return res, min(before, self.cores(1, fresh=True), self.memory(1, fresh=True))

    def watch_memory(self, ref):
        """Probes the memory path around every measurement from now on (peak -m), against
        `ref` ({threads: GB/s}, measure_memory's)."""
        self.mem_probe = probe_memory
        self.mem_ref = ref

    def memory(self, n, fresh=False):
        """The share of the memory path n threads get now (1.0 without a probe or reference)."""
        if self.mem_probe is None or not self.mem_ref.get(n):
            return 1.0

        def read():
            # The reference is the best reading of the run so far: its start can fall in a
            # slow phase (one thread's reference read 9.3 GB/s, 13.4-15.5 minutes later).
            gbps = self.mem_probe(n)
            self.mem_ref[n] = max(self.mem_ref[n], gbps)
            return gbps / (self.MEM_FULL * self.mem_ref[n])

        return self._share("mem", n, fresh, read)

    def _share(self, kind, n, fresh, read):
        t, share = self.last.get((kind, n), (-1e9, 1.0))
        if fresh or time.perf_counter() - t > self.PROBE_AGE:
            share = min(1.0, read())
            self.last[(kind, n)] = (time.perf_counter(), share)
        return share

    def wait_free(self, n):
        """Waits (bounded) until others leave n cores free and the host gives n full cores."""
        if not self.enabled:
            return
        t0 = time.perf_counter()
        while True:
            a = self.sample()
            time.sleep(0.25)
            o = self.others(a, self.sample())
            spent = time.perf_counter() - t0
            if spent >= self.max_wait or self.waited + spent >= self.budget:
                break
            if self.avail(n, o) >= self.WAIT_FOR:
                if self.cores(n, fresh=spent > 0.3) >= self.OK:
                    break
                time.sleep(0.75)  # a placement lasts minutes: probe about once a second
        self.waited += time.perf_counter() - t0

    def measure(self, n, fn):
        if not self.enabled:
            return fn()
        self.wait_free(n)
        before, mem_before = self.cores(n), self.memory(n)
        a = self.sample()
        res = fn()
        o = self.others(a, self.sample())
        cores = min(before, self.cores(n, fresh=True))
        mem = min(mem_before, self.memory(n, fresh=True))
        d = res[0] if isinstance(res, tuple) else res
        if isinstance(d, dict):
            d["others"] = round(o, 3)
            d["avail"] = round(min(self.avail(n, o), cores, mem), 3)
            if self.probe is not None:
                d["cores"] = round(cores, 3)
            if self.mem_probe is not None:
                d["mem"] = round(mem, 3)
        return res


def watched_availability(threads, enabled=True, budget=180.0):
    """The probes every driver runs its measurements under: waits for free cores, measures the
    FMA peak per thread count and the memory path's reference, and watches both from then on.
    Returns (availability, peaks, peaks_measured, mem_ref) (mem_ref {} when not probing)."""
    avail = Availability(enabled=enabled, budget=budget)
    avail.wait_free(max(threads))
    peaks, peaks_measured = measure_peak(threads)
    avail.watch_cores(peaks, peaks_measured)
    mem_ref = {}
    if avail.enabled:
        l3 = l3_bytes()
        if memory_probe_reaches_memory(l3):
            mem_ref = measure_memory(threads)
            avail.watch_memory(mem_ref)
        else:
            print("bench: the memory path is not watched: the probe's %d MB per thread would "
                  "read the last-level cache (%s)" % (
                      MEM_PROBE_BYTES >> 20, "%d MB" % (l3 >> 20) if l3 else "size unknown"),
                  file=sys.stderr)
    return avail, peaks, peaks_measured, mem_ref


def flagged(d, key="avail"):
    """A measurement taken while others held the cores or the memory path (Availability);
    key "compile_avail": tbex's compile in such minutes (Availability.single_core)."""
    return isinstance(d, dict) and d.get(key) is not None and d[key] < Availability.OK


def run_onednn(w, pass_, dtype, threads, target_s, runtime):
    args = {
        "pass": pass_, "dtype": dtype, "N": w["N"], "Cin": w["Cin"], "D": w["D"], "H": w["H"],
        "W": w["W"], "Cout": w["Cout"], "Kd": w["Kd"], "Kh": w["Kh"], "Kw": w["Kw"],
        "sd": w["sd"], "sh": w["sh"], "sw": w["sw"],
        "pf": w["pad_front"], "pb": w["pad_back"], "pt": w["pad_top"],
        "pbot": w["pad_bottom"], "pl": w["pad_left"], "pr": w["pad_right"],
        "dd": w["dd"], "dh": w["dh"], "dw": w["dw"], "groups": w["groups"],
        "min_time": target_s, "min_iters": 3, "max_iters": 50, "warmup_time": WARMUP_S,
    }
    env, prefix = thread_env(threads, runtime)
    cmd = prefix + [str(BUILD / "onednn_bench")] + ["%s=%s" % kv for kv in args.items()]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    lines = [d for d in json_lines(r.stdout) if d.get("impl") == "onednn"]
    if not lines:
        return {"error": "no output (rc=%d): %s" % (r.returncode, (r.stderr or r.stdout)[-300:])}
    return lines[-1]


# --------------------------------------------------------------------------------------------
# PyTorch


def torch_dtype(dtype):
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]


def to_torch(a, dtype):
    import torch

    # ml_dtypes.bfloat16 has no torch.from_numpy path: go through (exact) float32.
    return torch.from_numpy(np.ascontiguousarray(a.astype(np.float32))).to(torch_dtype(dtype))


def run_torch(w, pass_, dtype, threads, data, target_s):
    """Returns (timing dict or error dict, result as float32 numpy in NCDHW / OIDHW or None)."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    x = to_torch(data.x, dtype)
    dy = to_torch(data.dy, dtype)
    wt = to_torch(data.w, dtype)
    pads = (w["pad_front"], w["pad_back"], w["pad_top"], w["pad_bottom"],
            w["pad_left"], w["pad_right"])
    sym = pads[0] == pads[1] and pads[2] == pads[3] and pads[4] == pads[5]
    stride = [w["sd"], w["sh"], w["sw"]]
    dil = [w["dd"], w["dh"], w["dw"]]
    g = w["groups"]
    padding = [pads[0], pads[2], pads[4]] if sym else [0, 0, 0]
    fpad = (pads[4], pads[5], pads[2], pads[3], pads[0], pads[1])  # F.pad order: W, H, D
    D, H, W = w["D"], w["H"], w["W"]
    cb = torch.ops.aten.convolution_backward
    note = ""

    if pass_ == "dw":
        def fn():
            xi = x if sym else F.pad(x, fpad)
            return cb(dy, xi, wt, None, stride, padding, dil, False, [0, 0, 0], g,
                      [False, True, False])[1]
        if not sym:
            note = "incl. F.pad of x (asymmetric padding)"
    else:
        xp = x if sym else F.pad(x, fpad)  # only its shape matters (the forward's input)

        def fn():
            gx = cb(dy, xp, wt, None, stride, padding, dil, False, [0, 0, 0], g,
                    [True, False, False])[0]
            if not sym:
                gx = gx[:, :, pads[0]:pads[0] + D, pads[2]:pads[2] + H,
                        pads[4]:pads[4] + W].contiguous()
            return gx
        if not sym:
            note = "padded dX, incl. crop (asymmetric padding)"

    with torch.inference_mode():
        try:
            res = fn()
        except Exception as e:  # e.g. a dtype torch's CPU backend does not support
            return {"unsupported": True, "error": short_err(e)}, None
        t = time_fn(fn, target_s)
    t["note"] = note
    t["out_dtype"] = str(res.dtype).replace("torch.", "")
    return t, res.float().numpy()


# --------------------------------------------------------------------------------------------
# tbex


_TBEX = {"mod": None, "err": None, "tried": False}


def import_tbex():
    if _TBEX["tried"]:
        return _TBEX["mod"], _TBEX["err"]
    _TBEX["tried"] = True
    try:
        import tbex  # noqa: F401
        from tbex import dsl, layout, tvm  # noqa: F401
        _TBEX["mod"] = tbex
    except Exception as e:
        first = short_err(e)
        # A build in the source tree (python/tbex with its _C extension) also works.
        src = str(REPO / "python")
        if src not in sys.path and (REPO / "python" / "tbex").is_dir():
            sys.path.insert(0, src)
            for m in [m for m in sys.modules if m == "tbex" or m.startswith("tbex.")]:
                del sys.modules[m]
            try:
                import tbex  # noqa: F401
                from tbex import dsl, layout, tvm  # noqa: F401
                _TBEX["mod"] = tbex
            except Exception:
                _TBEX["err"] = first
        else:
            _TBEX["err"] = first
    return _TBEX["mod"], _TBEX["err"]


def tbex_shape(t):
    return tuple(int(s.value if hasattr(s, "value") else s) for s in t.shape)


def aligned(a):
    """A copy of ``a`` starting on a 64-byte line, as torch's and oneDNN's buffers do: numpy's
    start 16 bytes into one as often as not, which alone moved a kernel's time up to 1.5x
    (bench/RESULTS.md, eighth session on Emerald Rapids with AMX)."""
    from tbex import layout
    b = layout.empty(a.shape, a.dtype)
    b[...] = a
    return b


class TbexCase:
    """One compiled tbex kernel (per workload, pass, dtype) plus its inputs in TBE layouts."""

    def __init__(self, w, pass_, dtype, data, schedule="auto", variant=""):
        import tbex
        from tbex import dsl, layout, tvm

        self.tbex = tbex
        g = w["groups"]
        Cin, Cout = w["Cin"], w["Cout"]
        tdt = TBEX_DTYPES[dtype]
        pads = [w["pad_front"], w["pad_back"], w["pad_top"], w["pad_bottom"],
                w["pad_left"], w["pad_right"]]
        self.groups = g
        self.pass_ = pass_
        self.dtype = dtype
        dy6 = layout.ncdhw_to_6hd(data.dy)
        dy_ph = tvm.placeholder(dy6.shape, name="dy", dtype=tdt)
        if pass_ == "dw":
            x6 = layout.ncdhw_to_6hd(data.x)
            x_ph = tvm.placeholder(x6.shape, name="x", dtype=tdt)
            para = {
                "strides": [w["sd"], w["sh"], w["sw"]],
                "pads": pads,
                "dilations": [1, w["dd"], 1, w["dh"], w["dw"]],  # N, D, C, H, W
                "res_dtype": "float32",
                "groups": g,
            }
            filter_size = [Cout, w["Kd"], Cin // g, w["Kh"], w["Kw"]]
            res = dsl.conv3d_backprop_filter(x_ph, dy_ph, filter_size, para)
            tensors = [x_ph, dy_ph, res]
            self.inputs = (aligned(x6), aligned(dy6))
        else:
            wshape = [Cout, Cin // g, w["Kd"], w["Kh"], w["Kw"]]
            fz = layout.oidhw_to_fz3d(data.w, g)
            f_ph = tvm.placeholder(tuple(layout.shape_fz3d(wshape, g)), name="filter", dtype=tdt)
            para = {
                "strides": [1, w["sd"], w["sh"], w["sw"], 1],  # N, D, H, W, C
                "pads": pads,
                "dilations": [1, w["dd"], w["dh"], w["dw"], 1],
                "res_dtype": "float32",
                "groups": g,
            }
            res = dsl.conv3d_backprop_input(
                f_ph, dy_ph, filter_size=wshape,
                input_size=[w["N"], w["D"], w["H"], w["W"], Cin], para_dict=para)
            tensors = [f_ph, dy_ph, res]
            self.inputs = (aligned(fz), aligned(dy6))
        t0 = time.perf_counter()
        sch = dsl.auto_schedule(res, schedule=schedule, variant=variant)
        self.kernel = dsl.build(sch, {"name": "bench", "tensor_list": tensors})
        self.problem = res.problem  # what tbex.aot.emit takes (bench_profile.py)
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        try:
            self.schedule = str(self.kernel.schedule)
        except Exception:
            self.schedule = ""
        self.out = layout.empty(tbex_shape(res), np.float32)
        self.layout = layout

    def run(self):
        self.kernel(*self.inputs, out=self.out)

    def time(self, threads, target_s):
        self.tbex.set_num_threads(threads)
        # The kernel planned for this thread count is compiled on its first run (the case was
        # compiled for the pool's default): outside the timing, as oneDNN's primitive creation
        # is. Inside, it made the warm-up slow, so time_fn took 3 runs right after a compile.
        self.run()
        return time_fn(self.run, target_s)

    def rel_err(self, ref):
        """Max abs difference to the reference (float32 NCDHW dX / OIDHW dW) over max |ref|,
        both in tbex's layout."""
        if ref is None:
            return None
        if self.pass_ == "dw":
            r = self.layout.oidhw_to_fz3d(np.ascontiguousarray(ref, np.float32), self.groups)
        else:
            r = self.layout.ncdhw_to_6hd(np.ascontiguousarray(ref, np.float32))
        a = self.out.reshape(-1)
        r = np.asarray(r, np.float32).reshape(-1)
        if a.size != r.size:
            return float("nan")
        scale = float(np.max(np.abs(r))) or 1.0
        return float(np.max(np.abs(a - r))) / scale


# --------------------------------------------------------------------------------------------
# report


def cpuinfo():
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    info = {}
    try:
        for line in open("/proc/cpuinfo"):
            if not line.strip():
                break
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except OSError:
        pass
    return info


def cpu_model():
    return cpuinfo().get("model name") or platform.processor() or "unknown"


ISA_FLAGS = ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
             "amx_bf16"]


def cpu_flags():
    f = cpuinfo().get("flags", "").split()
    return " ".join(k for k in ISA_FLAGS if k in f)


def amd_generation(family, model):
    """AMD's core generation from the CPUID family/model (what the model name "AMD EPYC" of a
    VM hides); None when unknown."""
    if family == 26:
        return "Zen 5"
    if family == 25:
        return "Zen 4" if model in range(0x10, 0x20) or model in range(0x60, 0x80) or \
            model in range(0xA0, 0xB0) else "Zen 3"
    if family == 23:
        # Zen+ is Pinnacle Ridge (8) and Picasso (0x18); the rest below 0x30 Zen (Naples: 1).
        return "Zen 2" if model >= 0x30 else "Zen+" if model in (0x08, 0x18) else "Zen"
    return None


def machine_label():
    """The key of this machine's part of RESULTS.md: CPU model, generation, ISA, cores (not the
    measured peak, which varies from run to run)."""
    info = cpuinfo()
    model = cpu_model()
    try:
        fam, mod = int(info.get("cpu family", "")), int(info.get("model", ""))
    except ValueError:
        fam = mod = None
    gen = amd_generation(fam, mod) if "AMD" in info.get("vendor_id", "") and fam else None
    where = "x86 family %d model %d" % (fam, mod) if fam is not None else platform.machine()
    return "%s, %s(%s); %s; %d cores" % (model, gen + " " if gen else "", where, cpu_flags(),
                                          os.cpu_count() or 0)


def pkg_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "n/a"


def machine_line(dinfo, tbex_mod, tbex_err):
    import torch

    if tbex_mod is not None:
        tv = getattr(tbex_mod, "__version__", None) or pkg_version("tbex")
    else:
        tv = "not importable"
    hv = pkg_version("halide")
    if hv == "n/a":
        try:
            import halide

            hv = getattr(halide, "__version__", "n/a")
        except Exception:
            pass
    load = ""
    try:
        load = open("/proc/loadavg").read().split()[0]
    except OSError:
        pass
    return (
        "CPU: %s (%s), %d logical cores; %s | tbex %s | Halide %s | oneDNN %s (%s runtime, isa %s) "
        "| torch %s (bundled oneDNN %s) | numpy %s | Python %s | load avg at start %s"
        % (cpu_model(), cpu_flags(), os.cpu_count() or 0, platform.platform(), tv, hv,
           dinfo.get("onednn_version", "?"), dinfo.get("cpu_runtime", "?"), dinfo.get("isa", "?"),
           torch.__version__, torch_onednn_version(), np.__version__,
           platform.python_version(), load)
    )


def torch_onednn_version():
    try:
        import torch

        s = torch.__config__.show()
        for line in s.splitlines():
            if "MKL-DNN" in line or "oneDNN" in line:
                import re

                m = re.search(r"v(\d+\.\d+(\.\d+)?)", line)
                if m:
                    return m.group(1)
    except Exception:
        pass
    return "?"


def fmt(v, nd=2):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if v != v:  # nan
        return "nan"
    if abs(v) >= 1000:
        return "%.0f" % v
    if abs(v) >= 100:
        return "%.1f" % v
    if abs(v) < 1:
        return "%.3f" % v
    return ("%." + str(nd) + "f") % v


COLUMNS = [
    "workload", "pass", "dtype", "thr", "GFLOP", "tbex ms", "tbex GF/s", "tbex %pk",
    "oneDNN ms", "+reorder ms", "oneDNN GF/s (%pk)", "torch ms", "torch GF/s (%pk)",
    "oneDNN/tbex", "torch/tbex", "tbex compile ms", "tbex err", "tbex schedule", "oneDNN impl",
]


STAT = {"use": "median"}  # which statistic the table shows: median or min of the k runs
NOISY = 1.3  # a median this much above the min is flagged with "~"


def pick_ms(d):
    return d["min_ms"] if STAT["use"] == "min" else d["ms"]


def ms_cell(d):
    ms = pick_ms(d)
    noisy = d.get("k", 1) and d.get("min_ms") and d["ms"] > NOISY * d["min_ms"]
    return fmt(ms) + ("~" if noisy else "") + ("!" if flagged(d) else "")


def row_cells(r, notes, f32_onednn=None):
    """One row of the main table. f32_onednn: oneDNN's f32 measurement of the same workload,
    pass and threads, the comparison for f16 inputs where oneDNN has no f16 path (issue 3)."""
    gf = r["flops"] / 1e9
    peak = r["peak"]

    def gfs(ms):
        return r["flops"] / (ms * 1e6)

    def pk(ms):
        return 100.0 * gfs(ms) / peak if peak else None

    def note(text):  # footnote, numbered once per distinct text
        if text not in notes:
            notes.append(text)
        return "[%d]" % (notes.index(text) + 1)

    cells = [r["workload"], r["pass"], r["dtype"], str(r["threads"]), fmt(gf, 3)]
    # tbex
    t = r.get("tbex")
    tb_ms = None
    if t is None:
        cells += ["-", "", ""]
    elif "error" in t:
        cells += ["ERR " + note("tbex %s %s %s: %s" % (r["workload"], r["pass"], r["dtype"],
                                                      t["error"])), "", ""]
    else:
        tb_ms = pick_ms(t)
        cells += [ms_cell(t), fmt(gfs(tb_ms), 1), fmt(pk(tb_ms), 1)]
    # oneDNN
    o = r.get("onednn")
    on_ms = None
    if o is None:
        cells += ["-", "", ""]
    elif o.get("unsupported"):
        cells += ["unsupported " + note("oneDNN %s %s (isa %s): %s" % (
            r["pass"], r["dtype"], o.get("isa", "?"), o.get("reason", ""))), "", ""]
    elif "ms" not in o:
        cells += ["ERR " + note("oneDNN %s %s %s: %s" % (r["workload"], r["pass"], r["dtype"],
                                                         o.get("error", "?"))), "", ""]
    else:
        on_ms = pick_ms(o)
        od = o.get("out_dtype", "f32")
        odn = "" if od == "f32" else " (out %s)" % od
        cells += [ms_cell(o) + odn, fmt(o.get("reorder_ms")),
                  "%s (%s)" % (fmt(gfs(on_ms), 1), fmt(pk(on_ms), 1))]
    # torch
    p = r.get("torch")
    to_ms = None
    if p is None:
        cells += ["-", ""]
    elif "skipped" in p:
        cells += ["skipped " + note("torch %s %s %s: %s" % (r["workload"], r["pass"], r["dtype"],
                                                            p["skipped"])), ""]
    elif "ms" not in p:
        cells += [("unsupported " if p.get("unsupported") else "ERR ")
                  + note("torch %s %s %s: %s" % (r["workload"], r["pass"], r["dtype"],
                                                 p.get("error", "?"))), ""]
    else:
        to_ms = pick_ms(p)
        extra = (" " + note("torch %s %s: %s" % (r["workload"], r["pass"], p["note"]))
                 if p.get("note") else "")
        cells += [ms_cell(p) + extra, "%s (%s)" % (fmt(gfs(to_ms), 1), fmt(pk(to_ms), 1))]
    if on_ms and tb_ms:
        cells.append(fmt(on_ms / tb_ms) + "x")
    elif tb_ms and o is not None and o.get("unsupported") and f32_onednn and "ms" in f32_onednn:
        cells.append(fmt(pick_ms(f32_onednn) / tb_ms) + "x " + note(
            "%s inputs vs oneDNN's f32 time (oneDNN has no %s path for this pass on this CPU)"
            % (r["dtype"], r["dtype"])))
    else:
        cells.append("")
    cells.append(fmt(to_ms / tb_ms) + "x" if (to_ms and tb_ms) else "")
    cells.append(fmt(t.get("compile_ms")) + ("!" if flagged(t, "compile_avail") else "")
                 if t and "compile_ms" in t else "")
    err = t.get("rel_err") if t else None
    cells.append("%.1e" % err if isinstance(err, float) else "")
    cells.append(t.get("schedule", "") if t else "")
    cells.append(o.get("impl_info", "") if o else "")
    return cells


def render_table(rows):
    notes = []
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    f32 = {(r["workload"], r["pass"], r["threads"]): r.get("onednn") for r in rows
           if r["dtype"] == "f32"}
    for r in rows:
        lines.append("| " + " | ".join(
            row_cells(r, notes, f32.get((r["workload"], r["pass"], r["threads"])))) + " |")
    return "\n".join(lines + footnotes(notes))


def footnotes(notes):
    return [""] + ["[%d] %s  " % (i, n) for i, n in enumerate(notes, 1)] if notes else []


HALIDE_WRONG = 1e-2  # rel. error (vs torch) above which an autoscheduled kernel is marked WRONG


def halide_columns(autos):
    cols = ["workload", "pass", "dtype", "thr", "tbex ms"]
    for a in autos:
        n = HALIDE_AUTO[a]
        cols += [n + " ms", n + " %pk", n + "/tbex", n + " compile ms"]
    return cols


def halide_cells(r, autos, notes):
    """One row of the autoscheduler table: per autoscheduler its time, % of peak, its time over
    tbex's (> 1: tbex is faster) and its compile time."""
    t = r.get("tbex") or {}
    tb_ms = pick_ms(t) if "ms" in t else None
    cells = [r["workload"], r["pass"], r["dtype"], str(r["threads"]),
             ms_cell(t) if tb_ms else "-"]
    for a in autos:
        h = r.get("halide", {}).get(a)
        if h is None:
            cells += ["-", "", "", ""]
            continue
        comp = fmt(h.get("compile_ms"))
        if "ms" not in h:
            text = "%s %s %s %s: %s" % (HALIDE_AUTO[a], r["workload"], r["pass"], r["dtype"],
                                        h.get("error") or h.get("skipped", "?"))
            mark = "skipped" if "skipped" in h else "ERR"
            cells += ["%s [%d]" % (mark, footnote(notes, text)), "", "", comp]
            continue
        ms = pick_ms(h)
        cell = ms_cell(h)
        err = h.get("rel_err")
        if isinstance(err, float) and not err <= HALIDE_WRONG:
            cell += " WRONG [%d]" % footnote(notes, "%s %s %s %s: max rel. error %.1e vs torch" % (
                HALIDE_AUTO[a], r["workload"], r["pass"], r["dtype"], err))
        pk = 100.0 * r["flops"] / (ms * 1e6) / r["peak"] if r["peak"] else None
        cells += [cell, fmt(pk, 1), fmt(ms / tb_ms) + "x" if tb_ms else "", comp]
    return cells


def footnote(notes, text):
    if text not in notes:
        notes.append(text)
    return notes.index(text) + 1


def render_halide_table(rows, autos):
    cols = halide_columns(autos)
    notes = []
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if r.get("halide"):
            lines.append("| " + " | ".join(halide_cells(r, autos, notes)) + " |")
    return "\n".join(lines + footnotes(notes))


def peak_text(peaks, measured):
    out = []
    for n, g in sorted(peaks.items()):
        s = "%d thread%s: %.1f GFLOP/s" % (n, "" if n == 1 else "s", g)
        if measured.get(n) is not None and abs(measured[n] - g) > 0.5:
            s += " (%d x the 1-thread peak; measured only %.1f: cores were busy)" % (n, measured[n])
        out.append(s)
    return ", ".join(out)


def count_flagged(rows):
    n = 0
    for r in rows:
        ds = [r.get(k) for k in ("tbex", "onednn", "torch")] + list(r.get("halide", {}).values())
        n += sum(1 for d in ds if flagged(d))
    return n


def rerender(src, out):
    """RESULTS.md's main part again from a run's raw results (bench/build/results.json): the
    command, machine and times are the run's own; the date line says when it was rendered."""
    d = json.loads(Path(src).read_text())
    rows = d["rows"]
    autos = [a for a in HALIDE_AUTO if any(a in (r.get("halide") or {}) for r in rows)]
    auto_dtypes = sorted({r["dtype"] for r in rows if r.get("halide")})
    peaks = {int(k): v for k, v in d["peaks"].items()}
    measured = {int(k): v for k, v in d["peaks_measured"].items()}
    write_results(out, d["command"], d["machine"], peak_text(peaks, measured),
                  rows, d.get("elapsed_s", 0.0), None, d.get("waited_s", 0.0), autos,
                  auto_dtypes, rendered=d.get("date", "?"), label=d.get("machine_label"),
                  rounds=d.get("rounds", 1), warmup_s=d.get("warmup_s", 0.0))
    print("wrote %s from %s" % (out, src))


MAIN_SECTION = "## bench.py: tbex vs oneDNN vs PyTorch"


def write_results(path, argv, machine, peak_s, rows, elapsed, tbex_err, waited=0.0, autos=(),
                  auto_dtypes=(), rendered=None, label=None, rounds=1, warmup_s=0.0):
    """The run's tables as MAIN_SECTION of machine `label`'s part of `path` (default: this
    machine's). rendered: the run's date when the table is rendered again from raw results
    (--from-json). warmup_s: the run's --warmup-sec (0: runs from before it, one warm-up run)."""
    text = [
        MAIN_SECTION,
        "",
        "Command: `%s`  " % " ".join(shlex.quote(a) for a in argv),
        ("Date: %s; run took %.0f s  " % (time.strftime("%Y-%m-%d %H:%M:%S %Z"), elapsed)
         if not rendered else "Date: %s; run took %.0f s (table rendered again %s from its raw "
         "results)  " % (rendered, elapsed, time.strftime("%Y-%m-%d %H:%M:%S %Z"))),
        "Machine: %s  " % machine,
        "Measured FP32 FMA peak (bench/peak.cpp): %s  " % peak_s,
        "Core availability: waited %.0f s for free cores; %d measurement(s) flagged `!`"
        % (waited, count_flagged(rows)),
        "",
    ]
    if tbex_err:
        text += ["tbex was not timed: %s" % tbex_err, ""]
    text += [
        "Times are the %s (ms) of k runs after %s%s; `~` marks a median more than "
        "%.1fx the best run (noisy); `!` marks a measurement during which other processes used "
        "so much CPU that less than %d%% of the cores it needed were free, or the host gave "
        "its threads less than that share of their cores (an FMA probe before and after, "
        "against the 1-thread peak: vCPUs placed on one physical core) or of the memory path "
        "(a read-bandwidth probe before and after, against the best reading on this machine: a "
        "neighbour on the memory path or on the core's caches); unreliable. See "
        "bench/README.md for the columns." % (
            "median" if STAT["use"] == "median" else "minimum (best)",
            ("untimed warm-up runs for %.1f s" % warmup_s) if warmup_s > 0 else "a warm-up run",
            (", oneDNN and tbex each timed in %d rounds, alternately, the faster median kept "
             "(PyTorch once)" % rounds) if rounds > 1 else "",
            NOISY, int(100 * Availability.OK)),
        "",
        render_table(rows),
        "",
    ]
    if autos:
        text += [
            "### Halide's autoschedulers",
            "",
            "tbex's algorithms scheduled by Halide's own autoschedulers instead of tbex's schedules "
            "(`dsl.auto_schedule(res, schedule=\"halide_<name>\")`, parallelism = tbex's thread "
            "count at compile time), timed like tbex%s. `<name>/tbex` = its time / tbex's "
            "(> 1: tbex is faster); `compile ms` = auto_schedule + build, autoscheduling included."
            % ("" if set(auto_dtypes) >= {r["dtype"] for r in rows}
               else " (%s inputs only)" % ", ".join(auto_dtypes)),
            "",
            render_halide_table(rows, autos),
            "",
        ]
    write_section(path, MAIN_SECTION, "\n".join(text), label)


# --------------------------------------------------------------------------------------------
# main


PART = "# Machine: "
RESULTS_HEAD = """# tbex benchmark results

One part per machine the benchmarks ran on (`# Machine: CPU model, generation, ISA, cores`).
The scripts in bench/ replace their own `## ` section in the part of the machine they run on and
leave every other machine's part as it is (bench/README.md says which script writes which
section). Numbers from different parts are from different CPUs: compare within a part.
"""


def _span(lines, start, stop, is_head, is_end):
    """[i, j): the first line i in lines[start:stop] with is_head, up to the next line with
    is_end (or stop); None when no line is a head."""
    i = next((k for k in range(start, stop) if is_head(lines[k])), None)
    if i is None:
        return None
    return i, next((k for k in range(i + 1, stop) if is_end(lines[k])), stop)


def _section_span(lines, section, label):
    """(the span of `label`'s part, the span of `section` in it), each None where absent."""
    part = _span(lines, 0, len(lines), lambda l: l == PART + label, lambda l: l.startswith(PART))
    if part is None:
        return None, None
    return part, _span(lines, part[0] + 1, part[1], lambda l: l == section,
                       lambda l: l.startswith("## "))


def read_section(path, section, machine=None):
    """The text of `section` in the part of RESULTS.md for `machine` (default: this machine's
    label), or None."""
    path = Path(path)
    if not path.exists():
        return None
    lines = path.read_text().splitlines()
    _, sec = _section_span(lines, section, machine or machine_label())
    return "\n".join(lines[sec[0]:sec[1]]) if sec else None


def write_section(path, section, text, machine=None):
    """Replaces `section` (a '## ' heading line; `text` starts with it) in the part of RESULTS.md
    for `machine` (default: this machine's label), or appends it to that part; a machine seen
    for the first time gets a new part at the end. Every script that writes RESULTS.md uses
    this, so no run overwrites another machine's numbers."""
    path = Path(path)
    label = machine or machine_label()
    old = path.read_text() if path.exists() else RESULTS_HEAD
    lines = old.rstrip("\n").splitlines()
    part, sec = _section_span(lines, section, label)
    if part is None:
        lines += ["", PART + label]
        part = (len(lines) - 1, len(lines))
    new = text.rstrip("\n").splitlines()
    if sec is None:
        lo = hi = part[1]
    else:
        lo, hi = sec
    before, after = lines[:lo], lines[hi:]
    while before and not before[-1].strip():
        before.pop()
    while after and not after[0].strip():
        after.pop(0)
    out = before + [""] + new + ([""] + after if after else [])
    path.write_text("\n".join(out) + "\n")


def halide_case(w, pass_, dtype, data, auto):
    """tbex's kernel scheduled by Halide's autoscheduler `auto`, or {"error": ...}."""
    try:
        return TbexCase(w, pass_, dtype, data, schedule="halide_" + auto)
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        return {"error": short_err(e)}


def time_halide(hc, auto, n, args, avail, ref, too_slow):
    """Times one autoscheduled kernel like tbex's; marks it too slow for the rest of the
    workload's pass when one call takes longer than --halide-auto-max-s."""
    if isinstance(hc, dict):
        return dict(hc)
    if auto in too_slow:
        return {"skipped": too_slow[auto], "compile_ms": hc.compile_ms}
    try:
        d = avail.measure(n, lambda: hc.time(n, args.target_sec))
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        return {"error": short_err(e), "compile_ms": hc.compile_ms}
    d["compile_ms"] = hc.compile_ms
    d["rel_err"] = hc.rel_err(ref)
    if d["min_ms"] > 1e3 * args.halide_auto_max_s:
        too_slow[auto] = "not timed further: %.1f s per call (%s, %d thr) > --halide-auto-max-s" % (
            d["min_ms"] / 1e3, hc.dtype, n)
    return d


def parse_list(s, conv=str):
    return [conv(v.strip()) for v in s.split(",") if v.strip()]


def main(argv=None):
    global WARMUP_S
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", help="comma-separated names (default: all)")
    ap.add_argument("--quick", action="store_true", help="only " + ", ".join(QUICK))
    ap.add_argument("--passes", default="dw,dx", help="dw,dx (default both)")
    ap.add_argument("--dtypes", default="f32", help="f32,f16,bf16 (default f32)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--no-tbex", action="store_true", help="skip tbex")
    ap.add_argument("--no-onednn", action="store_true", help="skip oneDNN")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    ap.add_argument("--halide-auto", default=",".join(HALIDE_AUTO),
                    help="Halide autoschedulers to time as tbex schedules (default %s; '' = none)"
                    % ",".join(HALIDE_AUTO))
    ap.add_argument("--halide-auto-dtypes", default="f32",
                    help="dtypes the autoschedulers are timed for (default f32: see README)")
    ap.add_argument("--halide-auto-max-s", type=float, default=5.0,
                    help="an autoscheduled kernel slower than this (s per call) is not timed for "
                         "the workload's further thread counts and dtypes (default 5)")
    ap.add_argument("--torch-max-s", type=float, default=5.0,
                    help="a PyTorch call slower than this (s; its f16 backward on some CPUs is a "
                         "scalar path taking minutes) is not timed for the workload's further "
                         "thread counts (default 5)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="oneDNN and tbex are each timed this many times per row, alternately; "
                         "the faster median is kept (default 2: a slow patch of a shared VM "
                         "skews one round, not both)")
    ap.add_argument("--target-sec", type=float, default=0.4,
                    help="timed seconds per measurement (k adapts to it; default 0.4)")
    ap.add_argument("--warmup-sec", type=float, default=WARMUP_S,
                    help="untimed runs first, for this long, in every timing of every library "
                         "(default %.1f: a guest's idle cores ran slow for about half a second)"
                         % WARMUP_S)
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="statistic shown in the table (default median; min = best of k)")
    ap.add_argument("--no-probe", action="store_true",
                    help="do not check / wait for free cores around each measurement")
    ap.add_argument("--wait-budget", type=float, default=180.0,
                    help="max total seconds to wait for free cores over the run (default 180)")
    ap.add_argument("--workloads-file", help="default: bench/bench_workloads.json")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"),
                    help="markdown report (default bench/RESULTS.md; '' = none)")
    ap.add_argument("--json", default=str(BUILD / "results.json"), help="raw results")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the C++ helpers")
    ap.add_argument("--from-json", metavar="FILE",
                    help="measure nothing: render --out again from the raw results of a run")
    args = ap.parse_args(argv)
    STAT["use"] = args.stat
    WARMUP_S = args.warmup_sec
    if args.from_json:
        rerender(args.from_json, args.out)
        return
    start = time.perf_counter()

    all_wl = load_workloads(args.workloads_file)
    by_name = {w["name"]: w for w in all_wl}
    names = QUICK if args.quick else [w["name"] for w in all_wl]
    if args.workloads:
        names = parse_list(args.workloads)
    bad = [n for n in names if n not in by_name]
    if bad:
        sys.exit("bench: unknown workload(s) %s; known: %s" % (bad, ", ".join(by_name)))
    passes = parse_list(args.passes)
    dtypes = parse_list(args.dtypes)
    threads = parse_list(args.threads, int)
    for d in dtypes:
        if d not in NP_DTYPES:
            sys.exit("bench: dtype must be one of f32,f16,bf16")
    for p in passes:
        if p not in ("dw", "dx"):
            sys.exit("bench: pass must be dw or dx")
    autos = parse_list(args.halide_auto)
    auto_dtypes = [d for d in parse_list(args.halide_auto_dtypes) if d in dtypes]
    if any(a not in HALIDE_AUTO for a in autos):
        sys.exit("bench: --halide-auto takes %s" % ",".join(HALIDE_AUTO))
    if args.no_tbex:
        autos = []

    ensure_built(args.rebuild)
    dinfo = onednn_info()
    runtime = dinfo.get("cpu_runtime", "omp")

    # Compile times are cold: every kernel is compiled (its disk-cache entry rewritten), never
    # loaded from an earlier run's cache (a second run read 7 ms "compiles").
    os.environ.setdefault("TBEX_ALWAYS_COMPILE", "1")
    tbex_mod, tbex_err = (None, "skipped (--no-tbex)") if args.no_tbex else import_tbex()
    if tbex_err and not args.no_tbex:
        print("bench: tbex not importable: %s" % tbex_err, file=sys.stderr)

    avail, peaks, peaks_measured, mem_ref = watched_availability(
        threads, enabled=not args.no_probe, budget=args.wait_budget)
    machine = machine_line(dinfo, tbex_mod, tbex_err)
    print(machine)
    print("FP32 FMA peak: " + peak_text(peaks, peaks_measured), flush=True)

    rows = []
    for name in names:
        w = by_name[name]
        for pass_ in passes:
            too_slow = {}  # autoscheduler -> why it is no longer timed for this workload and pass
            for dtype in dtypes:
                data = Data(w, dtype)
                torch_slow, torch_ref = None, None  # why torch is not timed further; its output
                tcase, tcase_err, compile_avail = None, None, None
                if tbex_mod is not None:
                    try:
                        tcase, compile_avail = avail.single_core(
                            lambda: TbexCase(w, pass_, dtype, data))
                    except Exception as e:
                        tcase_err = short_err(e)
                        traceback.print_exc(file=sys.stderr)
                hcases = {}
                if tbex_mod is not None and dtype in auto_dtypes:
                    for a in autos:
                        if a not in too_slow:
                            hcases[a] = halide_case(w, pass_, dtype, data, a)
                for n in threads:
                    r = {"workload": name, "pass": pass_, "dtype": dtype, "threads": n,
                         "flops": flops(w), "peak": peaks.get(n)}
                    if not args.no_onednn:
                        r["onednn"] = avail.measure(n, lambda: run_onednn(
                            w, pass_, dtype, n, args.target_sec, runtime))
                    ref = None
                    if not args.no_torch and torch_slow:
                        r["torch"], ref = {"skipped": torch_slow}, torch_ref
                    elif not args.no_torch:
                        r["torch"], ref = avail.measure(n, lambda: run_torch(
                            w, pass_, dtype, n, data, args.target_sec))
                        torch_ref = ref
                        if r["torch"].get("min_ms", 0) > 1e3 * args.torch_max_s:
                            torch_slow = ("not timed further: %.1f s per call at %d thr > "
                                          "--torch-max-s" % (r["torch"]["min_ms"] / 1e3, n))
                    if tbex_mod is not None:
                        if tcase_err:
                            r["tbex"] = {"error": tcase_err}
                        else:
                            try:
                                r["tbex"] = avail.measure(
                                    n, lambda: tcase.time(n, args.target_sec))
                                r["tbex"]["compile_ms"] = tcase.compile_ms
                                if compile_avail is not None:
                                    r["tbex"]["compile_avail"] = round(compile_avail, 3)
                                r["tbex"]["schedule"] = tcase.schedule
                                r["tbex"]["rel_err"] = tcase.rel_err(ref)
                            except Exception as e:
                                r["tbex"] = {"error": short_err(e)}
                                traceback.print_exc(file=sys.stderr)
                    for _ in range(args.rounds - 1):
                        if "ms" in r.get("onednn", {}):
                            r["onednn"] = faster_round(r["onednn"], avail.measure(n, lambda: run_onednn(
                                w, pass_, dtype, n, args.target_sec, runtime)))
                        if "ms" in r.get("tbex", {}):
                            extra = {k: r["tbex"][k] for k in ("compile_ms", "schedule", "rel_err")}
                            r["tbex"] = faster_round(r["tbex"], avail.measure(
                                n, lambda: tcase.time(n, args.target_sec)))
                            r["tbex"].update(extra)
                    if hcases:
                        r["halide"] = {}
                        for a, hc in hcases.items():
                            r["halide"][a] = time_halide(hc, a, n, args, avail, ref, too_slow)
                    rows.append(r)
                    print("  " + " | ".join(row_cells(r, [])), flush=True)
                    if hcases:
                        print("    halide: " + " | ".join(halide_cells(r, autos, [])[4:]),
                              flush=True)
                del tcase, hcases

    elapsed = time.perf_counter() - start
    table = render_table(rows)
    print()
    print(table)
    if autos:
        print()
        print(render_halide_table(rows, autos))
    print("\nelapsed %.0f s; waited %.0f s for free cores; %d measurement(s) flagged '!'"
          % (elapsed, avail.waited, count_flagged(rows)))
    cmd = [".venv/bin/python", "bench/bench.py"]
    cmd += sys.argv[1:] if argv is None else list(argv)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(
            {"command": cmd, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine,
             "machine_label": machine_label(), "peaks": peaks,
             "peaks_measured": peaks_measured, "mem_ref_gbps": mem_ref, "rows": rows,
             "rounds": args.rounds,
             "warmup_s": WARMUP_S,
             "elapsed_s": elapsed, "waited_s": avail.waited}, indent=1, default=str))
    if args.out:
        write_results(args.out, cmd, machine, peak_text(peaks, peaks_measured), rows, elapsed,
                      tbex_err, avail.waited, autos, auto_dtypes, rounds=args.rounds,
                      warmup_s=WARMUP_S)
        print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
