"""Argument fuzzer for tbex's three entry points: the DSL ops, ``tbex.convolution_backward`` and
the aclnn C API (through ctypes).

Every generated call must either succeed (and, when it computes something small, match the
float64 oracle / PyTorch) or fail the documented way: ``tbex.UserError`` with a non-empty code in
Python, a non-zero aclnn status with a message in C. Another exception type, a wrong result, a
crash or a hang is a finding.

Calls run in a worker process that logs each case number before running it; a worker that dies
(a signal) or stops answering (a hang) names the case, and the parent restarts after it.

    python tests/fuzz/fuzz_args.py --seconds 60            # what make test runs
    python tests/fuzz/fuzz_args.py --cases 1000000 --rates 0.5,1 --first 1000000000
                                                            # the long run (docs/fuzzing.md)
    python tests/fuzz/fuzz_args.py --replay 123456          # one case, in this process
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# ------------------------------------------------------------------------------ value generators

# Per case: how often an argument is malformed (0: a valid call, checked against the oracle).
RATE = {"p": 0.1}

HUGE = [2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**64, -2**63, -2**64]


def int_like(r: random.Random, valid: int):
    """valid most of the time, else a borderline or malformed stand-in for an int."""
    if r.random() >= RATE["p"]:
        return valid
    k = r.random() * 0.45 + 0.55
    if k < 0.62:
        return r.choice([0, -1, -valid, valid + 1, valid * 2, 1])
    if k < 0.70:
        return r.choice(HUGE)
    if k < 0.76:
        return r.choice([np.int64(valid), np.int32(valid), np.uint8(valid % 256), np.array(valid)])
    return r.choice([float(valid), valid + 0.5, str(valid), None, True, False, np.float32(valid),
                     [valid], {"v": valid}, b"1", complex(valid), float("nan"), float("inf")])


def int_list(r: random.Random, valid: list):
    """A list argument: valid, or of the wrong length / type / content."""
    if r.random() >= RATE["p"]:
        return list(valid)
    k = r.random() * 0.5 + 0.5
    if k < 0.65:
        return [int_like(r, v) for v in valid]
    if k < 0.72:
        return list(valid) + [1] * r.randint(1, 3) if r.random() < 0.5 else list(valid)[: r.randint(0, len(valid))]
    if k < 0.80:
        return r.choice([tuple(valid), np.array(valid), np.array(valid, np.int32), range(len(valid)),
                         np.array(valid, np.float64), np.array(valid[0]) if valid else np.array(1)])
    if k < 0.86:
        return [r.choice(HUGE) if r.random() < 0.5 else v for v in valid]
    return r.choice([None, "1,1,1", 3, 1.5, {"a": 1}, set(valid), [None] * len(valid),
                     [[v] for v in valid], iter(valid)])


def pick(r: random.Random, valid, *others):
    return valid if r.random() >= RATE["p"] else r.choice(others)


# ------------------------------------------------------------------------------ geometries


def geometry(r: random.Random):
    """A random valid conv geometry: dims, kernel, stride, pad, dilation, groups."""
    while True:
        sp = 3
        groups = r.choice([1, 1, 1, 2, 3, 4])
        cin = groups * r.randint(1, 6)
        cout = groups * r.randint(1, 6)
        k = [r.randint(1, 3) for _ in range(sp)]
        s = [r.randint(1, 3) for _ in range(sp)]
        d = [r.randint(1, 2) for _ in range(sp)]
        p = [r.randint(0, 2) for _ in range(sp)]
        size = [r.randint(1, 7) for _ in range(sp)]
        out = [(i + 2 * pp - (kk - 1) * dd - 1) // ss + 1 for i, pp, kk, dd, ss in zip(size, p, k, d, s)]
        if min(out) >= 1:
            return dict(n=r.randint(1, 2), cin=cin, cout=cout, groups=groups, k=k, s=s, d=d, p=p,
                        size=size, out=out)


def shape_6hd(n, c, dhw):
    return (n, dhw[0], (c + 15) // 16, dhw[1], dhw[2], 16)


# ------------------------------------------------------------------------------ entry points


class Finding(Exception):
    """A call that broke the contract (not a crash: those end the worker)."""


def expect_ok_or_coded(fn):
    """Runs fn; returns its result, None for a coded UserError; raises Finding otherwise."""
    import tbex
    try:
        return fn()
    except tbex.UserError as e:
        if not e.code:
            raise Finding(f"UserError without a code: {e}")
        return None
    except Exception as e:  # noqa: BLE001 - any other type is the finding
        raise Finding(f"{type(e).__name__} instead of UserError: {e}\n{traceback.format_exc()}")


def case_dsl(r: random.Random):
    import tbex
    from tbex import dsl, tvm
    g = geometry(r)
    dtype = pick(r, r.choice(["float16", "bfloat16", "float32"]), "int8", "float64", None, 3)
    para = {}
    for key, valid in (("strides", g["s"]), ("pads", [g["p"][0], g["p"][0], g["p"][1], g["p"][1], g["p"][2], g["p"][2]])):
        if r.random() < 0.9:
            para[key] = int_list(r, valid)
    op = r.choice(["filter", "input"])
    if r.random() < RATE["p"]:
        para[r.choice(["stride", "padding", "dilation", "group", "res_type", "Strides"])] = [1, 1, 1]
    if g["groups"] > 1 or r.random() < 0.2:
        if r.random() < 0.5:
            para["groups"] = int_like(r, g["groups"])
        else:
            gd = dict(tbex._C.derive_group_dict(g["cin"], g["cout"], g["groups"]))
            if r.random() < RATE["p"] * 3:
                key = r.choice(list(gd) + ["bogus"])
                gd[key] = int_like(r, gd.get(key, 1) + r.choice([0, 1, -1]))
            para["group_dict"] = gd

    def placeholder(shape, name):
        shape = pick(r, shape, tuple(s if r.random() < 0.8 else r.choice(HUGE + [0, -1]) for s in shape),
                     shape[:-1], shape + (1,))
        return tvm.placeholder(shape, name=name, dtype=dtype)

    if op == "filter":
        if r.random() < 0.9:
            para["dilations"] = int_list(r, [1, g["d"][0], 1, g["d"][1], g["d"][2]])
        fs = int_list(r, [g["cout"], g["k"][0], g["cin"] // g["groups"], g["k"][1], g["k"][2]])

        def call():
            x = placeholder(shape_6hd(g["n"], g["cin"], g["size"]), "x")
            dy = placeholder(shape_6hd(g["n"], g["cout"], g["out"]), "dy")
            return dsl.conv3d_backprop_filter(x, dy, fs, para)
    else:
        if r.random() < 0.9:
            para["dilations"] = int_list(r, [1, g["d"][0], g["d"][1], g["d"][2], 1])
        if isinstance(para, dict) and "strides" in para and isinstance(para["strides"], list) and len(para["strides"]) == 3:
            para["strides"] = [1] + para["strides"] + [1]
        fs = int_list(r, [g["cout"], g["cin"] // g["groups"], *g["k"]])
        ins = int_list(r, [g["n"], *g["size"], g["cin"]])

        def call():
            from tbex import layout
            if g["groups"] == 1:
                fshape = tuple(layout.shape_fz3d([g["cout"], g["cin"], *g["k"]], 1))
            else:
                fshape = tuple(layout.shape_fz3d([g["cout"], g["cin"] // g["groups"], *g["k"]], g["groups"]))
            f = placeholder(fshape, "filter")
            dy = placeholder(shape_6hd(g["n"], g["cout"], g["out"]), "dy")
            return dsl.conv3d_backprop_input(f, dy, fs, ins, para)
    if r.random() < RATE["p"] / 2:
        para = r.choice([None, 1, "strides", [("strides", g["s"])], para])
    res = expect_ok_or_coded(call)
    if res is not None and not (isinstance(res, tvm.Tensor) and res.problem is not None):
        raise Finding(f"a DSL op returned {res!r}")
    return "ok" if res is not None else "error"


def _arrays(r, g, dtype):
    rng = np.random.default_rng(r.randrange(2**32))
    shp_x = (g["n"], g["cin"], *g["size"])
    shp_w = (g["cout"], g["cin"] // g["groups"], *g["k"])
    shp_y = (g["n"], g["cout"], *g["out"])
    arrs = [rng.integers(-3, 4, s).astype(dtype) for s in (shp_y, shp_x, shp_w)]
    if r.random() < 0.15:  # NaN / Inf injections
        a = arrs[r.randrange(3)]
        a.reshape(-1)[r.randrange(a.size)] = r.choice([np.nan, np.inf, -np.inf])
    if r.random() < 0.15:  # non-contiguous / negative-stride / zero-size views
        i = r.randrange(3)
        a = arrs[i]
        arrs[i] = r.choice([lambda: np.asfortranarray(a), lambda: np.flip(a, -1),
                            lambda: np.repeat(a, 2, axis=-1)[..., ::2], lambda: a[:0]])()
    return arrs


def case_conv(r: random.Random):
    import tbex
    g = geometry(r)
    dtype = r.choice([np.float32, np.float16])
    gy, x, w = _arrays(r, g, dtype)
    args = dict(
        bias_sizes=pick(r, [g["cout"]], None, [g["cout"] + 1], "x", [2**63]),
        stride=int_list(r, g["s"]), padding=int_list(r, g["p"]), dilation=int_list(r, g["d"]),
        transposed=pick(r, False, True, "False", 0, None, np.bool_(False)),
        output_padding=pick(r, [0, 0, 0], None, [1, 0, 0], "0", [0.0, 0, 0]),
        groups=int_like(r, g["groups"]),
        output_mask=pick(r, [True, True, True], [True, False, False], None, ["False"] * 3, [1, 1, 1],
                         [True] * 2, np.array([True, True, False])),
        cube_math_type=pick(r, 0, 1, 2, 3, -1, 4, 1.0, None))
    ops = [gy, x, w]
    if r.random() < RATE["p"] / 2:
        ops[r.randrange(3)] = r.choice([None, "x", 3, [1.0]])

    def call():
        return tbex.convolution_backward(*ops, args["bias_sizes"], args["stride"], args["padding"],
                                         args["dilation"], args["transposed"], args["output_padding"],
                                         args["groups"], args["output_mask"],
                                         cube_math_type=args["cube_math_type"])
    res = expect_ok_or_coded(call)
    if res is None:
        return "error"
    # Valid call: small enough to check against the float64 oracle of the defining sums.
    if (args["transposed"] is False and args["cube_math_type"] in (0, 1) and all(
            isinstance(o, np.ndarray) and o.size for o in ops)):
        sys.path.insert(0, os.path.join(REPO, "tests", "python"))
        from test_nonfinite import oracle  # float64 sums of the defining terms
        # The window as the call read it (a one-value list applies to every dim, as in torch).
        def window(v):
            vals = [int(x) for x in np.atleast_1d(np.asarray(v))]
            return vals * 3 if len(vals) == 1 else vals
        if len(window(args["padding"])) != 3:  # (head, tail) pads: not the oracle's form
            return "ok"
        ref = oracle(ops[1], ops[2], ops[0], window(args["stride"]), window(args["padding"]),
                     window(args["dilation"]), False, int(args["groups"]))
        mask = args["output_mask"]
        for i in range(3):
            if not bool(np.asarray(mask)[i]) if mask is not None else False:
                continue
            got, want = np.asarray(res[i], np.float64), ref[i]
            same_nan = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
            fin = np.isfinite(want)
            tol = 1e-5 if dtype == np.float32 else 2e-3
            if not same_nan or not np.allclose(got[fin], want[fin], rtol=tol, atol=tol * 8):
                raise Finding(f"wrong result for output {i}: max err "
                              f"{np.max(np.abs(got[fin] - want[fin])) if fin.any() else 'pattern'}")
    return "ok"


# --- aclnn through ctypes

_ACL = None


def acl():
    global _ACL
    if _ACL is None:
        import tbex
        cand = [os.path.join(REPO, "build", "cp311", "aclnn", "libtbex_aclnn.so"),
                os.path.join(os.path.dirname(tbex.__file__), "lib", "libtbex_aclnn.so")]
        path = next((p for p in cand if os.path.exists(p)), None)
        if path is None:
            return None
        L = ctypes.CDLL(path)
        P, I64, U64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64
        L.aclCreateTensor.restype = P
        L.aclCreateTensor.argtypes = [ctypes.POINTER(I64), U64, ctypes.c_int, ctypes.POINTER(I64), I64,
                                      ctypes.c_int, ctypes.POINTER(I64), U64, P]
        L.aclCreateIntArray.restype = P
        L.aclCreateIntArray.argtypes = [ctypes.POINTER(I64), U64]
        L.aclCreateBoolArray.restype = P
        L.aclCreateBoolArray.argtypes = [ctypes.POINTER(ctypes.c_bool), U64]
        for f in ("aclDestroyTensor", "aclDestroyIntArray", "aclDestroyBoolArray", "aclDestroyAclOpExecutor"):
            getattr(L, f).argtypes = [P]
        L.aclGetRecentErrMsg.restype = ctypes.c_char_p
        L.aclnnConvolutionBackwardGetWorkspaceSize.argtypes = [
            P, P, P, P, P, P, P, ctypes.c_bool, P, ctypes.c_int, P, ctypes.c_int8, P, P, P,
            ctypes.POINTER(U64), ctypes.POINTER(P)]
        L.aclnnConvolutionBackward.argtypes = [P, U64, P, P]
        _ACL = L
    return _ACL


def _i64s(vals):
    return (ctypes.c_int64 * max(1, len(vals)))(*[int(v) & 0xFFFFFFFFFFFFFFFF if v >= 2**63 else int(v) for v in vals])


def case_aclnn(r: random.Random):
    L = acl()
    if L is None:
        return "skip"
    g = geometry(r)
    dtype = r.choice([np.float32, np.float16])
    acl_dt = {np.float32: 0, np.float16: 1}[dtype]
    gy, x, w = (np.ascontiguousarray(a) for a in _arrays(r, g, dtype))
    keep = []

    def tensor(a, dims=None, dt=None, fmt=None, offset=0, null_data=False):
        dims = list(a.shape) if dims is None else dims
        keep.append(a)
        return L.aclCreateTensor(_i64s(dims), len(dims), acl_dt if dt is None else dt, None, offset,
                                 2 if fmt is None else fmt, None, 0,
                                 None if null_data else a.ctypes.data_as(ctypes.c_void_p))

    def mutate_dims(shape):
        shape = list(shape)
        if r.random() >= RATE["p"] or not shape:
            return shape
        i = r.randrange(len(shape))
        shape[i] = r.choice([0, -1, 2**31, 2**40, 2**62, shape[i] + 1])
        return shape

    def ints(vals):
        vals = [v if r.random() >= RATE["p"] else r.choice(HUGE + [0, -1, -5]) for v in vals]
        if r.random() < RATE["p"] / 2:
            vals = vals[:-1]
        return L.aclCreateIntArray(_i64s(vals), len(vals))

    t_gy = tensor(gy, mutate_dims(gy.shape), null_data=r.random() < RATE["p"] / 5)
    t_x = tensor(x, mutate_dims(x.shape))
    t_w = tensor(w, mutate_dims(w.shape), dt=pick(r, acl_dt, 3, 11, 27, -1))
    outs = [np.empty(a.shape, dtype) for a in (x, w)] + [np.empty((g["cout"],), dtype)]
    t_out = [tensor(o) for o in outs]
    mask_vals = pick(r, [True, True, True], [True, False, False], [False, True, True])
    mask = (ctypes.c_bool * 3)(*mask_vals)
    t_mask = L.aclCreateBoolArray(mask, pick(r, 3, 2, 4))
    t_bias = ints([g["cout"]])
    stride, pad, dil = ints(g["s"]), ints(g["p"]), ints(g["d"])
    opad = ints([0, 0, 0]) if r.random() >= RATE["p"] else None
    ws_size = ctypes.c_uint64(0)
    ex = ctypes.c_void_p(None)
    groups = pick(r, g["groups"], 0, -1, g["groups"] + 1, 2**31 - 1, -2**31)
    args = [t_gy, t_x, t_w, t_bias, stride, pad, dil, bool(r.random() < RATE["p"]), opad, groups,
            t_mask, pick(r, r.choice([0, 1, 2, 3]), 7, -1), t_out[0], t_out[1], t_out[2]]
    if r.random() < RATE["p"] / 2:
        i = r.choice([0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 13, 14])
        args[i] = None
    st = L.aclnnConvolutionBackwardGetWorkspaceSize(*args, ctypes.byref(ws_size), ctypes.byref(ex))
    result = "error"
    if st == 0:
        buf = (ctypes.c_char * max(1, ws_size.value))()
        st = L.aclnnConvolutionBackward(ctypes.cast(buf, ctypes.c_void_p), ws_size.value, ex, None)
        if st != 0:
            raise Finding(f"planned executor failed with {st}: {L.aclGetRecentErrMsg()}")
        result = "ok"
    elif st not in (161001, 161002):
        raise Finding(f"status {st}: {L.aclGetRecentErrMsg()}")
    elif not L.aclGetRecentErrMsg():
        raise Finding(f"status {st} without a message")
    for t in [t_gy, t_x, t_w] + t_out:
        if t:
            L.aclDestroyTensor(t)
    for a in (t_bias, stride, pad, dil, opad):
        if a:
            L.aclDestroyIntArray(a)
    if t_mask:
        L.aclDestroyBoolArray(t_mask)
    return result


ENTRY = [("dsl", case_dsl, 0.45), ("conv", case_conv, 0.35), ("aclnn", case_aclnn, 0.20)]


RATES = [0.0, 0.0, 0.05, 0.1, 0.2, 0.5]


def run_case(seed: int):
    r = random.Random(seed)
    RATE["p"] = r.choice(RATES)
    x = r.random()
    acc = 0.0
    for name, fn, w in ENTRY:
        acc += w
        if x < acc:
            return name, fn(r)
    return ENTRY[-1][0], ENTRY[-1][1](r)


# ------------------------------------------------------------------------------ worker / parent


def worker(first: int, last: int, log_path: str, rates: str, deadline: float):
    """Runs cases [first, last); writes 'START id' before each and a JSON line after."""
    import tbex  # noqa: F401 - import once, outside the timed cases
    RATES[:] = [float(x) for x in rates.split(",")]
    with open(log_path, "a", buffering=1) as log:
        for seed in range(first, last):
            if deadline and time.time() > deadline:
                break
            log.write(f"START {seed}\n")
            try:
                name, outcome = run_case(seed)
                log.write(json.dumps({"seed": seed, "entry": name, "outcome": outcome}) + "\n")
            except Finding as f:
                log.write(json.dumps({"seed": seed, "finding": str(f)[:2000]}) + "\n")
            except Exception:  # noqa: BLE001 - the generator's own bug: reported, not a crash
                log.write(json.dumps({"seed": seed, "finding": "harness: " + traceback.format_exc()[-1500:]}) + "\n")


def parent(first: int, count: int, seconds: float, per_case_timeout: float, jobs: int, log_dir: str,
           rates: str):
    os.makedirs(log_dir, exist_ok=True)
    deadline = time.time() + seconds if seconds else None
    end = first + count if count else None
    stats = {"cases": 0, "ok": 0, "error": 0, "skip": 0, "findings": [], "crashes": [], "hangs": []}
    chunk = 2000
    cursor = [first]

    def more():
        return (end is None or cursor[0] < end) and (deadline is None or time.time() < deadline)

    def spawn(i, lo, hi):
        log = os.path.join(log_dir, f"worker{i}.log")
        open(log, "w").close()
        p = subprocess.Popen([sys.executable, __file__, "--worker", str(lo), str(hi), log, rates,
                              str(deadline or 0)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return {"i": i, "p": p, "hi": hi, "log": log, "pos": 0, "last": lo, "done": lo - 1,
                "t": time.time()}

    def next_chunk(i):
        lo = cursor[0]
        hi = lo + chunk if end is None else min(lo + chunk, end)
        cursor[0] = hi
        return spawn(i, lo, hi)

    def drain(w):
        with open(w["log"]) as f:
            f.seek(w["pos"])
            data = f.read()
        # Only whole lines: a line being written is read next time.
        data = data[: data.rfind("\n") + 1]
        w["pos"] += len(data)
        for line in data.splitlines():
            if line.startswith("START "):
                w["last"] = int(line.split()[1])
                w["t"] = time.time()
                continue
            rec = json.loads(line)
            w["done"] = rec["seed"]
            stats["cases"] += 1
            if "finding" in rec:
                stats["findings"].append(rec)
            else:
                stats[rec["outcome"]] += 1

    workers = [next_chunk(i) for i in range(jobs) if more()]
    while workers:
        time.sleep(0.05)
        for w in list(workers):
            drain(w)
            rc = w["p"].poll()
            hung = rc is None and time.time() - w["t"] > per_case_timeout
            if rc is None and not hung:
                continue
            if hung:
                w["p"].kill()
                w["p"].wait()
            drain(w)
            workers.remove(w)
            failed = hung or rc != 0
            if failed and w["done"] != w["last"]:  # died inside case `last`
                stats["cases"] += 1
                if hung:
                    stats["hangs"].append(w["last"])
                else:
                    stats["crashes"].append({"seed": w["last"], "rc": rc,
                                             "signal": signal.Signals(-rc).name if rc < 0 else None,
                                             "stderr": w["p"].stderr.read()[-1500:]})
            resume = max(w["last"], w["done"]) + 1
            if failed and resume < w["hi"]:
                workers.append(spawn(w["i"], resume, w["hi"]))
            elif more():
                workers.append(next_chunk(w["i"]))
    return stats


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0, help="stop starting new cases after this long")
    ap.add_argument("--cases", type=int, default=0, help="number of cases (0: until --seconds)")
    ap.add_argument("--first", type=int, default=0, help="first case number (the seed)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=120, help="seconds one case may take")
    ap.add_argument("--log-dir", default=os.path.join(REPO, "build", "fuzz"))
    ap.add_argument("--report", help="write the summary as JSON here")
    ap.add_argument("--replay", type=int, help="run one case in this process and print it")
    ap.add_argument("--rates", default=",".join(str(x) for x in RATES),
                    help="per case, one of these is the chance that an argument is malformed "
                         "(0: a valid call, computed and checked); the long run uses 0.5,1")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        w = a.worker + ["0"] * (5 - len(a.worker))
        worker(int(w[0]), int(w[1]), w[2], w[3], float(w[4]))
        return 0
    RATES[:] = [float(x) for x in a.rates.split(",")]
    if a.replay is not None:
        print(run_case(a.replay))
        return 0
    if not a.seconds and not a.cases:
        a.seconds = 60
    t0 = time.time()
    s = parent(a.first, a.cases, a.seconds, a.timeout, a.jobs, a.log_dir, a.rates)
    s["seconds"] = round(time.time() - t0, 1)
    summary = (f"{s['cases']} cases in {s['seconds']} s: {s['ok']} ok, {s['error']} coded errors, "
               f"{s['skip']} skipped; {len(s['findings'])} findings, {len(s['crashes'])} crashes, "
               f"{len(s['hangs'])} hangs")
    print(summary)
    for f in s["findings"][:20]:
        print("finding", f["seed"], f["finding"][:500])
    for c in s["crashes"][:20]:
        print("crash", c)
    for h in s["hangs"][:20]:
        print("hang", h)
    if a.report:
        with open(a.report, "w") as f:
            json.dump(s, f, indent=1)
    return 1 if s["findings"] or s["crashes"] or s["hangs"] else 0


if __name__ == "__main__":
    sys.exit(main())
