"""tbex.torch: Conv3d / conv3d / Conv3dFunction, autograd drop-ins whose backward is
tbex.convolution_backward, trained side by side with torch.nn.Conv3d.

Tolerances (explicit), as max|tbex - torch| / max|torch| per tensor:
- float32: gradients <= 5e-6, weights after each SGD step <= 1e-6 (both sides accumulate in
  fp32 in different orders; measured ~5e-7 and ~7e-8, stable over the steps);
- float16: gradients <= 4e-3 (a few fp16 ulps: both round fp32 sums once to fp16, and later steps
  see weights that already differ by an ulp; measured ~1e-3), weights <= 2e-3 (measured ~5e-4,
  one fp16 ulp).
- single conv3d calls in float32: gradients <= 2e-5.
"""
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import oracle as O
import tbex
import tbex.torch as tt

TOL = {torch.float32: {"grad": 5e-6, "weight": 1e-6},
       torch.float16: {"grad": 4e-3, "weight": 2e-3}}
STEPS = 4


def rel(a, b):
    return O.rel_err(a.detach().double().numpy(), b.detach().double().numpy())


def two_layer_net(conv_cls):
    return torch.nn.Sequential(
        conv_cls(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        conv_cls(8, 6, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), dilation=(1, 1, 2),
                 groups=2),
    )


class Spy:
    """Wraps tbex.torch's convolution_backward, recording each call's output_mask and
    bias_sizes."""

    def __init__(self, monkeypatch):
        self.calls = []
        self.real = tt.convolution_backward
        monkeypatch.setattr(tt, "convolution_backward", self)

    def __call__(self, *args, **kw):
        self.calls.append({"output_mask": list(args[10]), "bias_sizes": args[3]})
        return self.real(*args, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_training_matches_torch(dtype, monkeypatch):
    spy = Spy(monkeypatch)
    torch.manual_seed(0)
    ref_net = two_layer_net(torch.nn.Conv3d).to(dtype)
    net = two_layer_net(tt.Conv3d).to(dtype)
    net.load_state_dict(ref_net.state_dict())
    x = torch.randn(2, 3, 5, 8, 9).to(dtype)
    target = torch.randn_like(ref_net(x))
    opt_ref = torch.optim.SGD(ref_net.parameters(), lr=0.05)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    tol = TOL[dtype]
    for step in range(STEPS):
        for model, o in ((ref_net, opt_ref), (net, opt)):
            o.zero_grad()
            F.mse_loss(model(x).float(), target.float()).backward()
        named = dict(net.named_parameters())
        for name, p_ref in ref_net.named_parameters():
            p = named[name]
            assert p.grad is not None and p.grad.dtype == dtype, f"step {step} {name}: grad"
            err = rel(p.grad, p_ref.grad)
            assert err <= tol["grad"], f"step {step} {name}.grad: rel_err {err:.3g}"
        opt_ref.step()
        opt.step()
        for name, p_ref in ref_net.named_parameters():
            err = rel(named[name], p_ref)
            assert err <= tol["weight"], f"step {step} {name} after step: rel_err {err:.3g}"
    # every backward of both layers went through tbex: the input of layer 1 needs no grad
    assert len(spy.calls) == 2 * STEPS
    masks = sorted(tuple(c["output_mask"]) for c in spy.calls)
    assert masks == [(False, True, True)] * STEPS + [(True, True, True)] * STEPS


def test_output_mask_follows_needs_input_grad(monkeypatch):
    spy = Spy(monkeypatch)
    torch.manual_seed(1)
    x = torch.randn(1, 4, 4, 5, 6, requires_grad=True)
    w = torch.randn(6, 2, 2, 2, 2, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    cases = [  # (bias, which need grad, expected mask, expected bias_sizes)
        (b, (x, w, b), [True, True, True], [6]),
        (None, (x, w), [True, True, False], None),
        (b, (w,), [False, True, False], [6]),
        (b, (x,), [True, False, False], [6]),
        (b, (b,), [False, False, True], [6]),
    ]
    for bias, need, mask, bias_sizes in cases:
        for t in (x, w, b):
            t.requires_grad_(any(t is n for n in need))
        y = tt.conv3d(x, w, bias, stride=1, padding=1, groups=2)
        torch.autograd.grad(y.square().sum(), need)
        assert spy.calls[-1] == {"output_mask": mask, "bias_sizes": bias_sizes}


FUNCTIONAL = {
    # name: (input shape, weight shape, bias?, keyword arguments)
    "ints": ((2, 4, 5, 6, 7), (6, 4, 3, 3, 3), True, dict(stride=2, padding=1)),
    "tuples": ((1, 6, 6, 7, 8), (4, 3, 2, 3, 2), False,
               dict(stride=(1, 2, 1), padding=(0, 1, 2), dilation=(2, 1, 3), groups=2)),
    "depthwise": ((2, 5, 4, 6, 6), (10, 1, 3, 3, 1), True, dict(padding=(1, 1, 0), groups=5)),
    "valid": ((1, 3, 5, 5, 5), (2, 3, 3, 2, 3), True, dict(padding="valid")),
    "same odd": ((2, 3, 5, 6, 7), (4, 3, 2, 3, 4), True, dict(padding="same", dilation=(1, 2, 1))),
    "same even": ((1, 3, 4, 5, 6), (4, 3, 3, 3, 3), False, dict(padding="same", dilation=2)),
}


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel lengths")
@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_functional_matches_torch(name):
    x_shape, w_shape, has_bias, kw = FUNCTIONAL[name]
    torch.manual_seed(2)
    x = torch.randn(x_shape, requires_grad=True)
    w = torch.randn(w_shape, requires_grad=True)
    b = torch.randn(w_shape[0], requires_grad=True) if has_bias else None
    leaves = [t for t in (x, w, b) if t is not None]
    y_ref = F.conv3d(x, w, b, **kw)
    y = tt.conv3d(x, w, b, **kw)
    assert torch.equal(y, y_ref), "forward differs from torch's"  # torch computes it
    g = torch.randn_like(y_ref)
    ref = torch.autograd.grad(y_ref, leaves, g)
    got = torch.autograd.grad(y, leaves, g)
    for r, a in zip(ref, got):
        assert a.shape == r.shape
        assert rel(a, r) <= 2e-5, f"{name}: rel_err {rel(a, r):.3g}"


def test_sum_loss_with_expanded_grad_output():
    """y.sum().backward() hands the backward a grad_output with all strides 0."""
    torch.manual_seed(3)
    ref = torch.nn.Conv3d(3, 5, 3, padding=1)
    m = tt.Conv3d(3, 5, 3, padding=1)
    m.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 4, 5, 6)
    ref(x).sum().backward()
    m(x).sum().backward()
    for p, p_ref in zip(m.parameters(), ref.parameters()):
        assert rel(p.grad, p_ref.grad) <= 2e-5


def test_module_is_a_torch_conv3d():
    ref = torch.nn.Conv3d(4, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=4,
                          bias=False)
    m = tt.Conv3d(4, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=4, bias=False)
    assert isinstance(m, torch.nn.Conv3d)
    assert m.bias is None and m.weight.shape == ref.weight.shape
    m.load_state_dict(ref.state_dict())
    assert torch.equal(m.weight, ref.weight)
    assert m.extra_repr() == ref.extra_repr()


def test_functional_rejects_bad_arguments():
    x = torch.zeros(1, 2, 4, 4, 4)
    w = torch.zeros(2, 2, 3, 3, 3)
    with pytest.raises(ValueError, match="stride"):
        tt.conv3d(x, w, stride=(1, 2))
    with pytest.raises(ValueError, match="padding"):
        tt.conv3d(x, w, padding="full")
    with pytest.raises(ValueError, match="same"):
        tt.conv3d(x, w, padding="same", stride=2)


def test_import_tbex_does_not_import_torch():
    code = ("import sys, tbex; assert 'tbex.torch' not in sys.modules; "
            "assert 'torch' not in sys.modules, 'import tbex imported torch'; "
            "import tbex.torch; assert tbex.torch.Conv3d.__mro__[1].__name__ == 'Conv3d'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert tbex.torch is tt
