"""Self-checks of the test oracle (needs no tbex): the numpy layouts against the per-element
formulas of docs/layouts.md, group_dict against the examples of docs/group_dict.md, and the torch
references against direct sums written from the definitions of dW and dX in docs/layouts.md."""
import itertools

import numpy as np
import pytest

import oracle as O


def _fz3d_by_formula(wt, groups):
    """The grouped FRACTAL_Z_3D formula of docs/layouts.md, one element at a time."""
    cout, cin_pg, kd_, kh_, kw_ = wt.shape
    cout_pg = cout // groups
    gd = O.group_dict(cin_pg * groups, cout, groups)
    mag, cin1_g, cout_g = gd["mag_factor"], gd["cin1_g"], gd["cout_g"]
    fz = np.zeros((gd["real_g"], kd_, cin1_g, kh_, kw_, cout_g, 16), dtype=wt.dtype)
    for gg, co, ci, kd, kh, kw in itertools.product(range(groups), range(cout_pg), range(cin_pg),
                                                    range(kd_), range(kh_), range(kw_)):
        g, e = gg // mag, gg % mag
        p_in, p_out = e * cin_pg + ci, e * cout_pg + co
        fz[g, kd, p_in // 16, kh, kw, p_out, p_in % 16] = wt[gg * cout_pg + co, ci, kd, kh, kw]
    return fz.reshape(O.np_shape_fz3d(wt.shape, groups))


def _6hd_by_formula(a):
    n, c, d, h, w = a.shape
    c1 = O.ceil_div(c, 16)
    out = np.zeros((n, d, c1, h, w, 16), dtype=a.dtype)
    for nn, cc1, c0, dd, hh, ww in itertools.product(range(n), range(c1), range(16), range(d),
                                                     range(h), range(w)):
        if cc1 * 16 + c0 < c:
            out[nn, dd, cc1, hh, ww, c0] = a[nn, cc1 * 16 + c0, dd, hh, ww]
    return out


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 17, 2, 3, 1), (1, 32, 1, 2, 2),
                                   (2, 5, 3, 1, 2)])
def test_np_6hd_matches_formula(shape):
    a = np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    a6 = O.np_ncdhw_to_6hd(a)
    assert a6.shape == O.np_shape_6hd(shape)
    assert np.array_equal(a6, _6hd_by_formula(a))
    assert np.array_equal(O.np_ncdhw_from_6hd(a6, shape[1]), a)


@pytest.mark.parametrize("oidhw,groups", [
    ((16, 16, 1, 1, 1), 1), ((20, 17, 2, 1, 3), 1), ((56, 5, 1, 2, 1), 4), ((48, 8, 1, 1, 2), 6),
    ((12, 4, 2, 1, 1), 3), ((24, 1, 1, 2, 2), 24), ((16, 1, 1, 1, 1), 8), ((45, 2, 1, 1, 1), 15),
    ((32, 32, 1, 1, 1), 2), ((24, 18, 1, 1, 1), 2)])
def test_np_fz3d_matches_formula(oidhw, groups):
    wt = np.arange(1, np.prod(oidhw) + 1, dtype=np.float32).reshape(oidhw)
    fz = O.np_oidhw_to_fz3d(wt, groups)
    assert fz.shape == O.np_shape_fz3d(oidhw, groups)
    assert np.array_equal(fz, _fz3d_by_formula(wt, groups))
    assert np.array_equal(O.np_oidhw_from_fz3d(fz, oidhw, groups), wt)
    # every weight lands in exactly one place
    assert np.count_nonzero(fz) == wt.size == np.count_nonzero(O.fz3d_valid_mask(oidhw, groups))


def test_fz3d_spec_examples():
    assert O.np_shape_fz3d((512, 512, 3, 3, 3), 1) == (864, 32, 16, 16)
    assert O.np_shape_fz3d((320, 1, 1, 2, 2), 320) == (80, 1, 16, 16)


@pytest.mark.parametrize("cin,cout,groups,expect", [
    (16, 16, 1, dict(real_g=1, mag_factor=1, cin1_g=1, cout_g=16)),
    (33, 20, 1, dict(real_g=1, mag_factor=1, cin1_g=3, cout_g=32)),
    (20, 56, 4, dict(real_g=1, mag_factor=4, cin1_g=2, cout_g=64)),
    (256, 256, 256, dict(real_g=16, mag_factor=16, cin1_g=1, cout_g=16)),
])
def test_group_dict_spec_examples(cin, cout, groups, expect):
    gd = O.group_dict(cin, cout, groups)
    assert {k: gd[k] for k in expect} == expect
    assert gd["cin_ori"] == cin and gd["cout_ori"] == cout


def _direct_dw(x, dy, geo):
    """dW's definition as a direct sum (x is 0 outside the unpadded volume)."""
    n, cin, d, h, w = x.shape
    cout = dy.shape[1]
    cin_pg, cout_pg = cin // geo.groups, cout // geo.groups
    sd, sh, sw = geo.strides
    dd, dh, dw_ = geo.dilations
    pf, _, pt, _, pl, _ = geo.pads
    out = np.zeros(geo.w_shape)
    do_, ho_, wo_ = geo.out_dhw
    for co, ci, kd, kh, kw in itertools.product(range(cout), range(cin_pg), *map(range, geo.kernel)):
        ic = (co // cout_pg) * cin_pg + ci
        s = 0.0
        for b, od, oh, ow in itertools.product(range(n), range(do_), range(ho_), range(wo_)):
            i, j, k = od * sd + kd * dd - pf, oh * sh + kh * dh - pt, ow * sw + kw * dw_ - pl
            if 0 <= i < d and 0 <= j < h and 0 <= k < w:
                s += dy[b, co, od, oh, ow] * x[b, ic, i, j, k]
        out[co, ci, kd, kh, kw] = s
    return out


def _direct_dx(wt, dy, geo):
    """dX's definition as a direct sum."""
    n, cin, d, h, w = geo.x_shape
    cout = geo.cout
    cin_pg, cout_pg = cin // geo.groups, cout // geo.groups
    sd, sh, sw = geo.strides
    dd, dh, dw_ = geo.dilations
    pf, _, pt, _, pl, _ = geo.pads
    do_, ho_, wo_ = geo.out_dhw
    out = np.zeros(geo.x_shape)
    for b, c, i, j, k in itertools.product(range(n), range(cin), range(d), range(h), range(w)):
        grp = c // cin_pg
        s = 0.0
        for co in range(grp * cout_pg, (grp + 1) * cout_pg):
            for kd, kh, kw in itertools.product(*map(range, geo.kernel)):
                nd, nh, nw = i + pf - kd * dd, j + pt - kh * dh, k + pl - kw * dw_
                if nd % sd or nh % sh or nw % sw:
                    continue
                od, oh, ow = nd // sd, nh // sh, nw // sw
                if 0 <= od < do_ and 0 <= oh < ho_ and 0 <= ow < wo_:
                    s += dy[b, co, od, oh, ow] * wt[co, c - grp * cin_pg, kd, kh, kw]
        out[b, c, i, j, k] = s
    return out


SMALL = [
    O.Geometry(1, 3, 2, (4, 5, 3), (2, 2, 1)),
    O.Geometry(2, 4, 6, (5, 4, 6), (2, 3, 2), strides=(2, 1, 3), pads=(1, 0, 0, 2, 3, 1),
               dilations=(1, 2, 1), groups=2),
    O.Geometry(1, 2, 2, (3, 2, 4), (1, 2, 2), strides=(3, 4, 2), pads=(4, 3, 3, 5, 2, 0),
               dilations=(2, 3, 2), groups=2),
    O.Geometry(1, 3, 3, (7, 6, 1), (3, 2, 1), strides=(4, 2, 1), pads=(0, 1, 1, 0, 0, 0),
               dilations=(2, 1, 1), groups=3),
]


@pytest.mark.parametrize("geo", SMALL, ids=lambda g: "x".join(map(str, g.x_shape)))
def test_torch_refs_match_direct_sums(geo):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(geo.x_shape)
    dy = rng.standard_normal(geo.dy_shape)
    wt = rng.standard_normal(geo.w_shape)
    assert min(geo.out_dhw) >= 1
    np.testing.assert_allclose(O.ref_dw(x, dy, geo), _direct_dw(x, dy, geo), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(O.ref_dx(wt, dy, geo), _direct_dx(wt, dy, geo), rtol=1e-12,
                               atol=1e-12)
    bias = rng.standard_normal(geo.cin)
    np.testing.assert_allclose(O.ref_dx(wt, dy, geo, bias=bias),
                               _direct_dx(wt, dy, geo) + bias.reshape(1, -1, 1, 1, 1),
                               rtol=1e-12, atol=1e-12)


def test_comparison_helpers_fail_when_they_should():
    ref = np.array([1000.0, -3.0, 0.5])
    assert O.rel_err(ref, ref) == 0.0
    assert O.rel_err(ref + [0.02, 0, 0], ref) == pytest.approx(2e-5)
    with pytest.raises(AssertionError):
        O.assert_close_fp32(ref + [0.02, 0, 0], ref, "t")
    # fp16: ulp at 1000 is 0.5; one ulp off passes, two fail
    O.assert_close_fp16(np.float16(ref).astype(np.float64) + [0.5, 0, 0], ref, "t")
    with pytest.raises(AssertionError):
        O.assert_close_fp16(np.float16(ref).astype(np.float64) + [1.0, 0, 0], ref, "t")
    assert O.rel_err(np.zeros(2), np.zeros(2)) == 0.0
    assert O.rel_err(np.ones(2), np.zeros(2)) == np.inf


def test_int_data_is_exact_in_every_dtype():
    x = O.int_data(np.random.default_rng(0), (1000,))
    for dt in O.NP_DTYPES:
        assert np.array_equal(O.round_to(x, dt), x)


@pytest.mark.parametrize("geo", [SMALL[1], O.Geometry(1, 20, 56, (2, 3, 2), (1, 2, 1), groups=4),
                                 O.Geometry(1, 24, 24, (2, 2, 3), (1, 1, 2), groups=24)],
                         ids=["g2", "mag4", "depthwise"])
def test_checks_catch_stray_and_misplaced_entries(geo):
    """check_dw / check_dx pass a perfect raw output and fail on a nonzero padding lane or
    cross-group entry, and on swapped channels."""
    rng = np.random.default_rng(8)
    ref_w = rng.standard_normal(geo.w_shape)
    raw = O.np_oidhw_to_fz3d(ref_w.astype(np.float32), geo.groups).reshape(geo.dw_out_shape())
    O.check_dw(raw, ref_w, geo)
    stray = raw.copy().reshape(O.np_shape_fz3d(geo.w_shape, geo.groups))
    stray[tuple(np.argwhere(~O.fz3d_valid_mask(geo.w_shape, geo.groups))[-1])] = 1.0
    with pytest.raises(AssertionError, match="not 0"):
        O.check_dw(stray.reshape(geo.dw_out_shape()), ref_w, geo)
    swapped = ref_w.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    raw_sw = O.np_oidhw_to_fz3d(swapped.astype(np.float32), geo.groups)
    with pytest.raises(AssertionError, match="rel_err"):
        O.check_dw(raw_sw.reshape(geo.dw_out_shape()), ref_w, geo)

    ref_x = rng.standard_normal(geo.x_shape)
    raw_x = O.np_ncdhw_to_6hd(ref_x.astype(np.float32)).reshape(geo.dx_out_shape())
    O.check_dx(raw_x, ref_x, geo, "float32")
    O.check_dx(raw_x.astype(np.float16), ref_x, geo, "float16")
    bad = raw_x.copy()
    bad[..., -1] = 2.0  # lane 15 of the last block is padding for Cin % 16 != 0
    if geo.cin % 16:
        with pytest.raises(AssertionError, match="not 0"):
            O.check_dx(bad, ref_x, geo, "float32")
    with pytest.raises(AssertionError):
        O.check_dx(raw_x, ref_x, geo, "float16")  # wrong dtype
