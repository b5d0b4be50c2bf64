"""The TBE DSL documentation example for conv3d_backprop_filter, verbatim except
for the import line; then the kernel runs on random data and is checked against a float64
reference computed directly from the definition in NCDHW with numpy."""
import time

import numpy as np

from tbex import tvm
from tbex import dsl
from tbex import layout

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
# ---- end of the TBE example ----


def reference_dw(x, dy, k, s, p):
    """float64 dW in OIDHW from NCDHW x, dy: direct sum over the definition, one tap at a time."""
    n, cin, d, h, w = x.shape
    _, cout, od, oh, ow = dy.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3]), (p[4], p[5])))
    out = np.zeros((cout, cin) + tuple(k))
    for kd in range(k[0]):
        for kh in range(k[1]):
            for kw in range(k[2]):
                win = xp[:, :, kd:kd + s[0] * od:s[0], kh:kh + s[1] * oh:s[1], kw:kw + s[2] * ow:s[2]]
                out[:, :, kd, kh, kw] = np.einsum("nodhw,nidhw->oi", dy, win)
    return out


print("dedw:", dedw.shape, dedw.dtype)
sch = dsl.auto_schedule(dedw)
t0 = time.perf_counter()
kernel = dsl.build(sch, {"name": kernel_name, "tensor_list": [fmap, dedy, dedw]})
t1 = time.perf_counter()

rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (16, 16, 8, 72, 72)).astype(np.float16)
dy = rng.uniform(-1, 1, (16, 16, 4, 36, 36)).astype(np.float16)
x6, dy6 = layout.ncdhw_to_6hd(x), layout.ncdhw_to_6hd(dy)
out = np.empty(dedw.shape, np.float32)
kernel(x6, dy6, out=out)  # warm-up
t2 = time.perf_counter()
kernel(x6, dy6, out=out)
t3 = time.perf_counter()

got = layout.oidhw_from_fz3d(out.reshape(-1, 1, 16, 16), [16, 16, 2, 3, 3])
ref = reference_dw(x.astype(np.float64), dy.astype(np.float64), (2, 3, 3), strides, pads)
err = np.abs(got - ref).max() / np.abs(ref).max()
gflop = 2 * 16 * 16 * 4 * 36 * 36 * 16 * 2 * 3 * 3 / 1e9
print(f"result {out.shape} {out.dtype}, schedule {kernel.schedule}")
print(f"max relative error vs float64 reference: {err:.3g}")
print(f"compile {1e3 * (t1 - t0):.0f} ms, run {1e3 * (t3 - t2):.2f} ms ({gflop / (t3 - t2):.1f} GFLOP/s)")
assert out.shape == (1, 18, 16, 16) and out.dtype == np.float32
assert err <= 1e-5, f"error {err} above 1e-5"
print("OK")
