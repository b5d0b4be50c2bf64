"""AOT from Python: ``python -m tbex aot`` (tbexc's command line) and ``dsl.build`` with
``output_dir`` (TBE's kernel_meta). The emitted static library is linked into a C program with
the system compiler and must reproduce the JIT kernel's result."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tbex
from tbex import _C, aot, dsl, tvm

DW_FLAGS = ["--op", "conv3d_backprop_filter", "--x", "1,4,1,6,6,16:float16",
            "--out-backprop", "1,4,1,6,6,16:float16", "--filter-size", "16,3,16,3,3",
            "--strides", "1,1,1", "--pads", "1,1,1,1,1,1", "--dilations", "1,1,1,1,1",
            "--res-dtype", "float32"]
DW_PARA = {"strides": [1, 1, 1], "pads": [1, 1, 1, 1, 1, 1], "dilations": [1, 1, 1, 1, 1],
           "res_dtype": "float32"}


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tbex", "aot", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_writes_kernel_and_manifest(tmp_path):
    r = run_cli("--name", "dw_cli", "--out", str(tmp_path), *DW_FLAGS)
    assert r.returncode == 0, r.stderr
    written = r.stdout.split()
    for f in ("dw_cli.a", "dw_cli.h", "dw_cli_wrapper.c", "dw_cli.manifest.json"):
        assert str(tmp_path / f) in written
        assert (tmp_path / f).stat().st_size > 0
    m = json.loads((tmp_path / "dw_cli.manifest.json").read_text())
    p = _C.make_filter_problem([1, 4, 1, 6, 6, 16], "float16", [1, 4, 1, 6, 6, 16], "float16",
                               [16, 3, 16, 3, 3], DW_PARA)
    assert m["op"] == "conv3d_backprop_filter"
    assert m["problem"] == p.canonical
    assert [i["name"] for i in m["inputs"]] == ["x", "out_backprop"]
    assert [i["shape"] for i in m["inputs"]] == p.input_shapes
    assert [i["dtype"] for i in m["inputs"]] == ["float16", "float16"]
    assert m["output"]["shape"] == p.output_shape and m["output"]["dtype"] == "float32"
    assert m["group_dict"] == p.group_dict
    assert m["schedule"] in _C.schedule_names("conv3d_backprop_filter")
    assert "no_runtime" in m["target"]
    assert m["tbex_version"] == tbex.__version__
    assert m["halide_version"].startswith("21.")
    assert m["llvm_version"].split(".")[0].isdigit()
    assert sorted(m["files"]) == sorted(written)
    header = (tmp_path / "dw_cli.h").read_text()
    assert "int dw_cli(const void* x, const void* out_backprop, void* out);" in header
    assert "#define dw_cli_IN0_SHAPE {1, 4, 1, 6, 6, 16}" in header


def test_cli_portable_target_and_runtime(tmp_path):
    r = run_cli("--name", "dw_avx2", "--out", str(tmp_path), "--target",
                "x86-64-linux-avx2-fma-f16c", "--emit", "object,header", *DW_FLAGS)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "dw_avx2.manifest.json").read_text())
    features = set(m["target"].split("-")[3:])
    assert m["target"].startswith("x86-64-linux-")
    assert {"avx2", "fma", "f16c", "no_runtime"} <= features
    assert not any(f.startswith("avx512") for f in features)
    assert (tmp_path / "dw_avx2.o").exists() and not (tmp_path / "dw_avx2.a").exists()
    r = run_cli("--runtime-only", "--name", "rt", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rt.a").exists() and (tmp_path / "rt.o").exists()
    assert json.loads((tmp_path / "rt.manifest.json").read_text())["op"] == "halide_runtime"


@pytest.mark.parametrize("args, param", [
    (["--target", "x86-64-banana"], "target"),
    (["--op", "conv3d_forward"], "op"),
    (["--x", "1,4,1,6,6,15:float16"], "x"),
    (["--emit", "dll"], "emit"),
    (["--schedule", "nope"], "schedule"),
])
def test_cli_errors_exit_2_and_name_the_parameter(tmp_path, args, param):
    r = run_cli("--name", "k", "--out", str(tmp_path), *DW_FLAGS, *args)
    assert r.returncode == 2
    assert r.stderr.startswith("python -m tbex aot: error: [E"), r.stderr
    assert f"] {param}:" in r.stderr, r.stderr


DW_CALL = {"op": "conv3d_backprop_filter", "x": {"shape": [1, 4, 1, 6, 6, 16], "dtype": "float16"},
           "out_backprop": {"shape": [1, 4, 1, 6, 6, 16], "dtype": "float16"},
           "filter_size": [16, 3, 16, 3, 3], "para_dict": DW_PARA}


@pytest.mark.parametrize("text, param, says", [
    ('{"op": "conv3d_backprop_filter", "x": ', "json", "invalid JSON: parse error at line 1"),
    ("[1, 2]", "json", "expected an object"),
    (json.dumps(dict(DW_CALL, filter_size="16,3,16,3,3")), "filter_size", "expected a list of integers"),
    (json.dumps(dict(DW_CALL, x={"dtype": "float16"})), "x", 'missing "shape"'),
    (json.dumps(dict(DW_CALL, para_dict=dict(DW_PARA, groups=1.5))), "groups", "expected an integer"),
    (json.dumps(dict(DW_CALL, extra=1)), "json", "unknown key 'extra'"),
])
def test_cli_bad_json_file_names_the_parameter(tmp_path, text, param, says):
    (tmp_path / "call.json").write_text(text)
    r = run_cli("--name", "k", "--out", str(tmp_path), "--json", str(tmp_path / "call.json"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("python -m tbex aot: error: [E"), r.stderr
    assert f"] {param}: " in r.stderr and says in r.stderr, r.stderr


def test_cli_json_file_gives_the_flags_kernel(tmp_path):
    (tmp_path / "call.json").write_text(json.dumps(DW_CALL))
    r = run_cli("--name", "kj", "--out", str(tmp_path / "j"), "--emit", "header",
                "--json", str(tmp_path / "call.json"))
    assert r.returncode == 0, r.stderr
    f = run_cli("--name", "kj", "--out", str(tmp_path / "f"), "--emit", "header", *DW_FLAGS)
    assert f.returncode == 0, f.stderr
    mj = json.loads((tmp_path / "j" / "kj.manifest.json").read_text())
    mf = json.loads((tmp_path / "f" / "kj.manifest.json").read_text())
    assert mj["problem"] == mf["problem"] and mj["group_dict"] == mf["group_dict"]


def test_main_without_command_exits_2():
    r = subprocess.run([sys.executable, "-m", "tbex"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "python -m tbex aot" in r.stderr


CONSUMER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "{name}.h"

static void* slurp(const char* path, size_t bytes) {{
  void* p = malloc(bytes);
  FILE* f = fopen(path, "rb");
  if (!p || !f || fread(p, 1, bytes, f) != bytes) exit(3);
  fclose(f);
  return p;
}}

int main(int argc, char** argv) {{
  void* x = slurp(argv[1], (size_t){name}_IN0_COUNT * {name}_IN0_ELEM_SIZE);
  void* dy = slurp(argv[2], (size_t){name}_IN1_COUNT * {name}_IN1_ELEM_SIZE);
  size_t out_bytes = (size_t){name}_OUT_COUNT * {name}_OUT_ELEM_SIZE;
  void* out = malloc(out_bytes);
  if (argc != 4 || {name}(x, dy, out) != 0) return 4;
  FILE* f = fopen(argv[3], "wb");
  if (!f || fwrite(out, 1, out_bytes, f) != out_bytes) return 5;
  fclose(f);
  return 0;
}}
"""


def run_consumer(tmp_path, meta, name, a, b, shape):
    """Builds CONSUMER against kernel_meta's NAME.a and runs it on inputs a, b: the output."""
    (tmp_path / "consumer.c").write_text(CONSUMER.format(name=name))
    exe = tmp_path / "consumer"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(meta), "-c",
                    str(tmp_path / "consumer.c"), "-o", str(tmp_path / "consumer.o")], check=True)
    subprocess.run(["c++", str(tmp_path / "consumer.o"), str(meta / (name + ".a")),
                    aot.runtime_library(), str(meta / "tbex_halide_runtime.a"), "-lpthread", "-ldl",
                    "-o", str(exe)], check=True)
    a.tofile(tmp_path / "a.bin")
    b.tofile(tmp_path / "b.bin")
    subprocess.run([str(exe), str(tmp_path / "a.bin"), str(tmp_path / "b.bin"),
                    str(tmp_path / "out.bin")], check=True, timeout=60)
    return np.fromfile(tmp_path / "out.bin", np.float32).reshape(shape)


def test_dsl_build_writes_kernel_meta_that_links_and_runs(tmp_path):
    rng = np.random.default_rng(0)
    x = (rng.integers(-8, 9, (1, 4, 1, 6, 6, 16)) / 8).astype(np.float16)
    dy = (rng.integers(-8, 9, (1, 4, 1, 6, 6, 16)) / 8).astype(np.float16)
    fm = tvm.placeholder(x.shape, name="fmap", dtype="float16")
    dd = tvm.placeholder(dy.shape, name="dedy", dtype="float16")
    res = dsl.conv3d_backprop_filter(fm, dd, [16, 3, 16, 3, 3], dict(DW_PARA, kernel_name="dw_meta"))
    kernel = dsl.build(dsl.auto_schedule(res), {"tensor_list": [fm, dd, res],
                                                "output_dir": str(tmp_path)})
    meta = tmp_path / "kernel_meta"
    for f in ("dw_meta.a", "dw_meta.h", "dw_meta.manifest.json", "tbex_halide_runtime.a"):
        assert (meta / f).exists(), f
        assert str(meta / f) in kernel.aot_files
    m = json.loads((meta / "dw_meta.manifest.json").read_text())
    assert m["problem"] == res.problem.canonical and m["schedule"] == kernel.schedule
    expected = kernel(x, dy)

    got = run_consumer(tmp_path, meta, "dw_meta", x, dy, expected.shape)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    assert np.abs(expected).max() > 0


def test_emit_names_bad_parameters(tmp_path):
    p = _C.make_filter_problem([1, 4, 1, 6, 6, 16], "float16", [1, 4, 1, 6, 6, 16], "float16",
                               [16, 3, 16, 3, 3], DW_PARA)
    with pytest.raises(tbex.UserError) as e:
        aot.emit(p, "bad-name", str(tmp_path))
    assert e.value.param == "name"
    with pytest.raises(tbex.UserError) as e:
        aot.emit(p, "k", str(tmp_path), target="x86-64-banana")
    assert e.value.param == "target"
    assert not os.path.exists(tmp_path / "k.manifest.json")


DX_AMX_PARA = {"strides": [1, 1, 1, 1, 1], "pads": [1, 1, 1, 1, 1, 1],
               "dilations": [1, 1, 1, 1, 1], "res_dtype": "float32"}


def check_amx_kernel_in_a_c_program(tmp_path, res, placeholders, schedule, name, seed):
    """Builds `res` with `schedule` (skipped where it does not apply) as a static library whose
    wrapper asks the OS for the tile state, runs it from a C program on random multiples of 1/8
    and asserts the result is the JIT kernel's."""
    from ml_dtypes import bfloat16
    why = dict(res.problem.explain_schedules())[schedule]
    if why:
        pytest.skip(schedule + " does not apply on this host: " + why)
    kernel = dsl.build(dsl.auto_schedule(res, schedule=schedule),
                       {"tensor_list": placeholders + [res], "output_dir": str(tmp_path)})
    assert kernel.schedule == schedule
    meta = tmp_path / "kernel_meta"
    assert "tbex_aot_amx_tiles" in (meta / (name + "_wrapper.c")).read_text()
    assert "-2 when the OS refuses this process the AMX" in (meta / (name + ".h")).read_text()
    rng = np.random.default_rng(seed)
    a, b = ((rng.integers(-8, 9, t.shape) / 8).astype(bfloat16) for t in placeholders)
    expected = kernel(a, b)
    assert np.abs(expected).max() > 0
    got = run_consumer(tmp_path, meta, name, a, b, expected.shape)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("schedule", ["dx_amx", "dx_amx_blocked"])
def test_amx_kernel_links_and_runs_in_a_c_program(tmp_path, schedule):
    """An AMX-BF16 dX kernel as a static library: its wrapper asks the OS for the tile state
    before the first tile instruction (a C program never calls arch_prctl itself) and the result
    is the JIT kernel's. dx_amx_blocked's kernel calls tbex_amx_dx, which the program gets from
    tbex's runtime library like the wrapper's other helpers."""
    wshape, xsize = [32, 16, 3, 3, 3], [1, 4, 5, 20, 16]
    fl = tvm.placeholder(tuple(tbex.layout.shape_fz3d(wshape, 1)), name="filter", dtype="bfloat16")
    dd = tvm.placeholder((1, 4, 2, 5, 20, 16), name="dedy", dtype="bfloat16")
    res = dsl.conv3d_backprop_input(fl, dd, filter_size=wshape, input_size=xsize,
                                    para_dict=dict(DX_AMX_PARA, kernel_name="dx_amx_meta"))
    check_amx_kernel_in_a_c_program(tmp_path, res, [fl, dd], schedule, "dx_amx_meta", 1)


def test_amx_cols_kernel_links_and_runs_in_a_c_program(tmp_path):
    """The same for dx_amx_cols (3 input channels, stride 2 along h and w): its kernel calls
    tbex_amx_dx_cols from tbex's runtime library."""
    wshape, xsize = [32, 3, 3, 5, 5], [1, 4, 10, 20, 3]
    fl = tvm.placeholder(tuple(tbex.layout.shape_fz3d(wshape, 1)), name="filter", dtype="bfloat16")
    dd = tvm.placeholder((1, 4, 2, 5, 10, 16), name="dedy", dtype="bfloat16")
    para = {"strides": [1, 1, 2, 2, 1], "pads": [1, 1, 2, 1, 2, 1], "dilations": [1, 1, 1, 1, 1],
            "res_dtype": "float32", "kernel_name": "dx_cols_meta"}
    res = dsl.conv3d_backprop_input(fl, dd, filter_size=wshape, input_size=xsize, para_dict=para)
    check_amx_kernel_in_a_c_program(tmp_path, res, [fl, dd], "dx_amx_cols", "dx_cols_meta", 3)


@pytest.mark.parametrize("schedule", ["dw_amx", "dw_amx_blocked"])
def test_amx_dw_kernel_links_and_runs_in_a_c_program(tmp_path, schedule):
    """The same for dW: dw_amx_blocked's kernel calls tbex_amx_dw from tbex's runtime library."""
    fm = tvm.placeholder((1, 4, 2, 6, 8, 16), name="fmap", dtype="bfloat16")
    dd = tvm.placeholder((1, 4, 2, 6, 8, 16), name="dedy", dtype="bfloat16")
    res = dsl.conv3d_backprop_filter(fm, dd, [32, 3, 32, 3, 3], dict(DW_PARA, kernel_name="dw_amx_meta"))
    check_amx_kernel_in_a_c_program(tmp_path, res, [fm, dd], schedule, "dw_amx_meta", 2)
