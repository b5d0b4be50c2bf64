"""The on-disk kernel cache across processes: a second process loads instead of compiling, four
concurrent processes leave one valid entry, corrupt entries are rebuilt, TBEX_CACHE=0 writes
nothing, TBEX_ALWAYS_COMPILE=1 recompiles, no C++ compiler falls back to the in-memory JIT, an
entry a running process holds survives `python -m tbex cache prune`, `python -m tbex.cache
list|info|prune|clear`, a fresh cache links the package's prebuilt Halide runtime, and the
SHA-256 the cache uses agrees with hashlib.

Each test runs child processes on its own empty TBEX_CACHE_DIR; outcomes are read from the
child's cache counters (tbex.cache.stats()) and its TBEX_LOG=cache lines, never from timings."""
import glob
import hashlib
import json
import os
import subprocess
import sys

import pytest

import tbex
from tbex import cache

# A small dW kernel (TEST_HW: its height and width); prints the sha256 of its result and the
# process's cache counters; with TEST_HOLD set, keeps the kernel loaded until stdin closes.
CHILD = r"""
import hashlib, json, os, sys
import numpy as np
from tbex import cache, dsl
hw = int(os.environ.get("TEST_HW", "8"))
rng = np.random.default_rng(0)
x = (rng.integers(-8, 9, (1, 2, 1, hw, hw, 16)) / 8).astype(np.float32)
dy = (rng.integers(-8, 9, (1, 2, 1, hw - 2, hw - 2, 16)) / 8).astype(np.float32)
w = dsl.conv3d_backprop_filter(x, dy, [16, 1, 16, 3, 3],
                               {"strides": [1, 1, 1], "pads": [0] * 6, "dilations": [1] * 5,
                                "res_dtype": "float32"})
print(json.dumps({"sha": hashlib.sha256(np.ascontiguousarray(w).tobytes()).hexdigest(),
                  "stats": cache.stats()}), flush=True)
if os.environ.get("TEST_HOLD"):
    sys.stdin.read()
"""

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tbex.__file__)))


def _env(cache_dir, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TBEX_CACHE", "TBEX_ALWAYS_COMPILE", "TBEX_LOG", "TBEX_CACHE_MAX_MB")}
    env["TBEX_CACHE_DIR"] = str(cache_dir)
    env["TBEX_LOG"] = "cache"
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _parse(proc):
    out, err = proc.communicate(timeout=600) if isinstance(proc, subprocess.Popen) else (proc.stdout, proc.stderr)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def run_child(cache_dir, **extra):
    """(result dict, stderr) of one child process."""
    p = subprocess.run([sys.executable, "-c", CHILD], env=_env(cache_dir, **extra),
                       capture_output=True, text=True, timeout=600)
    return _parse(p)


def files(cache_dir, pattern="*"):
    """Entry files (the runtime/ objects excluded)."""
    return sorted(f for f in glob.glob(os.path.join(str(cache_dir), "*", pattern))
                  if os.path.basename(os.path.dirname(f)) != "runtime")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The in-memory JIT's result (disk cache off)."""
    r, _ = run_child(tmp_path_factory.mktemp("nocache"), TBEX_CACHE="0")
    return r["sha"]


def test_second_process_loads_from_disk(tmp_path, reference):
    first, err1 = run_child(tmp_path)
    assert first["stats"] == {"hits": 0, "compiles": 1, "rebuilds": 0, "fallbacks": 0,
                              "evictions": 0}
    assert "[tbex cache] miss" in err1
    second, err2 = run_child(tmp_path)
    assert second["stats"] == {"hits": 1, "compiles": 0, "rebuilds": 0, "fallbacks": 0,
                               "evictions": 0}
    assert "[tbex cache] hit" in err2 and "miss" not in err2
    assert first["sha"] == second["sha"] == reference
    assert len(files(tmp_path, "*.so")) == 1 and len(files(tmp_path, "*.json")) == 1


def test_fresh_cache_links_the_packaged_runtime(tmp_path, reference):
    """The package ships the Halide runtime every cached kernel links (compiled with tbex, one
    object for every CPU of the architecture): a fresh cache directory links it instead of
    compiling its own, and the kernel computes the same bits. The one object the cache writes
    there is tbex's own kernels (the AMX tile loops extern stages call): ~33 KB of code for
    three kernels, well under the runtime's size."""
    (shipped,) = glob.glob(os.path.join(os.path.dirname(tbex.__file__), "runtime", "halide-*.o"))
    r, err = run_child(tmp_path)
    assert "Halide runtime: prebuilt " + os.path.realpath(shipped) in err, err
    assert "Halide runtime for" not in err
    assert r["sha"] == reference
    assert "tbex kernels object written" in err, err
    (kernels,) = glob.glob(os.path.join(str(tmp_path), "runtime", "*.o"))
    assert os.path.getsize(kernels) < os.path.getsize(shipped) / 3


def _entry(cache_dir):
    (side,) = files(cache_dir, "*.json")
    with open(side) as f:
        return side[:-5] + ".so", side, json.load(f)


def test_concurrent_processes_leave_one_valid_entry(tmp_path, reference):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], env=_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [_parse(p)[0] for p in procs]
    assert all(r["sha"] == reference for r in results)
    assert sum(r["stats"]["compiles"] for r in results) == 1
    assert sum(r["stats"]["hits"] for r in results) == 3
    # One entry, no temp files left behind, and the .so matches its sidecar.
    assert [os.path.basename(f).split(".", 1)[1] for f in files(tmp_path)] == ["json", "lock", "so"]
    # The package's prebuilt Halide runtime is linked: the cache's runtime/ holds only tbex's
    # kernels object, written once.
    assert len(glob.glob(os.path.join(str(tmp_path), "runtime", "*.o"))) == 1
    so, _, side = _entry(tmp_path)
    with open(so, "rb") as f:
        data = f.read()
    assert side["so_size"] == len(data)
    assert side["so_sha256"] == hashlib.sha256(data).hexdigest()


def _truncate(so, side_path):
    with open(so, "r+b") as f:
        f.truncate(os.path.getsize(so) // 2)


def _flip_bytes(so, side_path):
    with open(so, "r+b") as f:
        f.seek(os.path.getsize(so) // 2)
        chunk = f.read(64)
        f.seek(os.path.getsize(so) // 2)
        f.write(bytes(b ^ 0xFF for b in chunk))


def _garbage_sidecar(so, side_path):
    with open(side_path, "w") as f:
        f.write("{ not json")


def _garbage_so_matching_sidecar(so, side_path):
    """A .so the checksum accepts but dlopen rejects."""
    data = b"\x7fELF this is not a shared object" * 64
    with open(so, "wb") as f:
        f.write(data)
    with open(side_path) as f:
        side = f.read()
    with open(side_path) as f:
        old = json.load(f)
    side = side.replace(str(old["so_size"]), str(len(data))).replace(
        old["so_sha256"], hashlib.sha256(data).hexdigest())
    with open(side_path, "w") as f:
        f.write(side)


def _deleted_sidecar(so, side_path):
    os.unlink(side_path)


@pytest.mark.parametrize("damage", [_truncate, _flip_bytes, _garbage_sidecar,
                                    _garbage_so_matching_sidecar, _deleted_sidecar])
def test_corrupt_entry_is_rebuilt(tmp_path, reference, damage):
    run_child(tmp_path)
    so, side_path, _ = _entry(tmp_path)
    damage(so, side_path)
    r, err = run_child(tmp_path)
    assert r["sha"] == reference
    assert r["stats"] == {"hits": 0, "compiles": 1, "rebuilds": 1, "fallbacks": 0,
                          "evictions": 0}
    assert "[tbex cache] rebuild" in err
    # The rebuilt entry is valid: the next process loads it.
    again, _ = run_child(tmp_path)
    assert again["stats"]["hits"] == 1 and again["sha"] == reference


def test_cache_off_writes_nothing(tmp_path, reference):
    d = tmp_path / "c"
    r, err = run_child(d, TBEX_CACHE="0")
    assert r["sha"] == reference
    assert r["stats"] == {"hits": 0, "compiles": 0, "rebuilds": 0, "fallbacks": 0,
                          "evictions": 0}
    assert not d.exists()


def test_always_compile_rebuilds(tmp_path, reference):
    run_child(tmp_path)
    _, _, before = _entry(tmp_path)
    r, err = run_child(tmp_path, TBEX_ALWAYS_COMPILE="1")
    assert r["sha"] == reference
    assert r["stats"] == {"hits": 0, "compiles": 1, "rebuilds": 0, "fallbacks": 0,
                          "evictions": 0}
    assert "forced compile" in err
    _, _, after = _entry(tmp_path)
    assert after["key"] == before["key"] and after["created"] > before["created"]


def test_no_compiler_falls_back_to_jit(tmp_path, reference):
    env = {"PATH": str(tmp_path / "empty-bin"), "CXX": ""}
    r, err = run_child(tmp_path / "c", **env)
    assert r["sha"] == reference
    assert r["stats"] == {"hits": 0, "compiles": 0, "rebuilds": 0, "fallbacks": 1,
                          "evictions": 0}
    assert "no C++ compiler found" in err
    assert files(tmp_path / "c", "*.so") == []


def _cli(cache_dir, *args, module="tbex.cache"):
    p = subprocess.run([sys.executable, "-m", *module.split(), *args], env=_env(cache_dir),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_cli_list_info_clear(tmp_path):
    assert "entries  0" in _cli(tmp_path, "info")
    run_child(tmp_path)
    so, _, side = _entry(tmp_path)
    listing = _cli(tmp_path, "list")
    assert side["key"][:16] in listing and side["problem"] in listing
    # The listing names the schedule the entry was compiled with (the cost model's choice).
    assert f"  {side['schedule']}  " in listing and "(invalid)" not in listing
    info = _cli(tmp_path, "info")
    assert f"dir      {tmp_path}" in info and "entries  1" in info
    assert info == _cli(tmp_path, "info", module="tbex cache")  # the package entry point too
    assert "cleared 1 entries" in _cli(tmp_path, "clear")
    # Only kernels are cleared: the host calibration beside them (machine.json) stays.
    left = set(os.listdir(tmp_path)) - {"machine.json", "machine.json.lock"}
    assert left == set() and "entries  0" in _cli(tmp_path, "info")


def test_python_api(tmp_path, capsys):
    assert cache.entries(str(tmp_path)) == []
    run_child(tmp_path)
    (e,) = cache.entries(str(tmp_path))
    _, _, side = _entry(tmp_path)
    assert e["valid"] and e["schedule"] == side["schedule"] and e["size"] == os.path.getsize(e["path"])
    assert e["schedule"] in tbex._C.schedule_names("conv3d_backprop_filter")
    i = cache.info(str(tmp_path))
    assert i["entries"] == 1 and i["bytes"] > e["size"]
    assert cache.main(["list", "--dir", str(tmp_path)]) == 0
    assert e["key"][:16] in capsys.readouterr().out
    assert cache.clear(str(tmp_path)) == 1 and cache.entries(str(tmp_path)) == []


def test_prune_keeps_an_entry_a_process_holds(tmp_path):
    run_child(tmp_path)  # entry 1: nobody holds it after this
    (free_so,) = files(tmp_path, "*.so")
    holder = subprocess.Popen([sys.executable, "-c", CHILD],
                              env=_env(tmp_path, TEST_HW="9", TEST_HOLD="1"), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()  # the child has compiled and holds entry 2
        assert json.loads(line)["stats"]["compiles"] == 1, holder.stderr.read()
        (held_so,) = [f for f in files(tmp_path, "*.so") if f != free_so]
        out = _cli(tmp_path, "prune", "--max-mb", "0", module="tbex cache")
        assert "evicted 1 entries" in out and "kept 1" in out and "1 in use" in out
        assert files(tmp_path, "*.so") == [held_so]
        assert os.path.exists(held_so[:-3] + ".json")
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
    # Released with its process: the next prune takes it.
    out = _cli(tmp_path, "prune", "--max-mb", "0", module="tbex cache")
    assert "evicted 1 entries" in out and "kept 0" in out
    assert files(tmp_path, "*.so") == []


def test_prune_defaults_to_the_cap(tmp_path):
    run_child(tmp_path)
    env_cap = dict(_env(tmp_path), TBEX_CACHE_MAX_MB="0")  # 0: no cap, nothing to do
    p = subprocess.run([sys.executable, "-m", "tbex", "cache", "prune"], env=env_cap,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "evicted 0 entries" in p.stdout and "kept 1" in p.stdout
    assert "cap      none" in subprocess.run(
        [sys.executable, "-m", "tbex", "cache", "info"], env=env_cap, capture_output=True,
        text=True, timeout=120).stdout
    (e,) = cache.entries(str(tmp_path))
    assert e["used"] is not None and e["used"] >= e["created"] - 1
    r = cache.prune(e["size"] / 2**20 / 2, str(tmp_path))  # half an entry: it must go
    assert r["evicted"] == 1 and r["evicted_bytes"] >= e["size"] and r["kept"] == 0
    with pytest.raises(ValueError):
        cache.prune(-1, str(tmp_path))


def test_sha256_matches_hashlib():
    rng = __import__("random").Random(0)
    for n in (0, 3, 55, 56, 63, 64, 65, 1000, 1 << 20):
        data = b"abc" if n == 3 else bytes(rng.getrandbits(8) for _ in range(n))
        assert tbex._C.sha256_hex(data) == hashlib.sha256(data).hexdigest()
