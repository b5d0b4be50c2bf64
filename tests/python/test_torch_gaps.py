"""tbex.torch as torch.nn.Conv3d in the corners: padding modes, unbatched input, memory formats,
dtypes tbex does not compute, double backward."""
import pytest

torch = pytest.importorskip("torch")
import tbex.torch as tt  # noqa: E402


def _grads(module, x):
    x = x.clone().requires_grad_(True)
    y = module(x)
    g = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.dtype)
    y.backward(g)
    return y.detach(), x.grad, module.weight.grad, module.bias.grad


def _pair(**kw):
    torch.manual_seed(0)
    ref = torch.nn.Conv3d(**kw)
    ours = tt.Conv3d(**kw)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def _close(a, b, tol=1e-4):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
@pytest.mark.parametrize("padding", [1, (0, 1, 2), "same"])
def test_padding_modes(mode, padding):
    ref, ours = _pair(in_channels=3, out_channels=4, kernel_size=3, padding=padding, padding_mode=mode)
    x = torch.randn(2, 3, 5, 6, 7)
    for a, b in zip(_grads(ours, x), _grads(ref, x)):
        _close(a, b)


def test_unbatched_input():
    ref, ours = _pair(in_channels=2, out_channels=3, kernel_size=2, stride=2, padding=1)
    x = torch.randn(2, 5, 4, 6)
    got, want = _grads(ours, x), _grads(ref, x)
    assert got[0].shape == want[0].shape == (3, 3, 3, 4)
    for a, b in zip(got, want):
        _close(a, b)


def test_gradients_keep_the_memory_format():
    ref, ours = _pair(in_channels=16, out_channels=8, kernel_size=3, padding=1)
    ours = ours.to(memory_format=torch.channels_last_3d)
    ref = ref.to(memory_format=torch.channels_last_3d)
    x = torch.randn(2, 16, 4, 5, 6).to(memory_format=torch.channels_last_3d)
    got, want = _grads(ours, x), _grads(ref, x)
    for a, b in zip(got, want):
        _close(a, b)
    cl = torch.channels_last_3d
    assert want[1].is_contiguous(memory_format=cl) and got[1].is_contiguous(memory_format=cl)
    assert want[2].is_contiguous(memory_format=cl) == got[2].is_contiguous(memory_format=cl)


@pytest.mark.filterwarnings("ignore:Complex modules")
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64])
def test_dtypes_tbex_does_not_compute_fail_in_forward(dtype):
    m = tt.Conv3d(2, 2, 1)
    with pytest.raises(TypeError, match=r"tbex\.torch.*float32, float16 or bfloat16"):
        m.to(dtype)(torch.zeros(1, 2, 3, 3, 3, dtype=dtype))
    with pytest.raises(TypeError, match=r"tbex\.torch"):
        tt.conv3d(torch.zeros(1, 2, 3, 3, 3, dtype=torch.int32), torch.zeros(2, 2, 1, 1, 1))


def test_double_backward_is_a_clear_error():
    m = tt.Conv3d(2, 2, 3, padding=1)
    x = torch.randn(1, 2, 4, 4, 4, requires_grad=True)
    (gx,) = torch.autograd.grad(m(x).square().sum(), x, create_graph=False)
    assert gx.shape == x.shape
    with pytest.raises(RuntimeError, match=r"tbex\.torch.*double backward"):
        torch.autograd.grad(m(x).square().sum(), x, create_graph=True)
