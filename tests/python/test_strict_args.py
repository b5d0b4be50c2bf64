"""Issue 12's reproducers, each a regression test: arguments are converted strictly (owned
references, no coercion), all geometry arithmetic is bounded before it is done, and every
UserError carries its code (docs/validation.md: TBE codes for the DSL, aclnn's 161001 / 161002 for
convolution_backward)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tbex
from tbex import dsl, tvm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = {"strides": [1, 1, 1], "pads": [1, 1, 1, 1, 1, 1], "dilations": [1, 1, 1, 1, 1],
        "res_dtype": "float32"}
FILTER = [16, 3, 16, 3, 3]


def _dw(filter_size=FILTER, para=None, x_shape=(1, 4, 1, 8, 8, 16)):
    x = tvm.placeholder(x_shape, name="x", dtype="float16")
    dy = tvm.placeholder((1, 4, 1, 8, 8, 16), name="dy", dtype="float16")
    return dsl.conv3d_backprop_filter(x, dy, filter_size, BASE if para is None else para)


def _raises(code, param, fn):
    with pytest.raises(tbex.UserError) as info:
        fn()
    assert info.value.code == code, str(info.value)
    assert info.value.param == param, str(info.value)
    return info.value


def test_valid_baseline_and_numpy_ints():
    assert _dw().shape == (1, 27, 16, 16)
    para = dict(BASE, strides=np.array([1, 1, 1]), pads=[np.int64(1)] * 6,
                dilations=tuple(np.int32(1) for _ in range(5)))
    assert _dw(filter_size=np.array(FILTER), para=para).shape == (1, 27, 16, 16)


def test_big_int_items_are_read_while_owned():
    # range(2**40, ...) yields fresh ints: read through a borrowed handle they were freed first.
    e = _raises("E60011", "filter_size", lambda: _dw(filter_size=range(2**40, 2**40 + 5)))
    assert "1099511627776" in str(e)


def test_conversions_survive_the_debug_allocator():
    # PYTHONMALLOC=debug fills freed memory: a use after free shows up as garbage or a crash.
    code = """
import numpy as np, tbex
from tbex import dsl, tvm
x = tvm.placeholder((1, 4, 1, 8, 8, 16), name="x", dtype="float16")
dy = tvm.placeholder((1, 4, 1, 8, 8, 16), name="dy", dtype="float16")
base = {"strides": np.array([1, 1, 1]), "pads": [1] * 6, "dilations": [1] * 5}
for _ in range(200):
    assert dsl.conv3d_backprop_filter(x, dy, [16, 3, 16, 3, 3], base).shape == (1, 27, 16, 16)
    try:
        dsl.conv3d_backprop_filter(x, dy, range(2**40, 2**40 + 5), {})
        raise SystemExit("no error")
    except tbex.UserError as e:
        assert e.code == "E60011" and "1099511627776" in str(e), e
print("ok")
"""
    env = dict(os.environ, PYTHONMALLOC="debug")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_lcm_overflow_is_a_range_error():
    _raises("E60011", "filter_size", lambda: _dw(filter_size=[2**62 + 1, 1, 16, 1, 1]))
    _raises("E60011", "Cin", lambda: tbex._C.derive_group_dict(2**62 + 1, 16, 1))
    # Largest accepted counts derive without overflow.
    gd = tbex._C.derive_group_dict(2**31 - 1, 2**31 - 1, 1)
    assert gd["cin1_g"] == (2**31 - 1 + 15) // 16


@pytest.mark.parametrize("cli", ["tbexc", "aot"])
def test_cli_reports_overflow_instead_of_dying(tmp_path, cli):
    args = ["--op", "conv3d_backprop_filter", "--name", "k", "--out", str(tmp_path),
            "--x", "1,4,1,8,8,16:float16", "--out-backprop", "1,4,1,8,8,16:float16"]
    if cli == "tbexc":
        exe = os.path.join(REPO, "build", "cp311", "tbexc")
        if not os.path.exists(exe):
            pytest.skip("tbexc is built by the CMake build (build/cp311)")
        cmd = [exe]
    else:
        cmd = [sys.executable, "-m", "tbex", "aot"]
    for extra, code in ((["--filter-size", f"{2**62 + 1},1,16,1,1"], "E60011"),
                        (["--filter-size", "16,1,16,1,1", "--pads", f"{2**63 - 1},0,0,0,0,0"], "E60011"),
                        (["--filter-size", "99999999999999999999,1,16,1,1"], "E60011"),
                        (["--filter-size", "16,1,16,1.5,1"], "E62002")):
        r = subprocess.run(cmd + args + extra, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (extra, r.returncode, r.stderr)
        assert f"[{code}]" in r.stderr, (extra, r.stderr)


@pytest.mark.parametrize("key,value", [
    ("pads", [2**63 - 1, 2**63 - 1, 0, 0, 0, 0]),
    ("dilations", [1, 2**63 - 1, 1, 1, 1]),
    ("pads", [2**31, 0, 0, 0, 0, 0]),
    ("strides", [2**31, 1, 1]),
])
def test_signed_overflow_geometry_is_refused(key, value):
    _raises("E60011", key, lambda: _dw(para=dict(BASE, **{key: value})))


def test_values_past_int64_are_range_errors():
    _raises("E60011", "strides", lambda: _dw(para=dict(BASE, strides=[2**63, 1, 1])))
    _raises("E60011", "x", lambda: _dw(x_shape=(1, 4, 1, 8, 2**64, 16)))
    _raises("E60011", "x", lambda: tvm.placeholder((1, 2**64), name="x"))


@pytest.mark.parametrize("para", [1, "strides", [("strides", [1, 1, 1])], 1.5])
def test_para_dict_must_be_a_dict(para):
    _raises("E62002", "para_dict", lambda: _dw(para=para))


@pytest.mark.parametrize("key,value", [
    ("strides", np.array(2)), ("strides", "111"), ("strides", [1.0, 1, 1]), ("strides", [None, 1, 1]),
    ("pads", [1, 1, 1, 1, 1, True]), ("dilations", {1: 1}), ("res_dtype", 32),
    ("kernel_name", 7), ("group_dict", [("real_g", 1)]), ("groups", 1.7), ("groups", "1"),
])
def test_wrong_types_are_e62002(key, value):
    _raises("E62002", key, lambda: _dw(para=dict(BASE, **{key: value})))


def test_group_dict_values_are_ints():
    _raises("E62002", "group_dict['cin_ori']",
            lambda: _dw(para=dict(BASE, group_dict={"cin_ori": 16.0})))


def test_misspelled_para_dict_keys_are_refused_with_a_suggestion():
    e = _raises("E60000", "para_dict", lambda: _dw(para={"stride": [2, 2, 2]}))
    assert "did you mean 'strides'" in str(e)
    e = _raises("E60000", "para_dict", lambda: _dw(para=dict(BASE, padding=[1] * 6)))
    assert "padding" in str(e) and "pads" in str(e)
    e = _raises("E60000", "group_dict", lambda: _dw(para=dict(BASE, group_dict={"mag_fctor": 1})))
    assert "did you mean 'mag_factor'" in str(e)
    # TBE's own pass-through keys are accepted, used or not.
    assert _dw(para=dict(BASE, kernel_name="k", op_type="Conv3DBackpropFilter", fusion_para=None,
                         ori_tensors={})).shape == (1, 27, 16, 16)


def test_group_dict_blame_names_the_inconsistent_key():
    # groups 4, Cin = Cout = 16 (filter C 4); only cin_ori changed to 32.
    gd = tbex._C.derive_group_dict(16, 16, 4)
    assert _dw(filter_size=[16, 3, 4, 3, 3], para=dict(BASE, group_dict=gd)).shape[0] == gd["real_g"]
    e = _raises("E60038", "group_dict['cin_ori']",
                lambda: _dw(filter_size=[16, 3, 4, 3, 3], para=dict(BASE, group_dict=dict(gd, cin_ori=32))))
    assert "Cin=16" in str(e) and "groups=4" in str(e)
    # The other keys consistent with cin_ori = 32, but x's C1 = 1 cannot hold 32 channels.
    gd32 = tbex._C.derive_group_dict(32, 16, 8)
    e = _raises("E60010", "group_dict['cin_ori']",
                lambda: _dw(filter_size=[16, 3, 4, 3, 3], para=dict(BASE, group_dict=gd32)))
    assert "C1 1" in str(e)


# -------------------------------------------------------------------- convolution_backward

G = np.zeros((1, 16, 8), np.float32)
I = np.zeros((1, 16, 8), np.float32)
W = np.zeros((16, 16, 3), np.float32)
OK = dict(bias_sizes=[16], stride=[1], padding=[1], dilation=[1], transposed=False,
          output_padding=[0], groups=1, output_mask=[True, True, True])


def _cb(**changes):
    a = dict(OK, **changes)
    return tbex.convolution_backward(G, I, W, a["bias_sizes"], a["stride"], a["padding"],
                                     a["dilation"], a["transposed"], a["output_padding"],
                                     a["groups"], a["output_mask"])


def test_convolution_backward_baseline():
    gi, gw, gb = _cb()
    assert gi.shape == I.shape and gw.shape == W.shape and gb.shape == (16,)
    assert _cb(stride=np.int64(1), groups=np.int32(1), transposed=np.bool_(False),
               output_mask=np.array([True, False, False]))[1] is None


@pytest.mark.parametrize("param,value", [
    ("output_mask", None), ("groups", None), ("stride", [1.9]), ("groups", 1.7), ("stride", "11"),
    ("transposed", "False"), ("transposed", 0), ("output_mask", ["False"] * 3),
    ("output_mask", [1, 1, 1]), ("padding", [2**63 - 1]), ("dilation", [2**63 - 1]),
    ("padding", [2**64]), ("groups", 2**40), ("bias_sizes", "16"), ("output_mask", [True] * 2),
])
def test_convolution_backward_refuses_coercions(param, value):
    _raises("161002", param, lambda: _cb(**{param: value}))


def test_convolution_backward_codes():
    with pytest.raises(tbex.UserError) as info:
        tbex.convolution_backward(None, I, W, [16], [1], [1], [1], False, [0], 1, [True] * 3)
    assert info.value.code == "161001" and info.value.param == "grad_output"
    with pytest.raises(tbex.UserError) as info:
        tbex.convolution_backward(G, "x", W, [16], [1], [1], [1], False, [0], 1, [True] * 3)
    assert info.value.code == "161002"
    # A geometry the kernels' own checks refuse is an invalid parameter too.
    e = _raises("161002", "grad_output", lambda: _cb(stride=[2]))
    assert "spatial W" in str(e)


def test_operands_past_2_31_elements_are_refused_up_front():
    # Once accepted, then an internal error from Halide's constant folding in build.
    x = tvm.placeholder((1, 1, 1, 46341, 46341, 16), name="x", dtype="float16")
    dy = tvm.placeholder((1, 1, 1, 46341, 46341, 16), name="dy", dtype="float16")
    e = _raises("E60011", "x", lambda: dsl.conv3d_backprop_filter(x, dy, [16, 1, 16, 1, 1], {}))
    assert "2^31-1 elements" in str(e)
    # convolution_backward: the same limit, as an invalid parameter (zero-stride views: no memory).
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (1, 16, 46341, 46341), (0,) * 4)
    gy = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (1, 16, 46339, 46339), (0,) * 4)
    w = np.zeros((16, 16, 3, 3), np.float16)
    with pytest.raises(tbex.UserError) as info:
        tbex.convolution_backward(gy, big, w, None, [1], [0], [1], False, [0], 1, [False, True, False])
    assert info.value.code == "161002" and "2^31-1 elements" in str(info.value)


def test_layout_helpers_take_the_op_outputs_as_they_are():
    from tbex import layout
    rng = np.random.default_rng(0)
    # dW: (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16) is FRACTAL_Z_3D's bytes.
    w = rng.standard_normal((24, 4, 2, 3, 3)).astype(np.float32)
    fz = layout.oidhw_to_fz3d(w, 2)
    gd = tbex._C.derive_group_dict(8, 24, 2)
    dw_out = fz.reshape(gd["real_g"], -1, gd["cout_g"], 16)
    np.testing.assert_array_equal(layout.oidhw_from_fz3d(dw_out, w.shape, 2), w)
    # dX: (N, D, C1, H*W, 16) with hw=(H, W).
    x = rng.standard_normal((2, 20, 3, 4, 5)).astype(np.float32)
    a6 = layout.ncdhw_to_6hd(x)
    dx_out = a6.reshape(2, 3, 2, 20, 16)
    np.testing.assert_array_equal(layout.ncdhw_from_6hd(dx_out, 20, hw=(4, 5)), x)
    _raises("E62501", "hw", lambda: layout.ncdhw_from_6hd(dx_out, 20))
    _raises("E60000", "hw", lambda: layout.ncdhw_from_6hd(dx_out, 20, hw=(4, 4)))


def test_a_huge_stride_over_one_output_position_runs():
    # Found by the fuzzer's long run (a hang): stride 2^31-1 where D has one output position made
    # dX's stride-phase frame 2^31 phases. The stride never multiplies anything but 0 there.
    rng = np.random.default_rng(1)
    gy = rng.standard_normal((1, 5, 1, 3, 4)).astype(np.float32)
    x = rng.standard_normal((1, 1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((5, 1, 2, 1, 1)).astype(np.float32)
    args = ([5], [1, 0, 1], [2, 1, 1], False, [0, 0, 0], 1, [True, True, True])
    huge = tbex.convolution_backward(gy, x, w, [5], [2**31 - 1, 2, 2], *args[1:])
    small = tbex.convolution_backward(gy, x, w, [5], [2, 2, 2], *args[1:])  # also one D position
    for a, b in zip(huge, small):
        np.testing.assert_array_equal(a, b)
