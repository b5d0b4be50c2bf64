"""tbex.convolution_backward against torch.ops.aten.convolution_backward computed in float64.

The grid covers every pair of values of its axes (dim x groups x stride x dilation x transposed x
output_mask x dtype); each dim also has a transposed case with all three outputs. Inputs are
random normals rounded to the input dtype, so the float64 oracle sees exactly the values tbex sees.

Tolerances (explicit), on max|out - ref| over max|ref| per output:
- float32 outputs: <= FP32_TOL (1e-5; tbex accumulates in fp32);
- float16 / bfloat16 outputs: the reference rounded to that dtype, every element within one ulp
  of that dtype at max|ref| (fp32 accumulation then one rounding can land on the neighbour).
"""
from dataclasses import dataclass, replace

import ml_dtypes
import numpy as np
import pytest
import torch

import oracle as O
import tbex

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
NP_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
NP_DTYPES_NAME = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
MASKS = {"all": [True, True, True], "gi": [True, False, False], "gw": [False, True, False],
         "gb": [False, False, True], "none": [False, False, False]}
SPATIAL = {1: (9,), 2: (6, 5), 3: (4, 5, 6)}
KERNEL = {1: (3,), 2: (3, 2), 3: (2, 3, 2)}
PADDING = {1: (1,), 2: (1, 0), 3: (1, 0, 1)}
# groups label -> (input channels, output channels, groups)
CHANNELS = {"1": (3, 5, 1), "2": (4, 6, 2), "dw": (4, 8, 4)}


# ----------------------------------------------------------------------------------------------
# Problems


@dataclass
class Conv:
    """One convolution_backward call in torch's terms. For a transposed conv, `cin` is the
    channels of `input` and the weight is (cin, cout/groups, *k)."""
    n: int
    cin: int
    cout: int
    spatial: tuple
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int = 1
    transposed: bool = False
    output_padding: tuple = None

    def __post_init__(self):
        if self.output_padding is None:
            self.output_padding = (0,) * len(self.spatial)

    @property
    def out_spatial(self):
        out = []
        for i, k, s, p, d, op in zip(self.spatial, self.kernel, self.stride, self.padding,
                                     self.dilation, self.output_padding):
            if self.transposed:
                out.append((i - 1) * s - 2 * p + d * (k - 1) + op + 1)
            else:
                out.append((i + 2 * p - d * (k - 1) - 1) // s + 1)
        assert min(out) >= 1, out
        return tuple(out)

    @property
    def x_shape(self):
        return (self.n, self.cin) + tuple(self.spatial)

    @property
    def dy_shape(self):
        return (self.n, self.cout) + self.out_spatial

    @property
    def w_shape(self):
        if self.transposed:
            return (self.cin, self.cout // self.groups) + tuple(self.kernel)
        return (self.cout, self.cin // self.groups) + tuple(self.kernel)

    def params(self, output_mask=(True, True, True)):
        """The arguments after (grad_output, input, weight), as lists."""
        return ([self.cout], list(self.stride), list(self.padding), list(self.dilation),
                self.transposed, list(self.output_padding), self.groups, list(output_mask))


def grid_conv(dim, groups, stride, dilation, transposed):
    cin, cout, g = CHANNELS[groups]
    op = (stride - 1,) * dim if transposed else None
    return Conv(2, cin, cout, SPATIAL[dim], KERNEL[dim], (stride,) * dim, PADDING[dim],
                (dilation,) * dim, g, transposed, op)


# (dim, groups, stride, dilation, transposed, output_mask, dtype): every pair of axis values
# occurs; transposed cases have output_padding = stride - 1.
GRID = [
    (1, "1", 1, 1, False, "all", "f32"),
    (1, "2", 2, 2, False, "gi", "f16"),
    (1, "dw", 1, 2, False, "gw", "bf16"),
    (1, "dw", 2, 1, True, "all", "f32"),
    (1, "1", 2, 1, True, "gw", "f16"),
    (1, "2", 1, 2, True, "gb", "bf16"),
    (2, "1", 1, 2, False, "none", "f32"),
    (2, "dw", 2, 1, False, "gb", "f16"),
    (2, "2", 2, 1, False, "none", "bf16"),
    (2, "2", 1, 2, True, "all", "f32"),
    (2, "1", 2, 1, True, "gi", "f16"),
    (2, "1", 1, 2, True, "gi", "bf16"),
    (3, "1", 1, 1, False, "gb", "f32"),
    (3, "dw", 1, 2, False, "none", "f16"),
    (3, "2", 2, 1, False, "all", "bf16"),
    (3, "1", 1, 2, True, "all", "f32"),
    (3, "2", 2, 1, True, "gw", "f16"),
    (3, "dw", 1, 2, True, "gi", "bf16"),
    (1, "1", 1, 2, True, "none", "f32"),
    (2, "1", 1, 1, False, "gw", "f32"),
    (1, "1", 1, 1, False, "all", "f16"),
    (1, "1", 1, 1, False, "gi", "f32"),
]
AXES = {"dim": [1, 2, 3], "groups": ["1", "2", "dw"], "stride": [1, 2], "dilation": [1, 2],
        "transposed": [False, True], "mask": list(MASKS), "dtype": list(TORCH_DTYPES)}


def grid_id(case):
    dim, g, s, d, tr, mask, dt = case
    return f"{dim}d-g{g}-s{s}-d{d}-{'T' if tr else 'N'}-{mask}-{dt}"


def test_grid_covers_every_pair():
    names = list(AXES)
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            b = names[j]
            seen = {(c[i], c[j]) for c in GRID}
            missing = [(va, vb) for va in AXES[a] for vb in AXES[b] if (va, vb) not in seen]
            assert not missing, f"({a}, {b}) pairs missing from GRID: {missing}"
    for dim in AXES["dim"]:
        tr = [c for c in GRID if c[0] == dim and c[4]]
        assert any(c[5] == "all" for c in tr), f"{dim}D: no transposed case with all outputs"
        assert any(c[2] == 2 for c in tr), f"{dim}D: no transposed case with output_padding"


# ----------------------------------------------------------------------------------------------
# Data, oracle, comparison


def make_data(conv, dtypes, seed):
    """float64 numpy (dy, x, w), each rounded to its dtype (dtypes: names for dy, x, w)."""
    rng = np.random.default_rng(seed)
    return tuple(O.random_data(rng, shape, NP_DTYPES_NAME[dt])
                 for shape, dt in zip((conv.dy_shape, conv.x_shape, conv.w_shape), dtypes))


def as_torch(a64, dt):
    return torch.from_numpy(a64).to(TORCH_DTYPES[dt])


def as_numpy(a64, dt):
    return a64.astype(NP_DTYPES[dt])


def oracle(conv, dy64, x64, w64):
    """torch's convolution_backward in float64: (grad_input, grad_weight, grad_bias)."""
    t = [torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)) for a in (dy64, x64, w64)]
    with torch.no_grad():
        ref = torch.ops.aten.convolution_backward(*t, *conv.params())
    return tuple(r.numpy() for r in ref)


def ulp(m, dt):
    """Spacing of `dt` values at magnitude m (m rounded to dt first)."""
    finfo = ml_dtypes.finfo(NP_DTYPES[dt])
    m = min(max(abs(float(m)), float(finfo.smallest_normal)), float(finfo.max))
    return float(np.spacing(NP_DTYPES[dt](m)))


def assert_close(got, ref, dt, what):
    """got (numpy, any float dtype) against a float64 reference; tolerance by output dtype."""
    got = np.asarray(got).astype(np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    if dt == "f32":
        err = O.rel_err(got, ref)
        assert err <= O.FP32_TOL, f"{what}: rel_err {err:.3g} > {O.FP32_TOL:g}"
        return
    rounded = ref.astype(NP_DTYPES[dt]).astype(np.float64)
    tol = ulp(np.max(np.abs(ref)), dt) if ref.size else 0.0
    diff = float(np.max(np.abs(got - rounded))) if ref.size else 0.0
    assert diff <= tol, f"{what}: max|out - {dt}(ref)| = {diff:g} > 1 ulp = {tol:g}"


def torch_np(t):
    """A torch tensor (any dtype) as float64 numpy."""
    return t.detach().to(torch.float64).numpy()


def promote(a, b):
    """Output dtype rule: the wider of two dtypes; fp16 with bf16 gives fp32."""
    if a == b:
        return a
    return "f32"


def check_outputs(res, ref, mask, dtypes, what, kind="torch"):
    """res: tbex's 3-tuple; ref: oracle's; dtypes: expected output dtype names."""
    assert isinstance(res, tuple) and len(res) == 3, f"{what}: returned {type(res)}"
    for i, name in enumerate(("grad_input", "grad_weight", "grad_bias")):
        if not mask[i]:
            assert res[i] is None, f"{what}: {name} should be None (output_mask False)"
            continue
        r = res[i]
        if kind == "torch":
            assert isinstance(r, torch.Tensor), f"{what}: {name} is {type(r)}, not a torch tensor"
            assert r.dtype == TORCH_DTYPES[dtypes[i]], f"{what}: {name} dtype {r.dtype}"
            got = torch_np(r)
        else:
            assert isinstance(r, np.ndarray), f"{what}: {name} is {type(r)}, not numpy"
            assert r.dtype == np.dtype(NP_DTYPES[dtypes[i]]), f"{what}: {name} dtype {r.dtype}"
            got = r
        assert_close(got, ref[i], dtypes[i], f"{what}: {name}")


def expected_dtypes(dy_dt, x_dt, w_dt):
    return (promote(x_dt, dy_dt), promote(w_dt, dy_dt), dy_dt)


def run(conv, tensors, mask=(True, True, True), **kw):
    return tbex.convolution_backward(*tensors, *conv.params(mask), **kw)


# ----------------------------------------------------------------------------------------------
# The grid


@pytest.mark.parametrize("case", GRID, ids=grid_id)
def test_grid(case):
    dim, g, s, d, tr, mask_name, dt = case
    conv = grid_conv(dim, g, s, d, tr)
    mask = MASKS[mask_name]
    dy, x, w = make_data(conv, (dt, dt, dt), seed=GRID.index(case))
    res = run(conv, [as_torch(a, dt) for a in (dy, x, w)], mask)
    check_outputs(res, oracle(conv, dy, x, w), mask, (dt, dt, dt), grid_id(case))


# Beyond the grid: more than 16 channels (several C0 blocks, grouped), anisotropic windows.
EXTRAS = {
    "3d-wide-g2": Conv(1, 36, 20, (3, 4, 5), (1, 2, 3), (1, 1, 2), (0, 1, 1), (1, 1, 1), 2),
    "3d-aniso": Conv(2, 5, 7, (5, 6, 7), (2, 3, 3), (1, 2, 3), (0, 1, 2), (2, 1, 1)),
    "3d-aniso-T": Conv(2, 5, 7, (3, 4, 4), (2, 3, 3), (1, 2, 3), (0, 1, 2), (2, 1, 1),
                       transposed=True, output_padding=(0, 1, 2)),
    "2d-wide-dw-T": Conv(2, 18, 18, (5, 4), (3, 3), (2, 2), (1, 1), (1, 1), 18,
                         transposed=True, output_padding=(1, 0)),
}


@pytest.mark.parametrize("name", list(EXTRAS))
def test_extra_geometries(name):
    conv = EXTRAS[name]
    dy, x, w = make_data(conv, ("f32",) * 3, seed=100)
    res = run(conv, [as_torch(a, "f32") for a in (dy, x, w)])
    check_outputs(res, oracle(conv, dy, x, w), MASKS["all"], ("f32",) * 3, name)


@pytest.mark.parametrize("transposed", [False, True], ids=["N", "T"])
def test_masks_select_outputs_of_the_full_call(transposed):
    """Each output_mask returns exactly the full call's selected outputs, None elsewhere."""
    conv = grid_conv(3, "2", 2, 1, transposed)
    dy, x, w = make_data(conv, ("f32",) * 3, seed=7)
    args = [as_torch(a, "f32") for a in (dy, x, w)]
    full = run(conv, args)
    for name, mask in MASKS.items():
        res = run(conv, args, mask)
        for i in range(3):
            if mask[i]:
                assert torch.equal(res[i], full[i]), f"mask {name}: output {i} differs"
            else:
                assert res[i] is None, f"mask {name}: output {i} not None"


def test_output_padding_must_be_below_stride():
    """aclnn's rule (docs/validation.md): output_padding in [0, stride). Stricter than torch,
    which also takes output_padding < dilation: with stride 1, dilation 2 torch accepts
    output_padding 1."""
    conv = Conv(2, 4, 6, (4, 5, 3), (2, 3, 2), (1, 1, 1), (1, 0, 1), (2, 2, 1), 2,
                transposed=True, output_padding=(1, 1, 0))
    dy, x, w = make_data(conv, ("f32",) * 3, seed=11)
    args = [as_torch(a, "f32") for a in (dy, x, w)]
    torch_res = torch.ops.aten.convolution_backward(*args, *conv.params())
    assert tuple(torch_res[0].shape) == conv.x_shape
    with pytest.raises(tbex.UserError, match="output_padding"):
        run(conv, args)


def test_single_value_lists_expand_as_torch():
    """torch expands one-element stride/padding/dilation/output_padding lists to every dim."""
    conv = Conv(2, 4, 6, (4, 5, 3), (2, 3, 2), (2, 2, 2), (1, 1, 1), (1, 1, 1), 2,
                transposed=True, output_padding=(1, 1, 1))
    dy, x, w = make_data(conv, ("f32",) * 3, seed=12)
    res = tbex.convolution_backward(*[as_torch(a, "f32") for a in (dy, x, w)], [conv.cout],
                                    [2], [1], [1], True, [1], 2, [True, True, True])
    check_outputs(res, oracle(conv, dy, x, w), MASKS["all"], ("f32",) * 3, "one-value lists")


# ----------------------------------------------------------------------------------------------
# Kinds of tensors: numpy in -> numpy out, torch views


@pytest.mark.parametrize("dt", list(NP_DTYPES))
def test_numpy_in_numpy_out(dt):
    conv = grid_conv(3, "2", 2, 1, False)
    dy, x, w = make_data(conv, (dt,) * 3, seed=20)
    res = run(conv, [as_numpy(a, dt) for a in (dy, x, w)])
    check_outputs(res, oracle(conv, dy, x, w), MASKS["all"], (dt,) * 3, "numpy " + dt, "numpy")


def test_numpy_and_torch_give_the_same_values():
    conv = grid_conv(2, "dw", 1, 2, True)
    dy, x, w = make_data(conv, ("bf16",) * 3, seed=21)
    from_np = run(conv, [as_numpy(a, "bf16") for a in (dy, x, w)])
    from_t = run(conv, [as_torch(a, "bf16") for a in (dy, x, w)])
    for a, b in zip(from_np, from_t):
        assert np.array_equal(np.asarray(a).astype(np.float64), torch_np(b))


def _views(conv, dy, x, w):
    """Non-contiguous torch tensors holding the same values: x a strided slice of a larger
    tensor, w a permuted copy seen through the inverse permutation, dy channels-last."""
    xb = torch.zeros(conv.x_shape[:-1] + (2 * conv.x_shape[-1],), dtype=torch.float32)
    xb[..., ::2] = torch.from_numpy(x).float()
    xv = xb[..., ::2]
    wv = torch.from_numpy(w).float().permute(4, 3, 2, 1, 0).contiguous().permute(4, 3, 2, 1, 0)
    dyv = torch.from_numpy(dy).float().to(memory_format=torch.channels_last_3d)
    for t in (xv, wv, dyv):
        assert not t.is_contiguous()
    return dyv, xv, wv


@pytest.mark.parametrize("transposed", [False, True], ids=["N", "T"])
def test_non_contiguous_torch_inputs(transposed):
    conv = grid_conv(3, "2", 2, 1, transposed)
    dy, x, w = make_data(conv, ("f32",) * 3, seed=22)
    dense = run(conv, [as_torch(a, "f32") for a in (dy, x, w)])
    res = run(conv, _views(conv, dy, x, w))
    for i in range(3):
        assert torch.equal(res[i], dense[i]), f"output {i} differs from the contiguous call"
    check_outputs(res, oracle(conv, dy, x, w), MASKS["all"], ("f32",) * 3, "views")


def test_broadcast_grad_output():
    """The grad_output of `y.sum().backward()` is an expanded tensor with all strides 0."""
    conv = grid_conv(3, "1", 1, 1, False)
    _, x, w = make_data(conv, ("f32",) * 3, seed=23)
    dy = torch.ones((1,) * 5).expand(conv.dy_shape)
    assert dy.stride() == (0,) * 5
    res = run(conv, [dy, as_torch(x, "f32"), as_torch(w, "f32")])
    ref = oracle(conv, np.ones(conv.dy_shape), x, w)
    check_outputs(res, ref, MASKS["all"], ("f32",) * 3, "expanded grad_output")


def test_tensors_that_require_grad():
    """torch's op takes leaves that require grad (as autograd's saved tensors are)."""
    conv = grid_conv(2, "1", 2, 1, False)
    dy, x, w = make_data(conv, ("f32",) * 3, seed=25)
    args = [as_torch(a, "f32").requires_grad_() for a in (dy, x, w)]
    res = run(conv, args)
    check_outputs(res, oracle(conv, dy, x, w), MASKS["all"], ("f32",) * 3, "requires_grad")


def test_numpy_non_contiguous_inputs_are_right_or_rejected():
    conv = grid_conv(2, "2", 1, 1, False)
    dy, x, w = make_data(conv, ("f32",) * 3, seed=24)
    ref = oracle(conv, dy, x, w)
    views = {"fortran": np.asfortranarray(x.astype(np.float32)),
             "reversed": np.ascontiguousarray(x[..., ::-1].astype(np.float32))[..., ::-1]}
    for name, xv in views.items():
        assert not xv.flags.c_contiguous and np.array_equal(xv, x)
        try:
            res = run(conv, [dy.astype(np.float32), xv, w.astype(np.float32)])
        except tbex.UserError:
            continue
        check_outputs(res, ref, MASKS["all"], ("f32",) * 3, "numpy " + name, "numpy")


# ----------------------------------------------------------------------------------------------
# dtypes: promotion, cube_math_type

# (grad_output, input, weight) dtypes
MIXED = [("f16", "f32", "f32"), ("f32", "f16", "bf16"), ("bf16", "f16", "f32"),
         ("f16", "bf16", "bf16"), ("bf16", "bf16", "f16"), ("f32", "bf16", "bf16")]


@pytest.mark.parametrize("dtypes", MIXED, ids="-".join)
def test_mixed_dtypes_promote(dtypes):
    conv = grid_conv(3, "2", 2, 1, False)
    dy, x, w = make_data(conv, dtypes, seed=30)
    res = run(conv, [as_torch(a, dt) for a, dt in zip((dy, x, w), dtypes)])
    check_outputs(res, oracle(conv, dy, x, w), MASKS["all"], expected_dtypes(*dtypes),
                  "mixed " + "-".join(dtypes))


def round_fp16(a64):
    return a64.astype(np.float16).astype(np.float64)


HF32_MANTISSA_BITS = 11  # Ascend's HF32: 1 sign, 8 exponent, 11 mantissa bits (tbex/dtype.h)


def round_hf32(a64):
    """float32 with its mantissa rounded to HF32_MANTISSA_BITS, to nearest even."""
    drop = 23 - HF32_MANTISSA_BITS
    bits = a64.astype(np.float32).view(np.uint32).astype(np.uint64)
    keep, rest, half = bits >> drop, bits & ((1 << drop) - 1), 1 << (drop - 1)
    up = (rest > half) | ((rest == half) & (keep & 1 == 1))
    return ((keep + up) << drop).astype(np.uint32).view(np.float32).astype(np.float64)


def _no_hf32_ties(a64):
    """Moves values off the HF32 rounding ties (a tie's direction is not what's tested)."""
    drop = 23 - HF32_MANTISSA_BITS
    bits = a64.astype(np.float32).view(np.uint32).copy()
    bits[(bits & ((1 << drop) - 1)) == (1 << (drop - 1))] += 1
    return bits.view(np.float32).astype(np.float64)


def out_tol(dt):
    """The comparison's tolerance as a fraction of max|ref| (bf16 / fp16: one ulp at most)."""
    return O.FP32_TOL if dt == "f32" else 2.0 ** -ml_dtypes.finfo(NP_DTYPES[dt]).nmant


def assert_distinguishable(ref_a, ref_b, dt, what):
    """The two references differ by more than twice the tolerance (in grad_input and
    grad_weight), so matching one within the tolerance rules the other out."""
    for i in (0, 1):
        d = O.rel_err(ref_a[i], ref_b[i])
        assert d > 2 * out_tol(dt), f"{what}: test data too weak (output {i}: {d:.3g})"


@pytest.mark.parametrize("transposed", [False, True], ids=["N", "T"])
@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_cube_math_fp16_rounds_inputs_to_fp16(dt, transposed):
    """cube_math_type=2: grad_input and grad_weight are those of the fp16-rounded inputs, in the
    output dtype. grad_output ~ 3e-7 lies in fp16's subnormals: rounding it changes both."""
    conv = grid_conv(3, "2", 2, 1, transposed)
    rng = np.random.default_rng(31)
    dy, x, w = (O.round_to(rng.standard_normal(s) * scale, NP_DTYPES_NAME[dt])
                for s, scale in ((conv.dy_shape, 3e-7), (conv.x_shape, 1.0), (conv.w_shape, 1.0)))
    exact = oracle(conv, dy, x, w)
    ref16 = oracle(conv, *[round_fp16(a) for a in (dy, x, w)])
    assert_distinguishable(ref16, exact, dt, "fp16 rounding")
    res = run(conv, [as_torch(a, dt) for a in (dy, x, w)], cube_math_type=2)
    # grad_bias is a plain sum of grad_output, not a product: cube_math_type leaves it alone
    check_outputs(res, (ref16[0], ref16[1], exact[2]), MASKS["all"], (dt,) * 3,
                  "cube_math_type=2")


@pytest.mark.parametrize("cube_math_type", [0, 1, 3])
def test_cube_math_fp32(cube_math_type):
    """0 and 1 compute from the fp32 values; 3 from values rounded to HF32 (fp32's range with an
    11-bit mantissa: x ~ 1e5 and grad_output ~ 1e-6 are outside fp16's normal range).
    grad_bias, a sum, always sees the given values."""
    conv = grid_conv(3, "1", 1, 2, False)
    rng = np.random.default_rng(32)
    dy, x, w = (_no_hf32_ties(O.round_to(rng.standard_normal(s) * scale, "float32"))
                for s, scale in ((conv.dy_shape, 1e-6), (conv.x_shape, 1e5), (conv.w_shape, 1.0)))
    exact = oracle(conv, dy, x, w)
    ref = exact
    if cube_math_type == 3:
        hf = oracle(conv, *[round_hf32(a) for a in (dy, x, w)])
        assert_distinguishable(hf, exact, "f32", "HF32 rounding")
        ref = (hf[0], hf[1], exact[2])
    res = run(conv, [as_torch(a, "f32") for a in (dy, x, w)], cube_math_type=cube_math_type)
    check_outputs(res, ref, MASKS["all"], ("f32",) * 3, f"cube_math_type={cube_math_type}")


@pytest.mark.parametrize("dt,cube_math_type", [("f16", 2), ("f16", 3), ("bf16", 3)])
def test_cube_math_keeps_narrow_inputs(dt, cube_math_type):
    """fp16 inputs are already fp16 (2); HF32 rounding applies to fp32 inputs only (3)."""
    conv = grid_conv(2, "2", 2, 1, True)
    dy, x, w = make_data(conv, (dt,) * 3, seed=33)
    args = [as_torch(a, dt) for a in (dy, x, w)]
    plain = run(conv, args)
    res = run(conv, args, cube_math_type=cube_math_type)
    for i in range(3):
        assert torch.equal(res[i], plain[i]), f"output {i} differs from cube_math_type=0"


# ----------------------------------------------------------------------------------------------
# Errors: tbex.UserError naming the parameter at fault

BASE = Conv(2, 4, 6, (5, 6, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 2)
BASE_T = Conv(2, 4, 6, (3, 4, 5), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), 2,
              transposed=True, output_padding=(1, 1, 1))


def _args(conv, **over):
    """convolution_backward's arguments as a dict (fp32 torch zeros), with overrides: a shape
    tuple for grad_output/input/weight, anything else as is."""
    a = {"grad_output": conv.dy_shape, "input": conv.x_shape, "weight": conv.w_shape,
         "bias_sizes": [conv.cout], "stride": list(conv.stride), "padding": list(conv.padding),
         "dilation": list(conv.dilation), "transposed": conv.transposed,
         "output_padding": list(conv.output_padding), "groups": conv.groups,
         "output_mask": [True, True, True]}
    a.update(over)
    for k in ("grad_output", "input", "weight"):
        if isinstance(a[k], tuple):
            a[k] = torch.zeros(a[k])
    return a


def _shape(shape, i, v):
    s = list(shape)
    s[i] = v
    return tuple(s)


ERRORS = {
    # name: (problem, keyword overrides, parameters the message may name). Shapes stay
    # consistent with the problem where they can, so the one wrong parameter is the error.
    "input rank 2": (BASE, dict(input=(2, 4)), ["input"]),
    "all rank 6": (BASE, dict(grad_output=BASE.dy_shape + (1,), input=BASE.x_shape + (1,),
                              weight=BASE.w_shape + (1,), stride=[1] * 4, padding=[1] * 4,
                              dilation=[1] * 4, output_padding=[0] * 4),
                   ["input", "grad_output", "weight"]),
    "weight rank 4": (BASE, dict(weight=BASE.w_shape[:-1]), ["weight"]),
    "grad_output rank 4": (BASE, dict(grad_output=BASE.dy_shape[:-1]), ["grad_output"]),
    "input channels": (BASE, dict(input=_shape(BASE.x_shape, 1, 6)),
                       ["input", "weight", "groups"]),
    "grad_output channels": (BASE, dict(grad_output=_shape(BASE.dy_shape, 1, 8)),
                             ["grad_output", "weight"]),
    "grad_output batch": (BASE, dict(grad_output=_shape(BASE.dy_shape, 0, 3)),
                          ["grad_output"]),
    "grad_output spatial": (BASE, dict(grad_output=_shape(BASE.dy_shape, 3, 7)),
                            ["grad_output"]),
    "transposed channels": (BASE_T, dict(input=_shape(BASE_T.x_shape, 1, 6)),
                            ["input", "weight", "groups"]),
    "groups 0": (BASE, dict(groups=0), ["groups"]),
    "groups -2": (BASE, dict(groups=-2), ["groups"]),
    "groups not dividing out channels": (
        BASE, dict(input=_shape(BASE.x_shape, 1, 6), weight=(4, 2, 3, 3, 3),
                   grad_output=_shape(BASE.dy_shape, 1, 4), bias_sizes=[4], groups=3),
        ["groups", "weight"]),
    "output_padding without transposed": (BASE, dict(output_padding=[1, 0, 0]),
                                          ["output_padding"]),
    "output_padding >= stride": (replace(BASE_T, output_padding=(2, 1, 1)), {},
                                 ["output_padding"]),
    "output_padding negative": (replace(BASE_T, output_padding=(-1, 1, 1)), {},
                                ["output_padding"]),
    "bias_sizes wrong size": (BASE, dict(bias_sizes=[7]), ["bias_sizes"]),
    "bias_sizes wrong rank": (BASE, dict(bias_sizes=[6, 1]), ["bias_sizes"]),
    "bias_sizes None with grad_bias": (BASE, dict(bias_sizes=None), ["bias_sizes"]),
    "stride length 2": (BASE, dict(stride=[1, 1]), ["stride"]),
    "padding length 4": (BASE, dict(padding=[1, 1, 1, 1]), ["padding"]),
    "dilation length 2": (BASE, dict(dilation=[1, 1]), ["dilation"]),
    "output_padding length 2": (BASE_T, dict(output_padding=[1, 1]), ["output_padding"]),
    "stride 0": (BASE, dict(stride=[1, 0, 1]), ["stride"]),
    "stride -1": (BASE, dict(stride=[-1, 1, 1]), ["stride"]),
    "dilation 0": (BASE, dict(dilation=[1, 1, 0]), ["dilation"]),
    "dilation -2": (BASE, dict(dilation=[-2, 1, 1]), ["dilation"]),
    "padding -1": (replace(BASE, padding=(1, -1, 1)), {}, ["padding"]),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_invalid_arguments(name):
    conv, over, params = ERRORS[name]
    a = _args(conv, **over)
    with pytest.raises(tbex.UserError) as e:
        tbex.convolution_backward(**a)
    msg = str(e.value)
    assert isinstance(e.value, ValueError)
    assert any(p in msg for p in params), f"message names none of {params}: {msg}"
    assert e.value.param in params, f".param {e.value.param!r} not in {params}: {msg}"


def test_valid_base_arguments_run():
    """The error cases' base problems are valid: each error comes from its one change."""
    for conv in (BASE, BASE_T):
        res = tbex.convolution_backward(**_args(conv))
        assert [tuple(r.shape) for r in res] == [conv.x_shape, conv.w_shape, (conv.cout,)]


def test_bias_sizes_may_be_none_without_grad_bias():
    conv = grid_conv(3, "2", 2, 1, False)
    dy, x, w = make_data(conv, ("f32",) * 3, seed=34)
    args = [as_torch(a, "f32") for a in (dy, x, w)]
    res = tbex.convolution_backward(*args, None, *conv.params([True, True, False])[1:])
    check_outputs(res, oracle(conv, dy, x, w), [True, True, False], ("f32",) * 3, "no bias")


@pytest.mark.parametrize("kind", ["float64", "int32"])
def test_unsupported_dtype(kind):
    a = _args(BASE, input=torch.zeros(BASE.x_shape, dtype=getattr(torch, kind)))
    with pytest.raises(tbex.UserError) as e:
        tbex.convolution_backward(**a)
    assert "input" in str(e.value)


@pytest.mark.parametrize("value", [-1, 4])
def test_bad_cube_math_type(value):
    with pytest.raises(tbex.UserError) as e:
        tbex.convolution_backward(**_args(BASE), cube_math_type=value)
    assert "cube_math_type" in str(e.value)


def test_asymmetric_padding_per_dim():
    """(head, tail) pads per dim (6 values in 3D, 2 in 1D: tbex extensions; 4 in 2D: aclnn's
    form) equal torch on an explicitly padded input, cropped back."""
    rng = np.random.default_rng(31)
    cases = [((2, 4, 5, 6, 7), (6, 4, 2, 3, 2), (2, 1, 2), (0, 1, 2, 0, 1, 1)),
             ((2, 4, 9, 8), (6, 2, 3, 3), (2, 2), (0, 1, 2, 1)),
             ((2, 4, 11), (6, 4, 3), (2,), (1, 0))]
    for x_shape, w_shape, stride, pads in cases:
        groups = x_shape[1] // w_shape[1]
        sp = len(x_shape) - 2
        x = torch.from_numpy(rng.standard_normal(x_shape))
        w = torch.from_numpy(rng.standard_normal(w_shape))
        fpad = []
        for i in reversed(range(sp)):  # F.pad takes the last dim first
            fpad += [pads[2 * i], pads[2 * i + 1]]
        xp = torch.nn.functional.pad(x, fpad)
        y = torch.ops.aten.convolution(xp, w, None, list(stride), [0] * sp, [1] * sp, False,
                                       [0] * sp, groups)
        dy = torch.from_numpy(rng.standard_normal(tuple(y.shape)))
        ref = torch.ops.aten.convolution_backward(dy, xp, w, [w_shape[0]], list(stride),
                                                  [0] * sp, [1] * sp, False, [0] * sp, groups,
                                                  [True, True, True])
        crop = tuple(slice(None) for _ in range(2)) + tuple(
            slice(pads[2 * i], pads[2 * i] + x_shape[2 + i]) for i in range(sp))
        ref = (ref[0][crop], ref[1], ref[2])
        got = tbex.convolution_backward(dy.float(), x.float(), w.float(), [w_shape[0]],
                                        list(stride), list(pads), [1] * sp, False, [0] * sp,
                                        groups, [True, True, True])
        for g, r in zip(got, ref):
            assert tuple(g.shape) == tuple(r.shape)
            err = float((g.double() - r).abs().max() / r.abs().max())
            assert err <= 1e-5, (x_shape, pads, err)
