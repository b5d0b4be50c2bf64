"""One decision for every path: after tuning a problem, the JIT kernel, tbexc (``python -m tbex
aot``) and ``dsl.build(output_dir=)`` all compile the tuned schedule and tile variant (read back
from the kernels and the AOT manifests), each saying it came from the tuning database."""
import json
import os
import subprocess
import sys

import pytest

import tbex
from tbex import _C, dsl, tvm

X, DY = (1, 4, 1, 6, 6, 16), (1, 4, 1, 6, 6, 16)
PARA = {"strides": [1, 1, 1], "pads": [1, 1, 1, 1, 1, 1], "dilations": [1, 1, 1, 1, 1],
        "res_dtype": "float32"}
FLAGS = ["--op", "conv3d_backprop_filter", "--x", "1,4,1,6,6,16:float32",
         "--out-backprop", "1,4,1,6,6,16:float32", "--filter-size", "16,3,16,3,3",
         "--strides", "1,1,1", "--pads", "1,1,1,1,1,1", "--dilations", "1,1,1,1,1",
         "--res-dtype", "float32"]
THREADS = 2


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("TBEX_TUNING_DB", str(path))
    with tbex.knobs.threads(THREADS):
        yield path


def _res():
    fmap = tvm.placeholder(X, name="fmap", dtype="float32")
    dedy = tvm.placeholder(DY, name="dedy", dtype="float32")
    return fmap, dedy, dsl.conv3d_backprop_filter(fmap, dedy, [16, 3, 16, 3, 3], PARA)


def _tbexc(out_dir, db_path, *extra):
    env = dict(os.environ, TBEX_TUNING_DB=str(db_path), TBEX_NUM_THREADS=str(THREADS))
    r = subprocess.run([sys.executable, "-m", "tbex", "aot", "--name", "dw", "--out", str(out_dir),
                        "--emit", "header", *FLAGS, *extra], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads((out_dir / "dw.manifest.json").read_text())


def _all_paths(tmp_path, db_path, sch):
    """(schedule, variant, source) of the JIT kernel, tbexc's manifest and dsl.build's manifest
    for the "auto" request (dsl.build gets `sch`)."""
    res = sch.res
    fmap, dedy = res.inputs
    jit = _C.compile(res.problem)
    sel = _C.select_schedule(res.problem)
    m_cli = _tbexc(tmp_path / "cli", db_path)
    k = dsl.build(sch, {"name": "dw", "tensor_list": [fmap, dedy, res],
                        "output_dir": str(tmp_path / "build"), "aot_emit": ["header"]})
    m_build = json.loads((tmp_path / "build" / "kernel_meta" / "dw.manifest.json").read_text())
    assert (k.schedule, k.variant) == (m_build["schedule"], m_build["variant"])
    return ((jit.schedule, jit.variant, sel["source"]),
            (m_cli["schedule"], m_cli["variant"], m_cli["selected_by"]),
            (m_build["schedule"], m_build["variant"], m_build["selected_by"]))


def test_tuned_then_jit_tbexc_and_build_agree(tmp_path, db):
    _, _, res = _res()
    sch = dsl.auto_schedule(res, tune=True, max_candidates=3, seconds=0.01)
    [entry] = json.loads(db.read_text())["entries"]
    tuned = (entry["schedule"], entry["variant"])
    assert tuned == (sch.schedule, sch.variant)
    jit, cli, build = _all_paths(tmp_path, db, sch)
    assert jit == (*tuned, "tuning database")
    assert cli == (*tuned, "tuning database")
    # dsl.build was handed the tuned schedule and variant explicitly.
    assert build == (*tuned, "requested")
    # ... and an "auto" schedule built ahead of time finds the entry too.
    auto = dsl.auto_schedule(res)
    _, _, build_auto = _all_paths(tmp_path / "auto", db, auto)
    assert build_auto == (*tuned, "tuning database")


def test_entry_other_than_the_models_pick_wins_everywhere(tmp_path, db):
    _, _, res = _res()
    ranked = dsl.auto_schedule(res).rank()
    top = (ranked[0]["schedule"], ranked[0]["variant"])
    other = next(((r["schedule"], r["variant"]) for r in ranked[1:]
                  if r["variant"] and (r["schedule"], r["variant"]) != top), None)
    assert other is not None, ranked
    # A real entry written by the tuner, then pointed at another ranked candidate.
    dsl.auto_schedule(res, tune=True, max_candidates=1, seconds=0.01)
    data = json.loads(db.read_text())
    data["entries"][0]["schedule"], data["entries"][0]["variant"] = other
    db.write_text(json.dumps(data))
    jit, cli, build = _all_paths(tmp_path, db, dsl.auto_schedule(res))
    assert jit == cli == build == (*other, "tuning database")
    # Without the entry every path falls back to the cost model's pick.
    db.unlink()
    jit, cli, build = _all_paths(tmp_path / "none", db, dsl.auto_schedule(res))
    assert jit == cli == build == (*top, "cost model")


def test_stale_entry_is_ignored_with_a_reason(tmp_path, db):
    _, _, res = _res()
    dsl.auto_schedule(res, tune=True, max_candidates=1, seconds=0.01)
    data = json.loads(db.read_text())
    data["entries"][0]["variant"] = "nt=999,kwt=999,ch=999,parts=1"
    db.write_text(json.dumps(data))
    env = dict(os.environ, TBEX_TUNING_DB=str(db), TBEX_NUM_THREADS=str(THREADS),
               TBEX_LOG="dispatch")
    r = subprocess.run([sys.executable, "-m", "tbex", "aot", "--name", "dw", "--out",
                        str(tmp_path), "--emit", "header", *FLAGS], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ignored: 'nt=999,kwt=999,ch=999,parts=1' is not a tile variant" in r.stderr
    m = json.loads((tmp_path / "dw.manifest.json").read_text())
    assert m["selected_by"] == "cost model"


def test_tbexc_variant_flag(tmp_path, db):
    _, _, res = _res()
    variants = [v for v in _C.schedule_candidates(res.problem, "dw_tiled") if v]
    assert variants
    m = _tbexc(tmp_path, db, "--schedule", "dw_tiled", "--variant", variants[-1])
    assert (m["schedule"], m["variant"], m["selected_by"]) == ("dw_tiled", variants[-1], "requested")
    r = subprocess.run([sys.executable, "-m", "tbex", "aot", "--name", "dw", "--out", str(tmp_path),
                        *FLAGS, "--variant", variants[-1]], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and "needs a named schedule" in r.stderr


def test_kernel_cache_is_bounded():
    _, _, res = _res()
    with tbex.knobs.threads(1), tbex.knobs.override("TBEX_KERNEL_CACHE_CAPACITY", 2):
        _C.clear_kernel_cache()
        before = tbex.knobs.kernel_cache_stats()
        variants = [v for v in _C.schedule_candidates(res.problem, "dw_tiled") if v][:3]
        assert len(variants) == 3
        kernels = [_C.compile(res.problem, "dw_tiled", v) for v in variants]
        after = tbex.knobs.kernel_cache_stats()
        assert after["capacity"] == 2 and after["size"] == 2
        assert after["misses"] - before["misses"] == 3
        assert after["evictions"] - before["evictions"] == 1
        # The first was evicted (least recently used): compiling it again is a miss, and the
        # kernel handed out before stays usable.
        again = _C.compile(res.problem, "dw_tiled", variants[0])
        assert again is not kernels[0]
        assert tbex.knobs.kernel_cache_stats()["misses"] - after["misses"] == 1
        assert _C.compile(res.problem, "dw_tiled", variants[2]) is kernels[2]


def test_knob_changes_are_part_of_the_kernel_key():
    """A tile override changed inside a process gives a new kernel, not the cached one."""
    _, _, res = _res()
    with tbex.knobs.threads(1):
        k1 = _C.compile(res.problem, "dw_tiled", "")
        with tbex.knobs.override("TBEX_DW_TILE", "2,1,3"):
            k2 = _C.compile(res.problem, "dw_tiled", "")
        k3 = _C.compile(res.problem, "dw_tiled", "")
    # pybind11 hands back the same Python object for the same C++ kernel.
    assert k2 is not k1
    assert k3 is k1


def test_convolution_backward_plans_share_the_cache_policy():
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 5, 6, 6)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((1, 8, 5, 6, 6)).astype(np.float32)
    args = dict(bias_sizes=[8], stride=[1, 1, 1], padding=[1, 1, 1], dilation=[1, 1, 1],
                transposed=False, output_padding=[0, 0, 0], groups=1,
                output_mask=[True, True, True])
    with tbex.knobs.threads(1):
        first = tbex.convolution_backward(gy, x, w, **args)
        s0 = tbex.knobs.plan_cache_stats()
        again = tbex.convolution_backward(gy, x, w, **args)
        s1 = tbex.knobs.plan_cache_stats()
    assert (s1["hits"] - s0["hits"], s1["misses"] - s0["misses"]) == (1, 0)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    with tbex.knobs.threads(2):
        tbex.convolution_backward(gy, x, w, **args)  # planned for another thread count
    assert tbex.knobs.plan_cache_stats()["misses"] - s1["misses"] == 1
    with tbex.knobs.override("TBEX_KERNEL_CACHE_CAPACITY", 1):
        assert tbex.knobs.plan_cache_stats()["capacity"] == 1
