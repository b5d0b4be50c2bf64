"""The Python API surface: the TBE seed example, eager form, out=, kernel argument checks,
bfloat16 in its three forms, DLPack (torch), group_dict, UserError, and tbex.layout."""
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import oracle as O
import tbex
from tbex import dsl, layout, tvm

# The seed example's problem in NCDHW terms (examples/tbe_doc_example.py).
SEED_GEO = O.Geometry(16, 16, 16, (8, 72, 72), (2, 3, 3), strides=(2, 2, 2),
                      pads=(0, 0, 0, 1, 0, 1), name="seed")


def _seed_example():
    """The TBE DSL documentation's example verbatim, except the import line."""
    from tbex import tvm
    from tbex import dsl

    shape_dedy = (16, 4, 1, 36, 36, 16)
    out_backprop_dtype = "float16"
    filter_sizes = [16, 2, 16, 3, 3]
    shape_fmap = (16, 8, 1, 72, 72, 16)
    x_dtype = "float16"

    dedy = tvm.placeholder(shape_dedy, name="dedy", dtype=out_backprop_dtype)
    fmap = tvm.placeholder(shape_fmap, name="fmap", dtype=x_dtype)

    strides = [2, 2, 2]
    pads = [0, 0, 0, 1, 0, 1]
    dilations = [1, 1, 1, 1, 1]
    res_dtype = "float32"
    kernel_name = "conv3d_backprop_filter_dx_16_8_72_72_16_dy_16_4_36_36_16_dw_2_3_3_16_16_s_1_2_2_2_1_p_SAME"
    group_dict = {'real_g': 1, 'mag_factor': 1, 'cin1_g': 1, 'cout_g': 16, 'cin_ori': 16, 'cout_ori': 16}

    para_dict = {
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "res_dtype": res_dtype,
        "kernel_name": kernel_name,
        "group_dict": group_dict
    }

    dedw = dsl.conv3d_backprop_filter(
        x=fmap,
        out_backprop=dedy,
        filter_size=filter_sizes,
        para_dict=para_dict
    )
    return fmap, dedy, dedw


@pytest.fixture(scope="module")
def seed_data():
    rng = np.random.default_rng(3)
    x = O.random_data(rng, SEED_GEO.x_shape, "float16")
    dy = O.random_data(rng, SEED_GEO.dy_shape, "float16")
    return x, dy, O.ref_dw(x, dy, SEED_GEO)


@pytest.fixture(scope="module")
def seed_kernel():
    fmap, dedy, dedw = _seed_example()
    sch = dsl.auto_schedule(dedw)
    return dsl.build(sch, {"name": "seed", "tensor_list": [fmap, dedy, dedw]})


def test_seed_example(seed_data, seed_kernel):
    fmap, dedy, dedw = _seed_example()
    assert tuple(dedw.shape) == (1, 18, 16, 16)
    assert str(dedw.dtype) == "float32"
    assert SEED_GEO.dy_shape == (16, 16, 4, 36, 36)  # the seed's dedy is consistent
    x, dy, ref = seed_data
    out = seed_kernel(O.to_6hd(x.astype(np.float16)), O.to_6hd(dy.astype(np.float16)))
    assert isinstance(out, np.ndarray)
    O.check_dw(out, ref, SEED_GEO, what="seed example")


def test_seed_example_reference_schedule(seed_data):
    fmap, dedy, dedw = _seed_example()
    kernel = dsl.build(dsl.auto_schedule(dedw, schedule="reference"),
                       {"name": "seed_ref", "tensor_list": [fmap, dedy, dedw]})
    x, dy, ref = seed_data
    out = kernel(O.to_6hd(x.astype(np.float16)), O.to_6hd(dy.astype(np.float16)))
    O.check_dw(out, ref, SEED_GEO, what="seed example, reference schedule")


# ----------------------------------------------------------------------------------------------
# Eager form

SMALL = O.Geometry(2, 20, 24, (4, 6, 5), (2, 3, 2), strides=(1, 2, 2), pads=(1, 0, 1, 1, 0, 1),
                   dilations=(1, 1, 2), name="small")
SMALL_G = O.Geometry(1, 20, 56, (3, 5, 4), (1, 2, 2), strides=(1, 1, 2), pads=(0, 1, 1, 0, 2, 0),
                     groups=4, name="small_g")


def test_eager_dw():
    geo = SMALL
    rng = np.random.default_rng(4)
    x = O.random_data(rng, geo.x_shape, "float16")
    dy = O.random_data(rng, geo.dy_shape, "float16")
    out = dsl.conv3d_backprop_filter(O.to_6hd(x.astype(np.float16)),
                                     O.to_6hd(dy.astype(np.float16)),
                                     geo.dw_filter_size(), geo.dw_para())
    assert isinstance(out, np.ndarray)
    O.check_dw(out, O.ref_dw(x, dy, geo), geo, what="eager dW")


@pytest.mark.parametrize("res_dtype", [None, "float32"])
def test_eager_dx(res_dtype):
    geo = SMALL_G
    rng = np.random.default_rng(5)
    w = O.random_data(rng, geo.w_shape, "float32")
    dy = O.random_data(rng, geo.dy_shape, "float32")
    para = geo.dx_para(**({"res_dtype": res_dtype} if res_dtype else {}))
    out = dsl.conv3d_backprop_input(O.to_fz3d(w.astype(np.float32), geo.groups),
                                    O.to_6hd(dy.astype(np.float32)), geo.dx_filter_size(),
                                    geo.dx_input_size(), para)
    assert isinstance(out, np.ndarray)
    O.check_dx(out, O.ref_dx(w, dy, geo), geo, res_dtype or "float16", what="eager dX")


# ----------------------------------------------------------------------------------------------
# Built kernels: out=, argument checks


@pytest.fixture(scope="module")
def small_dw():
    geo = SMALL
    x = tvm.placeholder(O.np_shape_6hd(geo.x_shape), name="x", dtype="float16")
    dy = tvm.placeholder(O.np_shape_6hd(geo.dy_shape), name="dy", dtype="float16")
    res = dsl.conv3d_backprop_filter(x, dy, geo.dw_filter_size(), geo.dw_para())
    kernel = dsl.build(dsl.auto_schedule(res), {"name": "small_dw", "tensor_list": [x, dy, res]})
    rng = np.random.default_rng(6)
    x64 = O.random_data(rng, geo.x_shape, "float16")
    dy64 = O.random_data(rng, geo.dy_shape, "float16")
    args = (O.to_6hd(x64.astype(np.float16)), O.to_6hd(dy64.astype(np.float16)))
    return kernel, args, O.ref_dw(x64, dy64, geo)


def test_out_is_written_in_place(small_dw):
    kernel, args, ref = small_dw
    out = np.full(SMALL.dw_out_shape(), np.nan, dtype=np.float32)
    address = out.ctypes.data
    ret = kernel(*args, out=out)
    assert ret is out
    assert out.ctypes.data == address
    O.check_dw(out, ref, SMALL, what="out=")
    # a second call overwrites (no accumulation into out)
    kernel(*args, out=out)
    O.check_dw(out, ref, SMALL, what="out= again")


@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_out_mismatch_raises(small_dw, bad):
    kernel, args, _ = small_dw
    shape = SMALL.dw_out_shape()
    out = (np.zeros(shape[:-1] + (8,), np.float32) if bad == "shape"
           else np.zeros(shape, np.float16))
    with pytest.raises((ValueError, TypeError)):
        kernel(*args, out=out)


def test_kernel_rejects_wrong_input_shape(small_dw):
    kernel, (x6, dy6), _ = small_dw
    with pytest.raises(tbex.UserError):
        kernel(x6[:, :-1], dy6)
    with pytest.raises(tbex.UserError):
        kernel(x6, dy6.reshape(dy6.shape[0], -1))


def test_kernel_rejects_wrong_input_dtype(small_dw):
    kernel, (x6, dy6), _ = small_dw
    with pytest.raises(tbex.UserError):
        kernel(x6.astype(np.float32), dy6)
    with pytest.raises(tbex.UserError):
        kernel(x6, dy6.astype(ml_dtypes.bfloat16))


def test_kernel_rejects_wrong_argument_count(small_dw):
    kernel, (x6, dy6), _ = small_dw
    with pytest.raises((tbex.UserError, TypeError)):
        kernel(x6)


def test_non_contiguous_inputs_are_copied_dense(small_dw):
    """A strided view or a Fortran-ordered copy: the kernels read dense inputs, so the JIT copies
    it first (a warning names the input, once per process) and the answer is the same."""
    kernel, (x6, dy6), ref = small_dw
    holder = np.zeros((2 * x6.shape[0],) + x6.shape[1:], dtype=x6.dtype)
    holder[::2] = x6
    for x_arg in (holder[::2], np.asfortranarray(x6)):
        assert not x_arg.flags.c_contiguous
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = kernel(x_arg, dy6)
        for w in seen:
            assert issubclass(w.category, tbex.PerformanceWarning)
            assert "not C-contiguous" in str(w.message)
        O.check_dw(out, ref, SMALL, what="non-contiguous x")


def test_kernel_result_is_fresh_each_call(small_dw):
    kernel, args, ref = small_dw
    a = kernel(*args)
    b = kernel(*args)
    assert a is not b
    assert np.array_equal(a, b)
    O.check_dw(a, ref, SMALL, what="repeat call")


# ----------------------------------------------------------------------------------------------
# bfloat16: ml_dtypes, uint16 bits, torch via DLPack


@pytest.fixture(scope="module")
def bf16_dw():
    geo = SMALL
    x = tvm.placeholder(O.np_shape_6hd(geo.x_shape), name="x", dtype="bfloat16")
    dy = tvm.placeholder(O.np_shape_6hd(geo.dy_shape), name="dy", dtype="bfloat16")
    res = dsl.conv3d_backprop_filter(x, dy, geo.dw_filter_size(), geo.dw_para())
    kernel = dsl.build(dsl.auto_schedule(res), {"name": "bf16_dw", "tensor_list": [x, dy, res]})
    rng = np.random.default_rng(7)
    x64 = O.random_data(rng, geo.x_shape, "bfloat16")
    dy64 = O.random_data(rng, geo.dy_shape, "bfloat16")
    args = (O.to_6hd(O.to_dtype(x64, "bfloat16")), O.to_6hd(O.to_dtype(dy64, "bfloat16")))
    return kernel, args, O.ref_dw(x64, dy64, geo)


def test_bf16_ml_dtypes(bf16_dw):
    kernel, args, ref = bf16_dw
    assert args[0].dtype == ml_dtypes.bfloat16
    O.check_dw(kernel(*args), ref, SMALL, what="bf16 ml_dtypes")


def test_bf16_as_uint16_bits(bf16_dw):
    kernel, (x6, dy6), ref = bf16_dw
    out_bits = kernel(x6.view(np.uint16), dy6.view(np.uint16))
    O.check_dw(out_bits, ref, SMALL, what="bf16 as uint16")
    assert np.array_equal(out_bits, kernel(x6, dy6))


def _to_numpy(ret):
    return ret.numpy() if isinstance(ret, torch.Tensor) else np.asarray(ret)


def test_bf16_torch_tensors_via_dlpack(bf16_dw):
    kernel, (x6, dy6), ref = bf16_dw
    tx = torch.from_numpy(x6.astype(np.float32)).to(torch.bfloat16)
    tdy = torch.from_numpy(dy6.astype(np.float32)).to(torch.bfloat16)
    # the tensors hold exactly the same values
    assert np.array_equal(tx.float().numpy(), x6.astype(np.float32))
    out = _to_numpy(kernel(tx, tdy))
    O.check_dw(out, ref, SMALL, what="bf16 torch")
    assert np.array_equal(out, kernel(x6, dy6))


def test_fp32_torch_tensors_via_dlpack():
    geo = SMALL_G
    rng = np.random.default_rng(8)
    w = O.random_data(rng, geo.w_shape, "float32")
    dy = O.random_data(rng, geo.dy_shape, "float32")
    fp = tvm.placeholder(O.np_shape_fz3d(geo.w_shape, geo.groups), name="filter", dtype="float32")
    dyp = tvm.placeholder(O.np_shape_6hd(geo.dy_shape), name="dy", dtype="float32")
    res = dsl.conv3d_backprop_input(fp, dyp, geo.dx_filter_size(), geo.dx_input_size(),
                                    geo.dx_para(res_dtype="float32"))
    kernel = dsl.build(dsl.auto_schedule(res), {"name": "dx_torch", "tensor_list": [fp, dyp, res]})
    tf = torch.from_numpy(O.to_fz3d(w.astype(np.float32), geo.groups))
    tdy = torch.from_numpy(O.to_6hd(dy.astype(np.float32)))
    out = _to_numpy(kernel(tf, tdy))
    O.check_dx(out, O.ref_dx(w, dy, geo), geo, "float32", what="fp32 torch dX")


# ----------------------------------------------------------------------------------------------
# group_dict, groups default, UserError


def test_group_dict_given_and_correct_works():
    geo = SMALL_G
    gd = O.group_dict(geo.cin, geo.cout, geo.groups)
    assert gd == {"real_g": 1, "mag_factor": 4, "cin1_g": 2, "cout_g": 64, "cin_ori": 20,
                  "cout_ori": 56}  # the example of docs/group_dict.md
    rng = np.random.default_rng(9)
    x = O.random_data(rng, geo.x_shape, "float32")
    dy = O.random_data(rng, geo.dy_shape, "float32")
    w = O.random_data(rng, geo.w_shape, "float32")
    raw = O.run_dw(geo, x, dy, "float32", para_extra={"group_dict": gd, "groups": None})
    O.check_dw(raw, O.ref_dw(x, dy, geo), geo, what="dW with group_dict")
    raw = O.run_dx(geo, w, dy, "float32", res_dtype="float32",
                   para_extra={"group_dict": gd, "groups": None})
    O.check_dx(raw, O.ref_dx(w, dy, geo), geo, "float32", what="dX with group_dict")


GD_KEYS = ["real_g", "mag_factor", "cin1_g", "cout_g", "cin_ori", "cout_ori"]


@pytest.mark.parametrize("op", ["dW", "dX"])
@pytest.mark.parametrize("key", GD_KEYS)
def test_group_dict_with_one_wrong_key(op, key):
    geo = SMALL_G
    gd = O.group_dict(geo.cin, geo.cout, geo.groups)
    gd[key] += 16 if key in ("cout_g", "cin_ori", "cout_ori") else 1
    with pytest.raises(tbex.UserError) as info:
        if op == "dW":
            x = tvm.placeholder(O.np_shape_6hd(geo.x_shape), name="x", dtype="float16")
            dy = tvm.placeholder(O.np_shape_6hd(geo.dy_shape), name="dy", dtype="float16")
            res = dsl.conv3d_backprop_filter(x, dy, geo.dw_filter_size(),
                                             geo.dw_para(group_dict=gd, groups=None))
        else:
            f = tvm.placeholder(O.np_shape_fz3d(geo.w_shape, geo.groups), name="f",
                                dtype="float16")
            dy = tvm.placeholder(O.np_shape_6hd(geo.dy_shape), name="dy", dtype="float16")
            res = dsl.conv3d_backprop_input(f, dy, geo.dx_filter_size(), geo.dx_input_size(),
                                            geo.dx_para(group_dict=gd, groups=None))
        dsl.auto_schedule(res)
    assert key in str(info.value), str(info.value)


def test_groups_default_is_one():
    """Neither groups nor group_dict: groups = 1, so filter C (16) * 1 != x's 32 channels."""
    x = tvm.placeholder((1, 3, 2, 4, 4, 16), name="x", dtype="float16")
    dy = tvm.placeholder((1, 2, 2, 3, 3, 16), name="dy", dtype="float16")
    para = {"strides": [1, 1, 1], "pads": [0] * 6, "dilations": [1] * 5, "res_dtype": "float32"}
    with pytest.raises(tbex.UserError) as info:
        dsl.auto_schedule(dsl.conv3d_backprop_filter(x, dy, [32, 2, 16, 2, 2], para))
    assert info.value.code == "E60010"
    res = dsl.conv3d_backprop_filter(x, dy, [32, 2, 16, 2, 2], dict(para, groups=2))
    # groups=2: cin_pg = cout_pg = 16 -> mag 1, real_g 2, cin1_g 1, cout_g 16
    assert tuple(res.shape) == (2, 2 * 1 * 2 * 2, 16, 16)


def test_groups_default_is_one_for_dx():
    """The same for dX: input_size Cin 32, filter C 16, and no groups / group_dict means
    groups = 1, so E60010, even with a filter tensor shaped for groups=2 (no inferred groups)."""
    f2 = tvm.placeholder(O.np_shape_fz3d((32, 16, 2, 2, 2), 2), name="f", dtype="float16")
    dy = tvm.placeholder((1, 2, 2, 3, 3, 16), name="dy", dtype="float16")
    para = {"strides": [1] * 5, "pads": [0] * 6, "dilations": [1] * 5}
    with pytest.raises(tbex.UserError) as info:
        dsl.auto_schedule(dsl.conv3d_backprop_input(f2, dy, [32, 16, 2, 2, 2], [1, 3, 4, 4, 32],
                                                    para))
    assert info.value.code == "E60010"
    assert "groups" in str(info.value)
    res = dsl.conv3d_backprop_input(f2, dy, [32, 16, 2, 2, 2], [1, 3, 4, 4, 32],
                                    dict(para, groups=2))
    assert tuple(res.shape) == (1, 3, 2, 16, 16)


def test_user_error_is_value_error_with_code():
    assert issubclass(tbex.UserError, ValueError)
    x = tvm.placeholder((1, 3, 2, 4, 4, 16), name="x", dtype="float16")
    dy = tvm.placeholder((1, 2, 2, 3, 3, 16), name="dy", dtype="float16")
    para = {"strides": [1, 1, 1], "pads": [0] * 6, "dilations": [1] * 5, "res_dtype": "float32",
            "groups": 3}
    # Cin = 8 * 3 = 24 fits x's two blocks; Cout 32 % 3 != 0
    with pytest.raises(ValueError) as info:
        dsl.auto_schedule(dsl.conv3d_backprop_filter(x, dy, [32, 2, 8, 2, 2], para))
    err = info.value
    assert isinstance(err, tbex.UserError)
    assert err.code == "E60038"
    assert "group" in str(err).lower()
    with pytest.raises(tbex.UserError) as info:
        dsl.conv3d_backprop_filter(x, dy, [32, 2, 16, 2, 2], dict(para, groups=1, strides=[1, 1]))
    assert info.value.code == "E62501"
    assert "stride" in str(info.value).lower()


# ----------------------------------------------------------------------------------------------
# tbex.layout against the independent numpy implementation


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 20, 3, 4, 5), (1, 32, 2, 1, 3),
                                   (1, 33, 1, 2, 2)])
def test_layout_6hd(shape, dtype):
    a = O.to_dtype(O.random_data(np.random.default_rng(10), shape, dtype), dtype)
    a6 = O.to_6hd(a)  # asserts equality with numpy
    assert tuple(layout.shape_6hd(shape)) == O.np_shape_6hd(shape)
    assert a6.dtype == a.dtype
    back = O.from_6hd(a6, shape[1])
    assert np.array_equal(back.view(np.uint8), a.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("oidhw,groups", [((16, 16, 1, 1, 1), 1), ((20, 17, 2, 1, 3), 1),
                                          ((56, 5, 1, 2, 1), 4), ((48, 8, 1, 1, 2), 6),
                                          ((12, 4, 2, 1, 1), 3), ((40, 1, 1, 2, 2), 40),
                                          ((16, 1, 1, 1, 1), 8), ((45, 2, 1, 1, 1), 15),
                                          ((32, 32, 1, 1, 1), 2)])
def test_layout_fz3d(oidhw, groups, dtype):
    w = O.to_dtype(O.random_data(np.random.default_rng(11), oidhw, dtype), dtype)
    fz = O.to_fz3d(w, groups)  # asserts equality with numpy
    assert tuple(layout.shape_fz3d(oidhw, groups)) == O.np_shape_fz3d(oidhw, groups)
    back = O.from_fz3d(fz, oidhw, groups)
    assert np.array_equal(back.view(np.uint8), w.view(np.uint8))


def test_layout_spec_examples():
    assert tuple(layout.shape_fz3d((512, 512, 3, 3, 3), 1)) == (864, 32, 16, 16)
    assert tuple(layout.shape_fz3d((320, 1, 1, 2, 2), 320)) == (80, 1, 16, 16)
    assert tuple(layout.shape_6hd((2, 17, 3, 4, 5))) == (2, 3, 2, 4, 5, 16)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", np.uint8])
@pytest.mark.parametrize("shape", [(3, 5), (1,), (2, 0, 4), 7])
def test_layout_empty_starts_on_a_line(shape, dtype):
    a = layout.empty(shape, dtype)
    want = tuple(shape) if isinstance(shape, tuple) else (shape,)
    assert a.shape == want and a.flags.c_contiguous and a.flags.writeable
    assert a.dtype.name == (dtype if isinstance(dtype, str) else np.dtype(dtype).name)
    if a.size:  # (numpy gives an empty array a pointer of its own)
        assert a.ctypes.data % layout.LINE_BYTES == 0
    a[...] = 1  # the whole array is writable memory of its own
    assert a.sum() == a.size


def test_outputs_tbex_allocates_start_on_a_line():
    geo = O.Geometry(1, 16, 16, (2, 3, 5), (1, 1, 1), name="tiny")
    rng = np.random.default_rng(3)
    w = O.random_data(rng, geo.w_shape, "float32")
    dy = O.random_data(rng, geo.dy_shape, "float32")
    for _ in range(4):  # numpy's own buffers start 16 bytes into a line about every other time
        out = O.run_dx(geo, w, dy, "float32", res_dtype="float32")
        assert out.ctypes.data % layout.LINE_BYTES == 0
