"""Measured tuning from Python: ``dsl.auto_schedule(res, tune=True)`` times candidates, stores
the fastest in the tuning database (TBEX_TUNING_DB), and a new process's "auto" compile of the
same problem uses that entry (its TBEX_LOG=dispatch line and Kernel.schedule / .variant); tuned
and untuned results agree within 1e-6; a corrupt database is ignored with a log line and
rewritten by the next tune; TBEX_TUNE=1 tunes the first "auto" compile. No timed assertions."""
import json
import os
import subprocess
import sys

import numpy as np

import tbex
from tbex import dsl, tvm

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tbex.__file__)))

# A small dW kernel compiled "auto"; prints its schedule, variant and result, and the first entry
# of its own process's ranking.
CHILD = r"""
import json
import numpy as np
from tbex import dsl, tvm
rng = np.random.default_rng(0)
x = (rng.integers(-8, 9, (2, 3, 2, 8, 8, 16)) / 8).astype(np.float32)
dy = (rng.integers(-8, 9, (2, 1, 3, 8, 8, 16)) / 8).astype(np.float32)
fmap = tvm.placeholder(x.shape, name="fmap", dtype="float32")
dedy = tvm.placeholder(dy.shape, name="dedy", dtype="float32")
res = dsl.conv3d_backprop_filter(fmap, dedy, [48, 3, 32, 3, 3],
                                 {"strides": [1, 1, 1], "pads": [0, 0, 1, 1, 1, 1],
                                  "dilations": [1] * 5, "res_dtype": "float32"})
sch = dsl.auto_schedule(res)
first = sch.rank()[0]
k = dsl.build(sch, {"name": "dw", "tensor_list": [fmap, dedy, res]})
print(json.dumps({"schedule": k.schedule, "variant": k.variant, "out": k(x, dy).ravel().tolist(),
                  "first": [first["schedule"], first["variant"]]}))
"""


def _run_child(db, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TBEX_TUNE", "TBEX_LOG")}
    env.update(TBEX_TUNING_DB=str(db), TBEX_LOG="dispatch,tune", TBEX_NUM_THREADS="2",
               PYTHONPATH=PKG_ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    env.update(extra)
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def _dw_res():
    fmap = tvm.placeholder((2, 3, 2, 8, 8, 16), name="fmap", dtype="float32")
    dedy = tvm.placeholder((2, 1, 3, 8, 8, 16), name="dedy", dtype="float32")
    res = dsl.conv3d_backprop_filter(fmap, dedy, [48, 3, 32, 3, 3],
                                     {"strides": [1, 1, 1], "pads": [0, 0, 1, 1, 1, 1],
                                      "dilations": [1] * 5, "res_dtype": "float32"})
    return fmap, dedy, res


def test_tune_stores_winner_and_new_process_uses_it(tmp_path, monkeypatch):
    db = tmp_path / "tuning.json"
    # The model's defaults (as in test_corrupt_database_is_ignored_then_rewritten): a calibration
    # measured under make test's load tipped this dW's near tie to a variant once.
    untuned, err = _run_child(db, TBEX_CALIBRATE="0")
    assert "no tuning database entry" in err
    assert untuned["variant"] == ""

    monkeypatch.setenv("TBEX_TUNING_DB", str(db))
    with tbex.knobs.threads(2):
        fmap, dedy, res = _dw_res()
        sch = dsl.auto_schedule(res, tune=True, max_candidates=3, seconds=0.01)
        assert sch.tuning["candidates"], sch.tuning
        timed = [c for c in sch.tuning["candidates"] if c["ms"] > 0]
        assert len(timed) >= 3
        assert (sch.schedule, sch.variant) in {(c["schedule"], c["variant"]) for c in timed}
        kernel = dsl.build(sch, {"name": "dw", "tensor_list": [fmap, dedy, res]})
        assert (kernel.schedule, kernel.variant) == (sch.schedule, sch.variant)
    stored = json.loads(db.read_text())
    assert stored["format"] == "tbex-tuning-1"
    [entry] = stored["entries"]
    assert entry["problem"] == res.problem.canonical
    assert (entry["schedule"], entry["variant"], entry["threads"]) == (sch.schedule, sch.variant, 2)

    tuned, err = _run_child(db)
    assert "tuning database hit" in err, err
    assert (tuned["schedule"], tuned["variant"]) == (sch.schedule, sch.variant)
    np.testing.assert_allclose(tuned["out"], untuned["out"], rtol=1e-6, atol=1e-6)


def test_corrupt_database_is_ignored_then_rewritten(tmp_path, monkeypatch):
    db = tmp_path / "tuning.json"
    db.write_text("not json {")
    # The model's defaults, not a calibration measured afresh beside the database (what the
    # child would run on otherwise): a measurement under load can tip a near tie to a variant.
    out, err = _run_child(db, TBEX_CALIBRATE="0")
    assert "corrupt" in err and out["variant"] == ""
    monkeypatch.setenv("TBEX_TUNING_DB", str(db))
    with tbex.knobs.threads(2):
        _, _, res = _dw_res()
        sch = dsl.auto_schedule(res, tune=True, max_candidates=2, seconds=0.01)
    assert json.loads(db.read_text())["entries"][0]["variant"] == sch.variant


def test_tune_knob_tunes_first_auto_compile(tmp_path):
    db = tmp_path / "tuning.json"
    out, err = _run_child(db, TBEX_TUNE="1")
    assert "tuning (TBEX_TUNE=1)" in err and "fastest:" in err, err
    [entry] = json.loads(db.read_text())["entries"]
    assert (out["schedule"], out["variant"]) == (entry["schedule"], entry["variant"])


def test_candidates_and_variant_choice():
    fmap, dedy, res = _dw_res()
    sch = dsl.auto_schedule(res)
    variants = sch.candidates("dw_tiled")
    assert variants[0] == "" and len(variants) >= 3
    kernel = dsl.build(dsl.auto_schedule(res, "dw_tiled", variant=variants[1]),
                       {"name": "dw", "tensor_list": [fmap, dedy, res]})
    assert (kernel.schedule, kernel.variant) == ("dw_tiled", variants[1])
    try:
        dsl.auto_schedule(res, "dw_tiled", tune=True)
    except tbex.UserError as e:
        assert e.param == "tune"
    else:
        raise AssertionError("tune with a named schedule must raise")


def test_rank_lists_the_cost_models_choice_first(tmp_path):
    """Schedule.rank() is the cost model's ranking (no compilation); a fresh process's "auto"
    compile, with no tuning database entry, uses its first entry and logs the ranking."""
    before = tbex.num_threads()
    tbex.set_num_threads(2)  # as the child
    try:
        ranked = dsl.auto_schedule(_dw_res()[2]).rank()
    finally:
        tbex.set_num_threads(before)
    assert ranked and ranked[-1]["schedule"] == "reference"
    assert all(r["predicted_ms"] > 0 and r["detail"] for r in ranked)
    assert not any(r["schedule"].startswith("halide_") for r in ranked)
    # The child's own ranking: its calibration is stored beside its (empty) database, so it
    # measures the host afresh, and a near tie may rank otherwise than this process's did.
    out, log = _run_child(tmp_path / "empty.json")
    assert (out["schedule"], out["variant"]) == tuple(out["first"])
    assert "cost model (" in log and "chose " + out["first"][0] in log
