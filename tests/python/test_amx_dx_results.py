"""The bf16 dX kernels on AMX tiles that tbex writes by hand (dx_amx_cols: few input channels
in tile columns of (kw, channel); dx_amx_blocked: 2 x 2 blocks of tiles) through the DSL: the
results Halide finishes from the kernels' fp32 sums (a bias added, fp16 cast) as well as the one
the kernels write themselves (fp32, no bias), against the float64 oracle, at 1 and 2 threads
(the calls are split by the thread count; the sums must not be). Runs where the host
has AMX-BF16 (skipped with the reason elsewhere; tests/cpp/test_amx.cpp runs the kernels on
emulated tile registers on every machine)."""
import numpy as np
import pytest

import oracle as O
import tbex

# The stem's shape, small: 3 channels, 3 x 5 x 7 taps, stride 2 along h and w.
STEM = O.Geometry(2, 3, 32, (4, 10, 23), (3, 5, 7), strides=(1, 2, 2), pads=(1, 1, 2, 2, 3, 3),
                  name="stem")
# Three input blocks (a pair and a single), 3 x 3 x 3 taps, rows of 21 ending in a ragged tile.
BLOCKS = O.Geometry(1, 48, 32, (7, 6, 21), (3, 3, 3), pads=(1, 1, 1, 1, 1, 1), name="blocks")
# Dilated along d (taps 2 planes apart) with a head pad beyond the kernel's reach along d.
DILATED = O.Geometry(2, 32, 64, (6, 4, 18), (3, 2, 3), dilations=(2, 1, 1), pads=(2, 2, 1, 0, 1, 1),
                     name="dilated_d")

# Stride 2 along every dim over odd extents: the blocked kernel's tiles are 16 positions of one
# stride phase (phases of 19 and 18 along w: a whole tile and one shifted back over it), each
# walking its phase's taps.
STRIDED = O.Geometry(2, 32, 48, (5, 7, 37), (3, 3, 3), strides=(2, 2, 2), pads=(1, 1, 1, 1, 1, 1),
                     name="strided")

CASES = [("dx_amx_cols", STEM), ("dx_amx_blocked", BLOCKS), ("dx_amx_blocked", DILATED),
         ("dx_amx_blocked", STRIDED)]


def _skip_unless_ranked(geo, schedule):
    names = {r["schedule"] for r in O.ranked_schedules(geo, "dX", dtype="bfloat16")}
    if schedule not in names:
        pytest.skip("%s does not apply here (no AMX-BF16 on this host): ranked %s" %
                    (schedule, ", ".join(sorted(names))))


@pytest.mark.parametrize("schedule,geo", CASES, ids=[s + "-" + g.name for s, g in CASES])
@pytest.mark.parametrize("res_dtype,bias_dtype", [("float32", None), ("float32", "float32"),
                                                  ("float16", None), ("float16", "bfloat16")])
def test_amx_dx_results(schedule, geo, res_dtype, bias_dtype):
    _skip_unless_ranked(geo, schedule)
    rng = np.random.default_rng(71)
    w = O.random_data(rng, geo.w_shape, "bfloat16")
    dy = O.random_data(rng, geo.dy_shape, "bfloat16")
    bias = O.random_data(rng, (geo.cin,), bias_dtype) if bias_dtype else None
    raws = []
    for threads in (1, 2):
        with tbex.knobs.threads(threads):
            raws.append(O.run_dx(geo, w, dy, "bfloat16", res_dtype=res_dtype, schedule=schedule,
                                 bias=bias, bias_dtype=bias_dtype or "float32"))
    O.check_dx(raws[0], O.ref_dx(w, dy, geo, bias=bias), geo, res_dtype,
               what="%s dX %s %s bias %s" % (geo.name, schedule, res_dtype, bias_dtype))
    np.testing.assert_array_equal(raws[1], raws[0], err_msg="2 threads against 1")


def test_blocked_output_at_any_alignment_gives_the_same_bits():
    # The kernel fetches a misaligned output's rows line by line for writing (both lines of a
    # 64-byte row 16 bytes into a line): the sums must not depend on where the caller's buffer
    # starts.
    _skip_unless_ranked(STRIDED, "dx_amx_blocked")
    from tbex import dsl, layout
    rng = np.random.default_rng(5)
    w = O.random_data(rng, STRIDED.w_shape, "bfloat16")
    dy = O.random_data(rng, STRIDED.dy_shape, "bfloat16")
    tensors, res, args = O.dx_tensors(STRIDED, w, dy, "bfloat16", {"res_dtype": "float32"}, None,
                                      "float32")
    kernel = dsl.build(dsl.auto_schedule(res, schedule="dx_amx_blocked"),
                       {"name": "dx_align", "tensor_list": tensors + [res]})
    returned = kernel(*args)
    assert returned.ctypes.data % layout.LINE_BYTES == 0
    for offset in (16, 32, 48):
        raw = layout.empty(returned.size * 4 + 64, np.uint8)
        out = raw[offset:offset + returned.size * 4].view(np.float32).reshape(returned.shape)
        assert out.ctypes.data % 64 == offset
        kernel(*args, out=out)
        np.testing.assert_array_equal(out, returned, err_msg="output %d bytes into a line" % offset)
