"""make test-large: a dW whose x has more than 2^31 fp16 elements (2 samples of 8300 x 8300
positions x 16 channels) but little compute (1x1 kernel, stride 64), checked against numpy at
every output (the reference reads only the strided positions). The kernel runs per batch slice
(codegen/batched.cpp); x is calloc'd, so only the rows the stride reaches take memory."""
import sys
import time

import numpy as np

import tbex
from tbex import dsl, tvm

N, H, W, S = 2, 8300, 8300, 64
x_shape = (N, 1, 1, H, W, 16)
assert np.prod(x_shape, dtype=np.int64) > 2**31
ho, wo = (H - 1) // S + 1, (W - 1) // S + 1
rng = np.random.default_rng(0)
x = np.zeros(x_shape, np.float16)
x[:, :, :, ::S, ::S, :] = rng.integers(-4, 5, (N, 1, 1, ho, wo, 16)).astype(np.float16)
dy = rng.integers(-4, 5, (N, 1, 1, ho, wo, 16)).astype(np.float16)

res = dsl.conv3d_backprop_filter(tvm.placeholder(x_shape, name="x", dtype="float16"),
                                 tvm.placeholder(dy.shape, name="dy", dtype="float16"),
                                 [16, 1, 16, 1, 1], {"strides": [1, S, S]})
t0 = time.time()
k = dsl.build(dsl.auto_schedule(res), {"name": "large_dw"})
t1 = time.time()
out = k(x, dy)  # (1, 1, 16, 16): [cout, cin] as (n0, c0) of the fractal
t2 = time.time()
xs = x[:, 0, 0, ::S, ::S, :].astype(np.float64)  # (N, ho, wo, cin)
ref = np.einsum("nhwc,nhwo->oc", xs, dy[:, 0, 0].astype(np.float64))
got = out.reshape(16, 16)
err = np.max(np.abs(got - ref))
print(f"test-large: x {x_shape} = {np.prod(x_shape, dtype=np.int64)} fp16 elements "
      f"({x.nbytes / 2**30:.1f} GiB); schedule {k.schedule}; compile {t1 - t0:.1f} s, run {t2 - t1:.2f} s; "
      f"max |error| {err}")
sys.exit(0 if err == 0 else 1)
