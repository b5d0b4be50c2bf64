"""python -m tbex machine: the host calibration the cost model uses, where it is stored, and
TBEX_CALIBRATE=0 switching it off."""
import json
import os
import subprocess
import sys

import pytest

from tbex import _C


def run_machine(cache_dir, *args, **env):
    e = dict(os.environ, TBEX_CACHE_DIR=str(cache_dir), **env)
    e.pop("TBEX_TUNING_DB", None)
    r = subprocess.run([sys.executable, "-m", "tbex", "machine", *args], env=e, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_machine_measures_once_and_prints_it(tmp_path):
    first = run_machine(tmp_path)
    stored = tmp_path / "machine.json"
    if "this calibration is not stored" in first:
        pytest.skip("the host ran the suite's threads on shared cores: nothing stored to read back")
    assert stored.is_file()
    assert f"stored in: {stored}" in first
    assert "measured now" in first
    doc = json.loads(stored.read_text())
    assert doc["ghz"] > 0
    assert f"{doc['ghz']:.3f} GHz" in first
    for level in ("L1", "L2", "L3", "DRAM"):
        assert level in first
    assert f"{doc['dram_run_start_cycles']:.0f} cycles beyond its bytes" in first
    if doc["avx512_512"]["small_loads_per_cycle"] > 0:
        assert f"4-byte loads {doc['avx512_512']['small_loads_per_cycle']:.2f}/cycle" in first
    # Read back, not measured again: the file is unchanged.
    second = run_machine(tmp_path)
    assert "read back" in second
    assert json.loads(stored.read_text()) == doc
    if doc["avx2_256"]["fma_per_cycle"] > 0:
        assert "(calibrated)" in second
    # --remeasure measures again and replaces the file.
    third = run_machine(tmp_path, "--remeasure")
    assert "measured now" in third
    assert json.loads(stored.read_text())["key"] == doc["key"]


def test_machine_rejects_unknown_flags(tmp_path):
    e = dict(os.environ, TBEX_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "tbex", "machine", "--bogus"], env=e,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "usage" in r.stderr
    assert not (tmp_path / "machine.json").exists()


def test_corrupt_file_is_remeasured(tmp_path):
    (tmp_path / "machine.json").write_text("not json")
    out = run_machine(tmp_path)
    assert "measured now" in out
    assert json.loads((tmp_path / "machine.json").read_text())["key"] in out


def test_cache_off_measures_without_storing(tmp_path):
    out = run_machine(tmp_path, TBEX_CACHE="0")
    assert "measured now" in out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_calibrate_off_uses_built_in_constants(tmp_path):
    out = run_machine(tmp_path, TBEX_CALIBRATE="0")
    assert "TBEX_CALIBRATE=0" in out
    assert "(built-in constants)" in out
    assert not (tmp_path / "machine.json").exists()


def test_binding_reports_the_model_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("TBEX_TUNING_DB", str(tmp_path / "tuning.json"))
    info = _C.machine()
    assert info["path"] == str(tmp_path / "machine.json")
    calibration = json.loads(info["calibration"])
    model = json.loads(info["model"])
    if model["calibrated"]:
        assert model["ghz"] == calibration["ghz"]
        width = calibration["avx512_512" if model["lanes"] >= 16 else "avx2_256"]
        assert model["fma_pipes"] == width["fma_per_cycle"]


@pytest.mark.skipif(os.cpu_count() < 2 or not hasattr(os, "sched_setaffinity"),
                    reason="needs two CPUs to pin the pool's threads onto one")
def test_threads_sharing_a_core_are_not_stored(tmp_path):
    """Every thread of the pool on one CPU (what a host does placing two vCPUs on one core's SMT
    threads): each runs at half a core, and the suite is stored only where this machine's own
    load or its SMT explains it (then measuring again would meet the same)."""
    e = dict(os.environ, TBEX_CACHE_DIR=str(tmp_path))
    e.pop("TBEX_TUNING_DB", None)
    r = subprocess.run([sys.executable, "-m", "tbex", "machine"], env=e, capture_output=True,
                       text=True, timeout=120, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    assert r.returncode == 0, r.stderr
    info = _C.machine()  # this process's own suite, for its thread count
    if json.loads(info["calibration"])["threads"] < 2:
        pytest.skip("the pool has one thread here")
    share = float(r.stdout.split("FMAs per thread with ")[1].split(": ")[1].split(" of")[0])
    assert share < 0.7, r.stdout
    smt = open("/sys/devices/system/cpu/smt/active").read().strip() == "1" \
        if os.path.exists("/sys/devices/system/cpu/smt/active") else False
    stored = tmp_path / "machine.json"
    if stored.exists():
        doc = json.loads(stored.read_text())
        assert smt or doc["other_cores"] >= 0.1, r.stdout
    else:
        assert "this calibration is not stored, the next process measures again" in r.stdout
        assert "measured now" in run_machine(tmp_path)  # the next process measures again
