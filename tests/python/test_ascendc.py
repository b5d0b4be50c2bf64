"""tbex.ascendc: the Ascend C host tiling from Python (bytes as the kernel reads them + fields)."""
import struct

import pytest

import tbex
from tbex import ascendc

# CANN's field types in declaration order (the dict keeps that order): u64 for the last two dW
# fields, the last three dX fields; i32 for dX's hf32Flag, initOutputFlag, reserved.
DW_U64 = {"singleCoreBatch", "singleCoreCin"}
DX_U64 = {"singleCoreBatch", "singleCoreM", "singleCoreCin"}
DX_I32 = {"hf32Flag", "initOutputFlag", "reserved"}


def unpack(data, offset, names, u64, i32=()):
    """Reads the named fields at natural alignment, as a C compiler lays them out."""
    out = {}
    for n in names:
        size, fmt = (8, "<Q") if n in u64 else (4, "<i" if n in i32 else "<I")
        offset = (offset + size - 1) // size * size
        out[n] = struct.unpack_from(fmt, data, offset)[0]
        offset += size
    return out, offset


def test_filter_tiling_bytes_match_fields():
    t = ascendc.filter_tiling([64, 32, 3, 3, 3], [2, 32, 8, 28, 28], [2, 64, 8, 14, 14],
                              strides=[1, 2, 2], pads=[1, 1, 1, 1, 1, 1], dtype="bfloat16")
    dw = t.fields["dwTiling"]
    assert len(dw) == 52
    assert struct.unpack_from("<I", t.data, 0)[0] == t.fields["params"]["totalL1Size"]
    got, end = unpack(t.data, 8, list(dw), DW_U64)  # params (4 bytes) then 8-aligned dwTiling
    assert got == dw and end == 8 + 216
    assert struct.unpack_from("<3I", t.data, end) == tuple(t.fields["basicBlockTiling"].values())
    assert dw["cin1G"] == 2 and dw["cout1G"] == 4 and dw["channelSize"] == 16
    assert dw["strideH"] == 2 and dw["padUp"] == 1 and dw["group"] == 1
    assert 1 <= dw["singleCoreHo"] <= 14 and dw["baseN"] % 16 == 0
    assert t.fields["basicBlockTiling"]["singleCoreK"] == dw["singleCoreHo"] * 14


def test_input_tiling_bytes_match_fields():
    t = ascendc.input_tiling([48, 20, 2, 3, 3], [1, 20, 5, 9, 9], [1, 48, 4, 9, 9],
                             pads=[0, 0, 1, 1, 1, 1])
    dx = t.fields["conv3DDxTiling"]
    assert len(t.data) == 280 and len(dx) == 66
    got, end = unpack(t.data, 0, list(dx), DX_U64, DX_I32)
    assert got == dx and end == 280
    assert dx["backpropPadUp"] == 1 and dx["backpropPadLeft"] == 1
    assert dx["c0"] == 16 and dx["cin1"] == 2 and dx["cout1"] == 3
    assert dx["singleCoreM"] % 9 == 0 and dx["iterateOrder"] == 1
    assert dx["initOutputFlag"] == 1


def test_invalid_input_raises_user_error():
    with pytest.raises(tbex.UserError, match="groups must be 1") as e:
        ascendc.filter_tiling([16, 8, 1, 3, 3], [1, 16, 1, 6, 6], [1, 16, 1, 4, 4], groups=2)
    assert e.value.param == "tiling"
    with pytest.raises(tbex.UserError, match="E60025"):
        ascendc.filter_tiling([16, 16, 1, 3, 3], [1, 16, 1, 6, 6], [1, 16, 1, 5, 4])
    with pytest.raises(tbex.UserError, match="exceeds"):
        ascendc.input_tiling([16, 16, 1, 3, 3], [1, 16, 1, 6, 6], [1, 16, 1, 2, 2],
                             pads=[0, 0, 3, 0, 3, 0], strides=[1, 4, 4])
    with pytest.raises(tbex.UserError, match="weight_shape"):
        ascendc.filter_tiling([16, 16, 3, 3], [1, 16, 1, 6, 6], [1, 16, 1, 4, 4])
    with pytest.raises(tbex.UserError, match="dtype"):
        ascendc.filter_tiling([16, 16, 1, 3, 3], [1, 16, 1, 6, 6], [1, 16, 1, 4, 4], dtype="int8")
