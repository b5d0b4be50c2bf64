"""python -m tbex machine: the host calibration the cost model uses, where it is stored, and
TBEX_CALIBRATE=0 switching it off."""
import json
import os
import subprocess
import sys

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
