"""Every case of tests/data/tbe_public_error_cases.json, translated to tbex's DSL arguments, plus
one-defect-at-a-time checks that pin each error code of docs/validation.md.

Translation of the raw TBE operator arguments (`*_as_given`):
- x / dedy shapes are NDHWC -> 6HD placeholders (N, D, ceil(C/16), H, W, 16); a 4-d given shape is
  passed as-is (a wrong-rank placeholder).
- Filter op (dW): filter_size is DHWCN -> [Cout, Kd, Cin/groups, Kh, Kw]; strides NDHWC 5 ints ->
  [sd, sh, sw]; dilations NDHWC 5 ints -> N,D,C,H,W order; other lengths are passed as given.
- Input op (dX): filter_size is the filter's shape in the format the TBE case declared (DHWCN unless
  the table says otherwise) -> [Cout, Cin/groups, Kd, Kh, Kw] with a FRACTAL_Z_3D placeholder of the
  matching shape; input_size = x_shape_as_given (NDHWC); strides and dilations are NDHWC, which is
  tbex's dX order, so they pass as given.
- groups is passed explicitly (the JSON's value) so "Cin == filter C * groups" is unambiguous.

Where a case has several defects at once, any of their codes is accepted (the order of
independent checks is tbex's, not TBE's); the one-defect tests below pin each code exactly.
"""

import numpy as np
import pytest

import oracle as O
import tbex
from tbex import dsl, tvm

ERROR_CASES = {c["case_name"]: c for c in O.load_data("tbe_public_error_cases.json")}

OUT_RULE = {"E60024", "E60025", "E62508"}
FILTER_NOT_FZ3D = {"E60006", "E62511"}  # a tensor of the wrong rank, or C0 != 16

# name: (kind, accepted codes, message tokens (any), overrides, one-line reason)
# kind "error": tbex.UserError expected; kind "compute": tbex must accept and compute correctly.
MAPPING = {
    # ---- Conv3DBackpropFilterD (dW)
    "x_batch_not_match_case": (
        "error", {"E62503"}, ("batch",), {},
        "x N=2 vs dedy N=1"),
    "invalid_dilation_n_case": (
        "error", {"E62510"}, ("dilation",), {},
        "dilations NDHWC [2,1,1,1,2] -> NDCHW [2,1,2,1,1]: N and C must be 1"),
    "pad_h_larger_than_filter_case": (
        "compute", None, None, {},
        "pads top/bottom 4 > Kh 2 is an Ascend limit only; the geometry is consistent (Ho=64)"),
    "filter_channel_not_match_case": (
        "error", {"E60010"}, ("cin", "channel", "filter"), {"dw_filter_dhwcn": [2, 2, 2, 48, 64]},
        "the JSON geometry is valid; TBE's suite used filter C=22, which 6HD x (C1=2) can't tell "
        "from 32, so use C=48 (3 blocks) vs x's 32 channels (2 blocks)"),
    "filter_h_larger_than_fmap_h_case": (
        "error", {"E60015"}, ("kernel", "filter_size"), {},
        "Kh=255 > padded H=120 (checked before the output-size rule, which then cannot hold)"),
    "w_res_not_match_case": (
        "error", OUT_RULE, ("out_backprop", "dedy"), {},
        "dedy (5,19,75) vs output-size rule (8,60,88): all three dims are wrong"),
    "invalid_fmap_shape_case": (
        "error", FILTER_NOT_FZ3D, ("x:", "fmap", "'x'"), {},
        "x given 4-d (16,120,176,32): passed as a wrong-rank placeholder"),
    "test_not_match_dedy_c": (
        "error", {"E62504"}, ("channel", "cout", "out_backprop", "dedy"), {},
        "dedy C=1 (1 block) vs Cout=64 (4 blocks)"),
    "invalid_stride_length_case": (
        "error", {"E62501"}, ("stride",), {},
        "strides of length 4 (dW takes 3)"),
    "filter_batch_not_match_case": (
        "error", {"E62504"}, ("channel", "cout", "out_backprop", "dedy", "filter"),
        {"dw_filter_dhwcn": [2, 2, 2, 32, 32]},
        "the JSON geometry is valid; TBE's suite used filter N (Cout)=32 vs dedy C=64"),
    "invalid_dedy_dtype_case": (
        "error", {"E60000"}, ("dtype", "type"), {"dy_dtype": "float32"},
        "the JSON geometry is valid; TBE's suite used a float32 dedy with a float16 x"),
    "invalid_dilations_length_case": (
        "error", {"E62501"}, ("dilation",), {},
        "dilations [1,0,1,0]: length 4"),
    # ---- Conv3DBackpropInputD (dX)
    "case19": (
        "error", FILTER_NOT_FZ3D, ("filter", "shape"),
        {"dx_filter_placeholder": "as_given", "dx_filter_size": [64, 32, 2, 2, 2]},
        "filter format NCDHWC (6 letters, 5 dims) is the only defect of the suite's call: tbex's "
        "analog is a filter tensor that is not FRACTAL_Z_3D (the raw 5-d shape as given)"),
    "case13": (
        "error", {"E62504", "E62508"}, ("channel", "cout", "out_backprop", "dedy"),
        {"dx_filter_format": "DNHCW"},
        "filter format DNHCW: read in that order the filter is Cout=2 (dedy has 64), Kw=64 "
        "(output W 57 != 88)"),
    "case14": (
        "error", {"E62503", "E60010", "E60014", "E60024", "E62508"},
        ("batch", "channel", "cin", "input_size", "kernel", "out_backprop"),
        {"dx_input_size_format": "DNHCW"},
        "y format DNHCW: tbex has no dx format argument; the input_size read in that order is "
        "N=16 D=1 H=120 W=32 C=176 (batch, channels, Kd>D and W rule all wrong)"),
    "case4": (
        "error", {"E62503", "E62504"} | OUT_RULE, ("batch", "channel", "cout", "out_backprop", "dedy"), {},
        "out_backprop given DHWCN (8,60,88,64,1), read as NDHWC: N=8 C=1 and wrong D/H/W"),
    "case10": (
        "error", FILTER_NOT_FZ3D, ("filter", "shape"), {"dx_filter_format": "NDHWC",
                                                         "dx_filter_placeholder": "oidhw"},
        "filter format NDHWC is not supported (the geometry is valid): tbex's analog is a filter "
        "tensor in OIDHW instead of FRACTAL_Z_3D"),
    "case7": (
        "error", {"E60010"}, ("cin", "channel", "input_size", "filter"), {},
        "input_size Cin=16 vs filter C=32 * groups 1"),
    "case25": (
        "error", {"E62508"}, ("out_backprop", "dedy"), {},
        "stride W 3: Wo=59 != dedy W 88"),
    "case11": (
        "error", {"E62503", "E62504"} | OUT_RULE, ("batch", "channel", "cout", "out_backprop", "dedy"), {},
        "out_backprop (8,6,8,6,1) NDHWC: N=8 C=1 and wrong D/H/W"),
    "case20": (
        "error", {"E60014"}, ("kernel", "filter_size"), {},
        "Kd=17 > padded D=16 (checked before the output-size rule)"),
    "case18": (
        "error", {"E60010", "E62508"}, ("cin", "channel", "filter"),
        {"dx_filter_format": "NCDHW"},
        "filter NCDHW (64,2,2,2,32): C=2 vs input_size Cin=32, and Kw=32 breaks the W rule"),
    "case26": (
        "error", {"E60024"}, ("out_backprop", "dedy"), {},
        "dilation D=2 (an Ascend limit in TBE) is supported by tbex, but then Do=7 != dedy D 8"),
    "case23": (
        "error", {"E60025"}, ("out_backprop", "dedy"), {},
        "stride H 10: Ho=12 != dedy H 60"),
    "case21": (
        "error", {"E60024"}, ("out_backprop", "dedy"), {},
        "stride D 4: Do=4 != dedy D 8"),
    "case15": (
        "error", {"E62510"}, ("dilation",), {},
        "dilations NDHWC [2,1,1,1,2]: N and C must be 1"),
}


def test_mapping_covers_every_case():
    assert len(ERROR_CASES) == 26
    assert set(MAPPING) == set(ERROR_CASES)
    for name, c in ERROR_CASES.items():
        assert c["expect"] == "RuntimeError", name


# ----------------------------------------------------------------------------------------------
# Translation


def _shape6_from_ndhwc(s):
    n, d, h, w, c = s
    return (n, d, O.ceil_div(c, 16), h, w, 16)


def _by_format(shape, fmt):
    """{'N': .., 'C': .., 'D': .., 'H': .., 'W': ..} of a 5-d shape given in `fmt`."""
    return dict(zip(fmt, shape))


def dw_call(c, ov):
    """Returns (thunk, details) calling dsl.conv3d_backprop_filter for case c."""
    dtype = c["dtype"]
    xs, dys = c["x_shape_as_given"], c["dedy_shape_as_given"]
    x_shape = _shape6_from_ndhwc(xs) if len(xs) == 5 else tuple(xs)
    dy_shape = _shape6_from_ndhwc(dys) if len(dys) == 5 else tuple(dys)
    kd, kh, kw, cpg, cout = ov.get("dw_filter_dhwcn", c["filter_size"])
    filter_size = [cout, kd, cpg, kh, kw]
    st = c["strides"]
    strides = [st[1], st[2], st[3]] if len(st) == 5 else list(st)
    dl = c["dilations"]
    dilations = [dl[0], dl[1], dl[4], dl[2], dl[3]] if len(dl) == 5 else list(dl)
    para = {"strides": strides, "pads": list(c["pads"]), "dilations": dilations,
            "res_dtype": "float32", "kernel_name": c["case_name"], "groups": c["groups"]}
    x = tvm.placeholder(x_shape, name="x", dtype=dtype)
    dy = tvm.placeholder(dy_shape, name="dy", dtype=ov.get("dy_dtype", dtype))
    return (lambda: dsl.conv3d_backprop_filter(x, dy, filter_size, para),
            dict(x=x_shape, dy=dy_shape, filter_size=filter_size, para=para))


def dx_call(c, ov):
    dtype = c["dtype"]
    f = _by_format(c["filter_size"], ov.get("dx_filter_format", "DHWCN"))
    filter_size = ov.get("dx_filter_size", [f["N"], f["C"], f["D"], f["H"], f["W"]])
    groups = c["groups"]
    mode = ov.get("dx_filter_placeholder", "fz3d")
    if mode == "fz3d":
        filt_shape = O.np_shape_fz3d(filter_size, groups)
    elif mode == "oidhw":
        filt_shape = tuple(filter_size)
    else:
        filt_shape = tuple(c["filter_size"])
    dy_shape = _shape6_from_ndhwc(c["dedy_shape_as_given"])
    given = c["x_shape_as_given"]
    if "dx_input_size_format" in ov:
        y = _by_format(given, ov["dx_input_size_format"])
        input_size = [y["N"], y["D"], y["H"], y["W"], y["C"]]
    else:
        input_size = list(given)
    para = {"strides": list(c["strides"]), "pads": list(c["pads"]),
            "dilations": list(c["dilations"]), "kernel_name": c["case_name"], "groups": groups}
    filt = tvm.placeholder(filt_shape, name="filter", dtype=dtype)
    dy = tvm.placeholder(dy_shape, name="dy", dtype=dtype)
    return (lambda: dsl.conv3d_backprop_input(filt, dy, filter_size, input_size, para),
            dict(filter=filt_shape, dy=dy_shape, filter_size=filter_size, input_size=input_size,
                 para=para))


def expect_user_error(thunk, codes, tokens, details=""):
    with pytest.raises(tbex.UserError) as info:
        res = thunk()
        # a lazy API may defer checks: give it every chance to complain
        dsl.auto_schedule(res)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.code in codes, f"code {err.code!r} not in {sorted(codes)}: {err} ({details})"
    msg = str(err).lower()
    assert any(t.lower() in msg for t in tokens), f"message names none of {tokens}: {err}"
    return err


@pytest.mark.parametrize("name", sorted(MAPPING))
def test_error_case(name):
    c = ERROR_CASES[name]
    kind, codes, tokens, ov, reason = MAPPING[name]
    thunk, details = (dw_call if "Filter" in c["op"] else dx_call)(c, ov)
    if kind == "error":
        expect_user_error(thunk, codes, tokens, details)
        return
    # Ascend-only limit: tbex computes it, and it must be right.
    assert "Filter" in c["op"]
    n, d, h, w, cin = c["x_shape_as_given"]
    _, do_, ho_, wo_, cout = c["dedy_shape_as_given"]
    kd, kh, kw, cpg, _ = c["filter_size"]
    geo = O.Geometry(n, cin, cout, (d, h, w), (kd, kh, kw), strides=tuple(details["para"]["strides"]),
                     pads=tuple(c["pads"]), dilations=(1, 1, 1), groups=c["groups"], name=name)
    assert geo.out_dhw == (do_, ho_, wo_), "the case is a consistent geometry"
    rng = np.random.default_rng(1)
    x, dy = O.int_data(rng, geo.x_shape), O.int_data(rng, geo.dy_shape)
    raw = O.run_dw(geo, x, dy, c["dtype"])
    O.check_dw(raw, O.ref_dw(x, dy, geo), geo, what=name)


# ----------------------------------------------------------------------------------------------
# One defect at a time (small base geometry, valid as is)

BASE = O.Geometry(2, 24, 20, (6, 7, 8), (2, 3, 2), strides=(2, 1, 2), pads=(1, 0, 1, 1, 0, 1),
                  dilations=(1, 1, 1), name="base")


def _dw(x_shape=None, dy_shape=None, filter_size=None, x_dtype="float16", dy_dtype=None, **para):
    """A thunk making BASE's dW call with the given changes (placeholders made inside it)."""
    g = BASE
    p = g.dw_para()
    p.update(para)

    def call():
        x = tvm.placeholder(x_shape or O.np_shape_6hd(g.x_shape), name="x", dtype=x_dtype)
        dy = tvm.placeholder(dy_shape or O.np_shape_6hd(g.dy_shape), name="dy",
                             dtype=dy_dtype or x_dtype)
        return dsl.conv3d_backprop_filter(x, dy, filter_size or g.dw_filter_size(), p)
    return call


def _dx(filt_shape=None, dy_shape=None, filter_size=None, input_size=None, dtype="float16",
        dy_dtype=None, **para):
    g = BASE
    p = g.dx_para()
    p.update(para)
    fs = filter_size or g.dx_filter_size()

    def call():
        fshape = filt_shape or _fz3d_shape_or_guess(fs, p.get("groups", 1))
        filt = tvm.placeholder(fshape, name="filter", dtype=dtype)
        dy = tvm.placeholder(dy_shape or O.np_shape_6hd(g.dy_shape), name="dy",
                             dtype=dy_dtype or dtype)
        return dsl.conv3d_backprop_input(filt, dy, fs, input_size or g.dx_input_size(), p)
    return call


def _fz3d_shape_or_guess(fs, groups):
    """FRACTAL_Z_3D shape for filter_size fs; for invalid groups, the groups=1 shape."""
    if groups >= 1 and fs[0] % groups == 0:
        return O.np_shape_fz3d(fs, groups)
    return O.np_shape_fz3d(fs, 1)


def _dy6(**change):
    n, c, d, h, w = BASE.dy_shape
    v = dict(n=n, c=c, d=d, h=h, w=w)
    v.update(change)
    return O.np_shape_6hd((v["n"], v["c"], v["d"], v["h"], v["w"]))


def test_base_geometry_is_valid():
    """The one-defect variants below differ from a call that works."""
    assert BASE.out_dhw == (3, 7, 4)  # by hand: (7-2)//2+1, (9-3)//1+1, (9-2)//2+1
    for thunk in (_dw(), _dx()):
        res = thunk()
        dsl.auto_schedule(res)


ONE_DEFECT = {
    # dW ------------------------------------------------------------------------------------
    "dw_x_c0_8": (_dw(x_shape=(2, 6, 2, 7, 8, 8)), {"E62511"}, ("c0",)),
    "dw_dy_c0_32": (_dw(dy_shape=(2, 3, 2, 7, 4, 32)), {"E62511"}, ("c0",)),
    "dw_batch": (_dw(dy_shape=_dy6(n=3)), {"E62503"}, ("batch",)),
    "dw_dy_channels": (_dw(filter_size=[40, 2, 24, 3, 2]), {"E62504"}, ("channel", "cout")),
    "dw_cin": (_dw(filter_size=[20, 2, 40, 3, 2]), {"E60010"}, ("channel", "cin")),
    "dw_dilation_n": (_dw(dilations=[2, 1, 1, 1, 1]), {"E62510"}, ("dilation",)),
    "dw_dilation_c": (_dw(dilations=[1, 1, 3, 1, 1]), {"E62510"}, ("dilation",)),
    "dw_kernel_d": (_dw(filter_size=[20, 9, 24, 3, 2]), {"E60014"}, ("kernel", "filter_size")),
    "dw_kernel_h_dilated": (_dw(dilations=[1, 1, 1, 5, 1]), {"E60015"}, ("kernel", "filter_size")),
    "dw_kernel_w": (_dw(filter_size=[20, 2, 24, 3, 10]), {"E62507"}, ("kernel", "filter_size")),
    "dw_out_d": (_dw(dy_shape=_dy6(d=4)), {"E60024"}, ("out_backprop", "dedy")),
    "dw_out_h": (_dw(dy_shape=_dy6(h=6)), {"E60025"}, ("out_backprop", "dedy")),
    "dw_out_w": (_dw(dy_shape=_dy6(w=5)), {"E62508"}, ("out_backprop", "dedy")),
    "dw_groups_cout": (_dw(filter_size=[20, 2, 8, 3, 2], groups=3), {"E60038"}, ("group",)),
    # groups <= 0 is E60038 (docs/group_dict.md)
    "dw_groups_zero": (_dw(groups=0), {"E60038"}, ("group",)),
    "dw_groups_negative": (_dw(groups=-2), {"E60038"}, ("group",)),
    "dx_groups_zero": (_dx(groups=0), {"E60038"}, ("group",)),
    "dw_groups_gt_cout": (_dw(filter_size=[2, 2, 1, 3, 2], dy_shape=_dy6(c=2), groups=24),
                          {"E60038"}, ("group",)),
    "dw_strides_len": (_dw(strides=[2, 1, 2, 1]), {"E62501"}, ("stride",)),
    "dw_pads_len": (_dw(pads=[1, 0, 1, 1]), {"E62501"}, ("pad",)),
    "dw_dilations_len": (_dw(dilations=[1, 1, 1]), {"E62501"}, ("dilation",)),
    "dw_pads_negative": (_dw(pads=[1, 0, -1, 3, 0, 1]), {"E60000"}, ("pad",)),
    # a zero kernel also breaks the output-size rule; the dims check speaks first
    "dw_filter_size_zero": (_dw(filter_size=[20, 2, 24, 0, 2]), {"E62509"},
                            ("filter_size", "kernel")),
    "dw_filter_size_len": (_dw(filter_size=[20, 2, 24, 3]), {"E62501"}, ("filter_size",)),
    "dw_dtype_mismatch": (_dw(dy_dtype="float32"), {"E60000"}, ("dtype",)),
    "dw_dtype_int8": (_dw(x_dtype="int8"), {"E60000"}, ("dtype",)),
    "dw_res_dtype_fp16": (_dw(res_dtype="float16"), {"E60000"}, ("res_dtype",)),
    # dX ------------------------------------------------------------------------------------
    "dx_dy_c0_8": (_dx(dy_shape=(2, 3, 2, 7, 4, 8)), {"E62511"}, ("c0",)),
    "dx_batch": (_dx(input_size=[3, 6, 7, 8, 24]), {"E62503"}, ("batch",)),
    "dx_dy_channels": (_dx(dy_shape=_dy6(c=40)), {"E62504"}, ("channel", "cout")),
    "dx_cin": (_dx(input_size=[2, 6, 7, 8, 16]), {"E60010"}, ("channel", "cin")),
    "dx_dilation_n": (_dx(dilations=[2, 1, 1, 1, 1]), {"E62510"}, ("dilation",)),
    "dx_dilation_c": (_dx(dilations=[1, 1, 1, 1, 2]), {"E62510"}, ("dilation",)),
    "dx_kernel_d": (_dx(input_size=[2, 1, 7, 8, 24], pads=[0, 0, 1, 1, 0, 1]), {"E60014"},
                    ("kernel", "filter_size")),
    "dx_kernel_h": (_dx(filter_size=[20, 24, 2, 10, 2]), {"E60015"}, ("kernel", "filter_size")),
    "dx_kernel_w_dilated": (_dx(dilations=[1, 1, 1, 9, 1]), {"E62507"}, ("kernel", "filter_size")),
    "dx_out_d": (_dx(dy_shape=_dy6(d=2)), {"E60024"}, ("out_backprop", "dedy")),
    "dx_out_h": (_dx(dy_shape=_dy6(h=8)), {"E60025"}, ("out_backprop", "dedy")),
    "dx_out_w": (_dx(dy_shape=_dy6(w=6)), {"E62508"}, ("out_backprop", "dedy")),
    "dx_groups_cout": (_dx(filter_size=[20, 8, 2, 3, 2], groups=3), {"E60038"}, ("group",)),
    "dx_groups_cin": (_dx(filter_size=[20, 4, 2, 3, 2], groups=5), {"E60038", "E60010"},
                      ("group", "cin", "channel")),
    # a FRACTAL_Z_3D shape that disagrees with filter_size: TBE has no code of its own; tbex
    # raises E60010 (channel mismatch), the nearest (docs/validation.md)
    "dx_filter_shape": (_dx(filt_shape=(12, 2, 16, 16)), {"E60010"}, ("filter",)),
    "dx_filter_rank": (_dx(filt_shape=(12, 2, 16, 16, 1)), {"E60006"}, ("filter",)),
    "dx_strides_len": (_dx(strides=[1, 2, 1, 2]), {"E62501"}, ("stride",)),
    "dx_pads_len": (_dx(pads=[1, 0, 1, 1, 0]), {"E62501"}, ("pad",)),
    "dx_dilations_len": (_dx(dilations=[1, 1, 1, 1]), {"E62501"}, ("dilation",)),
    "dx_pads_negative": (_dx(pads=[1, 0, 1, 1, -1, 2]), {"E60000"}, ("pad",)),
    "dx_input_size_len": (_dx(input_size=[2, 6, 7, 8]), {"E62501"}, ("input_size",)),
    "dx_dtype_mismatch": (_dx(dy_dtype="bfloat16"), {"E60000"}, ("dtype",)),
    "dx_res_dtype_int8": (_dx(res_dtype="int8"), {"E60000"}, ("res_dtype", "dtype")),
    # the general checks of every DSL argument
    "dw_x_rank": (_dw(x_shape=(2, 6, 2, 7, 8)), {"E60006"}, ("dim",)),
    "dw_strides_float": (_dw(strides=[2, 1.0, 2]), {"E62002"}, ("type",)),
    "dw_strides_str": (_dw(strides="222"), {"E62002"}, ("type",)),
    "dw_filter_size_none_item": (_dw(filter_size=[20, 2, None, 3, 2]), {"E62002"}, ("type",)),
    "dw_filter_size_bool": (_dw(filter_size=[20, 2, True, 3, 2]), {"E62002"}, ("type",)),
    "dw_strides_negative": (_dw(strides=[2, -1, 2]), {"E62509"}, ("positive",)),
    "dw_dilation_zero": (_dw(dilations=[1, 1, 1, 0, 1]), {"E62509"}, ("positive",)),
    "dw_stride_too_big": (_dw(strides=[2**31, 1, 2]), {"E60011"}, ("range",)),
    "dw_pad_too_big": (_dw(pads=[2**40, 0, 1, 1, 0, 1]), {"E60011"}, ("range",)),
    "dw_stride_past_int64": (_dw(strides=[2**63, 1, 2]), {"E60011"}, ("range",)),
    "dx_input_size_too_big": (_dx(input_size=[2, 6, 7, 2**33, 24]), {"E60011"}, ("range",)),
}


@pytest.mark.parametrize("name", sorted(ONE_DEFECT))
def test_one_defect(name):
    thunk, codes, tokens = ONE_DEFECT[name]
    expect_user_error(thunk, codes, tokens, name)


def test_wrong_group_dict_rejected_with_its_key_named():
    gd = O.group_dict(24, 20, 1)
    gd["cout_g"] = 48
    expect_user_error(_dw(group_dict=gd), {"", "E60038"}, ("cout_g",))
    expect_user_error(_dx(group_dict=gd), {"", "E60038"}, ("cout_g",))


def test_element_count_overflow_is_a_user_error():
    """2**64 elements: rejected with a clear error, never a crash (docs/validation.md)."""
    big = 2 ** 20
    with pytest.raises(tbex.UserError):
        x = tvm.placeholder((big, big, 1, big, 1, 16), name="x", dtype="float16")
        dy = tvm.placeholder((big, big, 1, big, 1, 16), name="dy", dtype="float16")
        res = dsl.conv3d_backprop_filter(x, dy, [16, 1, 16, 1, 1],
                                         {"strides": [1, 1, 1], "pads": [0] * 6,
                                          "dilations": [1] * 5, "res_dtype": "float32"})
        dsl.build(dsl.auto_schedule(res), {"name": "big", "tensor_list": [x, dy, res]})
