"""The filesystem never ends the process, and fallbacks are visible: a full or read-only cache
directory, a `cache clear` during another process's compile and a truncated kernel file all end in
a correct result (from the in-memory JIT when the cache cannot be used), with one CacheWarning;
slow compiles and tuning say so; the command line names itself and survives a closed pipe.

Each scenario runs in a subprocess: the warning is once per process, and a crash there must not
take pytest down."""
import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Compiles and runs `n` small dW kernels (distinct problems), checks them against numpy, prints
# a JSON summary with the CacheWarnings seen.
SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tbex
    from tbex import dsl, tvm
    n = int(sys.argv[1])
    bad = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(n):
            h = 3 + i
            x = np.ones((1, 1, 1, h, 4, 16), np.float32)
            dy = np.ones((1, 1, 1, h, 4, 16), np.float32)
            res = dsl.conv3d_backprop_filter(tvm.placeholder(x.shape, name="x"),
                                             tvm.placeholder(dy.shape, name="dy"), [16, 1, 16, 1, 1], {})
            out = dsl.build(dsl.auto_schedule(res), {"name": "k"})(x, dy)
            bad += int(not np.allclose(out[0, 0, :, :], h * 4))
    cw = [str(w.message) for w in caught if issubclass(w.category, tbex.CacheWarning)]
    print(json.dumps({"bad": bad, "cache_warnings": cw}))
""")


def run_script(n, env_extra, timeout=600):
    env = dict(os.environ, **env_extra)
    env.pop("TBEX_LOG", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(n)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


@pytest.fixture
def small_fs(tmp_path):
    """A 300 KiB tmpfs (root in a sandbox that allows mounts), else a skip with the reason."""
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip() or 'not root'})")
    yield d
    subprocess.run(["umount", str(d)], check=False)


def test_full_disk_falls_back_with_one_warning(small_fs):
    out, err = run_script(2, {"TBEX_CACHE_DIR": str(small_fs), "TBEX_ALWAYS_COMPILE": "1"})
    assert out["bad"] == 0
    assert len(out["cache_warnings"]) == 1, out
    msg = out["cache_warnings"][0]
    assert "No space left on device" in msg and "TBEX_CACHE_DIR" in msg and "TBEX_CACHE=0" in msg
    assert "LLVM ERROR" not in err
    assert not glob.glob(str(small_fs / "**" / "*.tmp.*"), recursive=True)


def test_unusable_cache_dir_warns_once(tmp_path):
    # A file where the directory should be.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out, _ = run_script(2, {"TBEX_CACHE_DIR": str(blocker / "cache")})
    assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
    assert "cannot" in out["cache_warnings"][0] and str(blocker) in out["cache_warnings"][0]


def test_read_only_cache_dir(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    r = subprocess.run(["mount", "--bind", str(d), str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({r.stderr.strip()})")
    try:
        # An entry to clear, made while writable.
        run_script(1, {"TBEX_CACHE_DIR": str(d)})
        subprocess.run(["mount", "-o", "remount,ro,bind", str(d)], check=True)
        out, _ = run_script(2, {"TBEX_CACHE_DIR": str(d), "TBEX_ALWAYS_COMPILE": "1"})
        assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
        r = subprocess.run([sys.executable, "-m", "tbex", "cache", "clear", "--dir", str(d)],
                           capture_output=True, text=True)
        assert r.returncode == 1
        assert "cannot clear" in r.stderr and "Traceback" not in r.stderr
    finally:
        subprocess.run(["umount", str(d)], check=False)


def test_cache_clear_during_compiles(tmp_path):
    d = str(tmp_path / "cache")
    clearer = subprocess.Popen(
        ["sh", "-c", f"while true; do {sys.executable} -m tbex cache clear --dir {d} >/dev/null 2>&1; done"])
    try:
        out, err = run_script(8, {"TBEX_CACHE_DIR": d, "TBEX_ALWAYS_COMPILE": "1"})
    finally:
        clearer.kill()
        clearer.wait()
    assert out["bad"] == 0, err[-2000:]
    assert "internal error" not in err


def test_truncated_shared_object_with_matching_sidecar_is_rebuilt(tmp_path):
    d = tmp_path / "cache"
    out, _ = run_script(1, {"TBEX_CACHE_DIR": str(d)})
    so = glob.glob(str(d / "*" / "*.so"))
    assert len(so) == 1
    data = open(so[0], "rb").read()
    open(so[0], "wb").write(data[: len(data) // 3])
    # The sidecar rewritten to match the damaged file: only the ELF check can tell.
    import hashlib
    side = so[0][:-3] + ".json"
    meta = json.load(open(side))
    meta["so_size"] = len(data) // 3
    meta["so_sha256"] = hashlib.sha256(data[: len(data) // 3]).hexdigest()
    json.dump(meta, open(side, "w"))
    out, err = run_script(1, {"TBEX_CACHE_DIR": str(d), "TBEX_LOG": "cache"})
    assert out["bad"] == 0
    assert os.path.getsize(so[0]) == len(data)  # rebuilt


def test_progress_lines(tmp_path):
    env = dict(os.environ, TBEX_LOG="progress", TBEX_PROGRESS_MS="0", TBEX_CACHE="0")
    code = textwrap.dedent("""
        import tbex
        from tbex import dsl, tvm
        res = dsl.conv3d_backprop_filter(tvm.placeholder((1, 1, 1, 5, 4, 16), name="x"),
                                         tvm.placeholder((1, 1, 1, 5, 4, 16), name="dy"),
                                         [16, 1, 16, 1, 1], {})
        dsl.build(dsl.auto_schedule(res), {"name": "k"})
        dsl.auto_schedule(res, tune=True, max_candidates=2, seconds=0.01)
    """)
    env["TBEX_TUNING_DB"] = str(tmp_path / "tune.json")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tbex: compiling conv3d_backprop_filter dw_g1" in r.stderr
    lines = [l for l in r.stderr.splitlines() if "candidate 1 of" in l]
    assert lines and lines[0].startswith("tbex: tuning dw_g1"), r.stderr[-2000:]


def test_log_help_and_unknown_topics():
    env = dict(os.environ, TBEX_LOG="help")
    r = subprocess.run([sys.executable, "-c", "import tbex"], env=env, capture_output=True, text=True)
    assert "TBEX_LOG topics" in r.stderr and "progress" in r.stderr
    env["TBEX_LOG"] = "cache,bogus"
    r = subprocess.run([sys.executable, "-c", "import tbex"], env=env, capture_output=True, text=True)
    assert "unknown TBEX_LOG topic 'bogus'" in r.stderr


def test_cli_names_and_closed_pipe(tmp_path):
    py = sys.executable
    r = subprocess.run([py, "-m", "tbex", "cache", "--help"], capture_output=True, text=True)
    assert r.stdout.startswith("usage: python -m tbex cache")
    r = subprocess.run([py, "-m", "tbex", "aot", "--help"], capture_output=True, text=True)
    assert r.stdout.startswith("usage: python -m tbex aot") and "tbexc" not in r.stdout
    tbexc = os.path.join(REPO, "build", "cp311", "tbexc")
    if os.path.exists(tbexc):
        r = subprocess.run([tbexc, "--help"], capture_output=True, text=True)
        assert r.stdout.startswith("usage: tbexc")
    # A listing longer than what the reader takes: no BrokenPipeError traceback.
    d = tmp_path / "cache"
    run_script(3, {"TBEX_CACHE_DIR": str(d)})
    r = subprocess.run(f"{py} -m tbex cache list --dir {d} | head -1", shell=True,
                       capture_output=True, text=True)
    assert len(r.stdout.splitlines()) == 1
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


def test_aot_on_a_full_disk_is_a_user_error(small_fs):
    common = ["--name", "k", "--out", str(small_fs / "o")]
    for extra in (["--op", "conv3d_backprop_filter", "--x", "1,4,1,8,8,16:float16",
                   "--out-backprop", "1,4,1,8,8,16:float16", "--filter-size", "16,1,16,1,1"],
                  ["--runtime-only"]):
        r = subprocess.run([sys.executable, "-m", "tbex", "aot", *common, *extra],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, r.stderr
        assert "error: [E60000]" in r.stderr and "LLVM ERROR" not in r.stderr, r.stderr


def test_missing_cxx_compiler_falls_back_with_a_warning(tmp_path):
    # No C++ compiler on PATH: the cache cannot link its .so files.
    out, _ = run_script(2, {"TBEX_CACHE_DIR": str(tmp_path / "cache"), "PATH": str(tmp_path), "CXX": ""})
    assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
    assert "no C++ compiler found" in out["cache_warnings"][0]
    # A CXX that is not a program: said once, another compiler links.
    out, _ = run_script(1, {"TBEX_CACHE_DIR": str(tmp_path / "cache2"), "CXX": "/nonexistent/c++"})
    assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
    assert "CXX=/nonexistent/c++ is not a program" in out["cache_warnings"][0]
