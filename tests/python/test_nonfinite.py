"""NaN and Inf in convolution_backward's inputs: every gradient is NaN / +Inf / -Inf exactly where
a term of its defining sum makes it so, and its finite entries keep their values. A term pairs
channels of one group and a position inside the tensor: a masked cross-group weight or a
padded position never multiplies a NaN or Inf into an output (docs/arithmetic.md).

The oracle below sums the defining terms in float64 (padded positions are no terms). PyTorch
agrees where it computes with oneDNN; its im2col paths also multiply padding zeros (0 * NaN) and
some of its strided paths give NaN at positions no window covers, so it is a second oracle only
for windows without padding, stride or dilation.
"""
import numpy as np
import pytest

import tbex

torch = pytest.importorskip("torch")


def _geometry(rng, padding=True):
    sp = int(rng.integers(1, 4))
    groups = int(rng.choice([1, 1, 2, 3]))
    cin = groups * int(rng.integers(1, 5))
    cout = groups * int(rng.integers(1, 5))
    k = [int(rng.integers(1, 4)) for _ in range(sp)]
    # torch's kernels agree with the defining sums when every position is a term of each window
    # (no padding, stride and dilation 1): the torch check draws only those.
    s = [int(rng.integers(1, 3)) if padding else 1 for _ in range(sp)]
    d = [int(rng.integers(1, 3)) if padding else 1 for _ in range(sp)]
    p = [int(rng.integers(0, 3)) if padding else 0 for _ in range(sp)]
    size = [int(rng.integers(max(1, (kk - 1) * dd + 1 - 2 * pp), 7)) for kk, dd, pp in zip(k, d, p)]
    transposed = bool(rng.random() < 0.3)
    n = int(rng.integers(1, 3))
    return sp, groups, cin, cout, k, s, d, p, size, transposed, n


def _case(seed, padding=True):
    rng = np.random.default_rng(seed)
    while True:
        sp, groups, cin, cout, k, s, d, p, size, transposed, n = _geometry(rng, padding)
        x = torch.tensor(rng.standard_normal((n, cin, *size)), dtype=torch.float32)
        if transposed:
            w = torch.tensor(rng.standard_normal((cin, cout // groups, *k)), dtype=torch.float32)
            op = [0] * sp
            y = torch.nn.functional.conv_transpose1d if sp == 1 else (
                torch.nn.functional.conv_transpose2d if sp == 2 else torch.nn.functional.conv_transpose3d)
            outs = [(sz - 1) * ss - 2 * pp + (kk - 1) * dd + 1 for sz, ss, pp, kk, dd in zip(size, s, p, k, d)]
            if min(outs) < 1:
                continue
            out = y(x, w, None, s, p, op, groups, d)
        else:
            w = torch.tensor(rng.standard_normal((cout, cin // groups, *k)), dtype=torch.float32)
            f = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[sp - 1]
            if any(sz + 2 * pp < (kk - 1) * dd + 1 for sz, pp, kk, dd in zip(size, p, k, d)):
                continue
            out = f(x, w, None, s, p, d, groups)
        if out.numel() == 0 or min(out.shape[2:]) < 1:
            continue
        gy = torch.tensor(rng.standard_normal(tuple(out.shape)), dtype=torch.float32)
        # Some exact zeros: 0 * Inf is NaN.
        for t in (x, w, gy):
            t.view(-1)[torch.tensor(rng.random(t.numel()) < 0.15)] = 0.0
        # Inject NaN / +Inf / -Inf into one or two operands.
        for t in rng.choice(3, size=int(rng.integers(1, 3)), replace=False):
            target = (x, w, gy)[int(t)]
            for _ in range(int(rng.integers(1, 4))):
                target.view(-1)[int(rng.integers(target.numel()))] = float(
                    rng.choice([np.nan, np.inf, -np.inf]))
        return x, w, gy, dict(stride=s, padding=p, dilation=d, transposed=transposed,
                              output_padding=[0] * sp, groups=groups)


def _taps(k):
    return np.stack(np.meshgrid(*[np.arange(kk) for kk in k], indexing="ij"), -1).reshape(-1, len(k))


def oracle(x, w, gy, stride, padding, dilation, transposed, groups):
    """(grad_input, grad_weight, grad_bias) in float64 from the defining sums of conv C (the conv
    whose dX / dW the gradients are; a transposed conv's is C with x and dy swapped)."""
    x, w, gy = (np.asarray(t, np.float64) for t in (x, w, gy))
    xc, dyc = (gy, x) if transposed else (x, gy)
    n, cin = xc.shape[:2]
    cout = dyc.shape[1]
    cin_pg, cout_pg = cin // groups, cout // groups
    sp = xc.ndim - 2
    gx, gwt, y = np.zeros_like(xc), np.zeros_like(w), np.zeros_like(dyc)
    for k in _taps(w.shape[2:]):
        o_idx, j_idx = [], []
        for i in range(sp):
            o = np.arange(dyc.shape[2 + i])
            j = o * stride[i] - padding[i] + k[i] * dilation[i]
            ok = (j >= 0) & (j < xc.shape[2 + i])
            o_idx.append(o[ok]), j_idx.append(j[ok])
        if any(len(o) == 0 for o in o_idx):
            continue
        for g in range(groups):
            ci = np.arange(g * cin_pg, (g + 1) * cin_pg)
            co = np.arange(g * cout_pg, (g + 1) * cout_pg)
            xs = np.ix_(np.arange(n), ci, *j_idx)
            ds = np.ix_(np.arange(n), co, *o_idx)
            wk = w[(co[:, None], np.arange(cin_pg)[None, :]) + tuple(int(t) for t in k)]
            xk, dk = xc[xs], dyc[ds]
            gx[xs] += np.einsum("no...,oc->nc...", dk, wk)
            y[ds] += np.einsum("nc...,oc->no...", xk, wk)
            gwt[(co[:, None], np.arange(cin_pg)[None, :]) + tuple(int(t) for t in k)] += \
                np.einsum("nos,ncs->oc", dk.reshape(n, cout_pg, -1), xk.reshape(n, cin_pg, -1))
    gb = gy.sum(axis=(0,) + tuple(range(2, gy.ndim)))
    return (y if transposed else gx), gwt, gb


def _same_pattern(ours, ref, what):
    ref = np.asarray(ref.detach().numpy() if hasattr(ref, "detach") else ref)
    for name, f in (("NaN", np.isnan), ("+Inf", np.isposinf), ("-Inf", np.isneginf)):
        np.testing.assert_array_equal(f(ours), f(ref), err_msg=f"{what}: {name} pattern")
    fin = np.isfinite(ref)
    np.testing.assert_allclose(ours[fin], ref[fin], rtol=1e-4, atol=1e-4, err_msg=f"{what}: finite values")


def _run(x, w, gy, a):
    bias = [w.shape[1] * a["groups"]] if a["transposed"] else [w.shape[0]]
    return bias, tbex.convolution_backward(gy.numpy(), x.numpy(), w.numpy(), bias, a["stride"],
                                           a["padding"], a["dilation"], a["transposed"],
                                           a["output_padding"], a["groups"], [True, True, True])


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("seed", range(120))
def test_nonfinite_pattern_matches_the_defining_sums(seed):
    x, w, gy, a = _case(seed)
    _, ours = _run(x, w, gy, a)
    ref = oracle(x.numpy(), w.numpy(), gy.numpy(), a["stride"], a["padding"], a["dilation"],
                 a["transposed"], a["groups"])
    for i, what in enumerate(("grad_input", "grad_weight", "grad_bias")):
        _same_pattern(ours[i], ref[i], what)


@pytest.mark.parametrize("seed", range(30))
def test_nonfinite_pattern_matches_torch_without_padding(seed):
    x, w, gy, a = _case(1000 + seed, padding=False)
    bias, ours = _run(x, w, gy, a)
    ref = torch.ops.aten.convolution_backward(gy, x, w, bias, a["stride"], a["padding"], a["dilation"],
                                              a["transposed"], a["output_padding"], a["groups"],
                                              [True, True, True])
    for i, what in enumerate(("grad_input", "grad_weight", "grad_bias")):
        _same_pattern(ours[i], ref[i], what)
