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
    env = dict(os.environ)
    env.pop("TBEX_LOG", None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(n)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


@pytest.fixture
def small_fs(tmp_path):
    """A 64 KiB tmpfs, smaller than one cached kernel (root in a sandbox that allows mounts),
    else a skip with the reason."""
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
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
    assert "truncated" in err, err[-2000:]
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
        assert not os.listdir(small_fs / "o"), "a failed emit leaves no partial outputs"


def test_missing_cxx_compiler_falls_back_with_a_warning(tmp_path):
    # No C++ compiler on PATH: the cache cannot link its .so files.
    out, _ = run_script(2, {"TBEX_CACHE_DIR": str(tmp_path / "cache"), "PATH": str(tmp_path), "CXX": ""})
    assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
    assert "no C++ compiler found" in out["cache_warnings"][0]
    # A CXX that is not a program: said once, another compiler links.
    out, _ = run_script(1, {"TBEX_CACHE_DIR": str(tmp_path / "cache2"), "CXX": "/nonexistent/c++"})
    assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
    assert "CXX=/nonexistent/c++ is not a program" in out["cache_warnings"][0]


def fill(fs_dir, leave):
    """Fills the filesystem at `fs_dir` up to `leave` free bytes."""
    st = os.statvfs(fs_dir)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(fs_dir, "filler"), "wb") as f:
        f.write(b"\0" * max(0, free - leave))


def test_aot_cpp_source_on_a_full_disk_is_a_user_error_and_leaves_no_partial_file(small_fs):
    # Halide's C backend writes through an unchecked stream (a full disk gave a truncated .cpp
    # and exit 0); the source now goes through memory and a checked write.
    fill(str(small_fs), 64 * 1024)
    out = small_fs / "o"
    out.mkdir()
    r = subprocess.run([sys.executable, "-m", "tbex", "aot", "--name", "k", "--out", str(out),
                        "--emit", "header,cpp", "--op", "conv3d_backprop_filter",
                        "--x", "1,4,1,8,8,16:float16", "--out-backprop", "1,4,1,8,8,16:float16",
                        "--filter-size", "16,1,16,1,1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "error: [E60000]" in r.stderr and "No space left on device" in r.stderr, r.stderr
    assert "k.cpp" in r.stderr
    assert not os.listdir(out), "a failed emit leaves no partial outputs"
    assert not glob.glob(str(small_fs / "**" / "*.tmp*"), recursive=True)


def test_aot_cpp_header_guard_names_the_kernel_not_a_path(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tbex", "aot", "--name", "k", "--out", str(tmp_path),
                        "--emit", "header,cpp", "--op", "conv3d_backprop_filter",
                        "--x", "1,1,1,4,4,16:float32", "--out-backprop", "1,1,1,4,4,16:float32",
                        "--filter-size", "16,1,16,1,1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "k_halide.h").read_text()
    assert header.startswith("#ifndef HALIDE_k_halide_H\n#define HALIDE_k_halide_H\n")
    assert "/proc/self" not in header and "proc___self" not in header
    assert "proc___self" not in (tmp_path / "k.cpp").read_text()


def test_shared_object_for_another_machine_is_rebuilt(tmp_path):
    # A whole ELF file of another architecture (e_machine patched, sidecar rewritten to match):
    # refused before dlopen, rebuilt.
    import hashlib
    import struct
    d = tmp_path / "cache"
    run_script(1, {"TBEX_CACHE_DIR": str(d)})
    (so,) = glob.glob(str(d / "*" / "*.so"))
    data = bytearray(open(so, "rb").read())
    machine = struct.unpack_from("<H", data, 18)[0]
    struct.pack_into("<H", data, 18, machine ^ 0x7)
    open(so, "wb").write(data)
    side = so[:-3] + ".json"
    meta = json.load(open(side))
    meta["so_sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    json.dump(meta, open(side, "w"))
    out, err = run_script(1, {"TBEX_CACHE_DIR": str(d), "TBEX_LOG": "cache"})
    assert out["bad"] == 0 and not out["cache_warnings"]
    assert "another machine" in err, err[-2000:]
    assert struct.unpack_from("<H", open(so, "rb").read(), 18)[0] == machine  # rebuilt


TUNE = textwrap.dedent("""
    import json, warnings
    import tbex
    from tbex import dsl, tvm
    res = dsl.conv3d_backprop_filter(tvm.placeholder((1, 1, 1, 5, 4, 16), name="x"),
                                     tvm.placeholder((1, 1, 1, 5, 4, 16), name="dy"),
                                     [16, 1, 16, 1, 1], {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dsl.auto_schedule(res, tune=True, max_candidates=2, seconds=0.01)
    print(json.dumps([str(w.message) for w in caught if issubclass(w.category, tbex.CacheWarning)]))
""")


def test_unwritable_tuning_database_and_calibration_warn(tmp_path):
    # TBEX_TUNING_DB under a file: neither the tuning result nor the calibration beside it
    # can be stored; each is said once, naming the knobs.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = dict(os.environ, TBEX_TUNING_DB=str(blocker / "tune.json"), TBEX_CACHE="1",
               TBEX_CACHE_DIR=str(tmp_path / "cache"), TBEX_CALIBRATE="1")
    env.pop("TBEX_LOG", None)
    r = subprocess.run([sys.executable, "-c", TUNE], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    warned = json.loads(r.stdout.strip().splitlines()[-1])
    tuning = [w for w in warned if "tuning result" in w]
    calib = [w for w in warned if "machine calibration" in w]
    assert len(tuning) == 1 and "TBEX_TUNING_DB" in tuning[0] and str(blocker) in tuning[0], warned
    assert len(calib) == 1 and "TBEX_CACHE=0" in calib[0], warned
    assert len(warned) == 2, warned


def test_cache_clear_removes_stale_temp_files_only(tmp_path):
    import time
    d = tmp_path / "cache"
    run_script(1, {"TBEX_CACHE_DIR": str(d)})
    (so,) = glob.glob(str(d / "*" / "*.so"))
    stale, fresh = so + ".tmp.1.2.3", so + ".tmp.4.5.6"
    for p in (stale, fresh):
        open(p, "w").write("partial")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    r = subprocess.run([sys.executable, "-m", "tbex", "cache", "clear", "--dir", str(d)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(stale) and not os.path.exists(so)
    assert os.path.exists(fresh)  # may be a compile in progress


COMPILE_ONE = textwrap.dedent("""
    from tbex import dsl, tvm
    res = dsl.conv3d_backprop_filter(tvm.placeholder((1, 1, 1, 6, 4, 16), name="x"),
                                     tvm.placeholder((1, 1, 1, 6, 4, 16), name="dy"),
                                     [16, 1, 16, 1, 1], {})
    dsl.build(dsl.auto_schedule(res), {"name": "k"})
""")


def test_progress_only_on_a_terminal_or_when_asked():
    env = dict(os.environ, TBEX_PROGRESS_MS="0", TBEX_CACHE="0")
    env.pop("TBEX_LOG", None)
    # stderr a pipe, no TBEX_LOG: quiet.
    r = subprocess.run([sys.executable, "-c", COMPILE_ONE], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tbex: compiling" not in r.stderr
    # stderr a terminal: one line for the compile.
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-c", COMPILE_ONE], env=env, stdout=subprocess.DEVNULL,
                           stderr=slave, timeout=600)
        os.close(slave)
        text = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            text += chunk
    finally:
        os.close(master)
    assert p.returncode == 0
    lines = [l for l in text.decode().splitlines() if l.startswith("tbex: compiling ")]
    assert len(lines) == 1 and "conv3d_backprop_filter" in lines[0], text.decode()[-2000:]


def test_unknown_log_topic_reported_once():
    env = dict(os.environ, TBEX_LOG="cache,bogus", TBEX_CACHE="0")
    r = subprocess.run([sys.executable, "-c", COMPILE_ONE], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count("unknown TBEX_LOG topic 'bogus'") == 1, r.stderr[-2000:]


def test_read_only_by_permissions_as_another_user(tmp_path):
    # chmod 555 (root ignores it, so the reader runs as nobody): the compile falls back with one
    # warning naming the directory, cache clear says why in one line.
    import shutil
    import tempfile
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    base = tempfile.mkdtemp(prefix="tbex-ro-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        d = os.path.join(base, "cache")
        run_script(1, {"TBEX_CACHE_DIR": d})
        for dirpath, dirs, files in os.walk(d):
            for n in files:
                os.chmod(os.path.join(dirpath, n), 0o444)
            os.chmod(dirpath, 0o555)
        env = dict(os.environ, TBEX_CACHE_DIR=d, TBEX_ALWAYS_COMPILE="1", HOME=base)
        env.pop("TBEX_LOG", None)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        # A checkout under a 0700 directory (CI's mktemp -d) hides the venv from nobody: then this
        # test cannot run here, which is a reason to skip, not a tbex failure.
        probe = subprocess.run(nobody + [sys.executable, "-c", "import numpy, tbex"], env=env,
                               capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"nobody cannot import numpy and tbex from this venv: "
                        f"{probe.stderr.strip()[-200:]}")
        r = subprocess.run(nobody + [sys.executable, "-c", SCRIPT, "1"], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["bad"] == 0 and len(out["cache_warnings"]) == 1
        assert "Permission denied" in out["cache_warnings"][0] and d in out["cache_warnings"][0]
        r = subprocess.run(nobody + [sys.executable, "-m", "tbex", "cache", "clear", "--dir", d],
                           env=env, capture_output=True, text=True)
        assert r.returncode == 1
        assert "cannot clear" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        for dirpath, dirs, files in os.walk(base):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(base, ignore_errors=True)
