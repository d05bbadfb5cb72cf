"""accumulate="vpmaddubsw" of qnn.conv2d / qnn.dense: ONNX Runtime's U8S8 kernels on x86-64
without VNNI add adjacent pairs of uint8 x int8 products into an int16 with saturation.

Checked against a scalar loop written from the instruction's definition (independent of the
numpy implementation); the whole-model check against ONNX Runtime is in
tests/frontends/onnx/test_onnx_ort_cpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qnn_helpers import call, rand

from partita.errors import TypeInferenceError

F32 = np.float32


def sat16(v: int) -> int:
    return min(max(v, -32768), 32767)


def kernel_sum(a_u8, b_s8, za: int, zb: int) -> int:
    """One output of MLAS's kernel: pairs (2j, 2j+1) of raw products saturated to int16 and
    summed in int32, then the zero points applied from exact row and column sums."""
    a, b = [int(v) for v in a_u8], [int(v) for v in b_s8]
    if len(a) % 2:
        a, b = a + [0], b + [0]
    raw = sum(sat16(a[k] * b[k] + a[k + 1] * b[k + 1]) for k in range(0, len(a), 2))
    return raw - za * sum(b) - zb * sum(a) + len(a_u8) * za * zb


def test_hand_computed_pair():
    # (255, 255) . (127, 127) = 64770 saturates to 32767 (oneDNN's and ONNX Runtime's example)
    x = np.array([[255, 255]], np.uint8)
    w = np.array([[127, 127]], np.int8)
    exact = call("qnn.dense", x, w, np.int32(0), np.int32(0), F32(1), F32(1))
    sat = call("qnn.dense", x, w, np.int32(0), np.int32(0), F32(1), F32(1),
               accumulate="vpmaddubsw")
    assert exact.tolist() == [[64770]] and sat.tolist() == [[32767]]
    # with the zero point 128 the exact answer is 127 * 127 * 2 = 32258; the kernel gets 255
    sat = call("qnn.dense", x, w, np.int32(128), np.int32(0), F32(1), F32(1),
               accumulate="vpmaddubsw")
    assert sat.tolist() == [[32767 - 128 * 254]]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 9),
       dtype=st.sampled_from(["uint8", "int8"]))
def test_dense_matches_the_scalar_kernel(seed, k, dtype):
    rng = np.random.default_rng(seed)
    x = rand(rng, dtype, (3, k))
    w = rand(rng, "int8", (4, k))
    za, zb = int(rng.integers(-128, 128)), int(rng.integers(-3, 4))
    got = call("qnn.dense", x, w, np.int32(za), np.int32(zb), F32(1), F32(1),
               accumulate="vpmaddubsw")
    shift = 128 if dtype == "int8" else 0  # int8 data enters the kernel as uint8 + 128
    want = [[kernel_sum(x[m].astype(np.int64) + shift, w[n], za + shift, zb) for n in range(4)]
            for m in range(3)]
    assert got.tolist() == want


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("groups,cin,cout", [(1, 3, 4), (1, 5, 2), (2, 4, 6)])
def test_conv_pairs_follow_the_nhwc_im2col_order(layout, groups, cin, cout):
    """K runs over (kernel row, kernel column, input channel), so pairs cross taps when the
    group's channel count is odd; padded taps hold the input zero point."""
    rng = np.random.default_rng(cin * 10 + groups)
    x = rng.integers(150, 256, (1, 5, 5, cin)).astype(np.uint8)  # large: pairs saturate
    w = rng.integers(60, 128, (cout, cin // groups, 3, 3)).astype(np.int8)
    za = 100
    xin = x if layout == "NHWC" else x.transpose(0, 3, 1, 2)
    got = call("qnn.conv2d", xin, w, np.int32(za), np.int32(0), F32(1), F32(1), padding=(1, 1),
               groups=groups, data_layout=layout, accumulate="vpmaddubsw")
    exact = call("qnn.conv2d", xin, w, np.int32(za), np.int32(0), F32(1), F32(1),
                 padding=(1, 1), groups=groups, data_layout=layout)
    if layout == "NCHW":
        got, exact = got.transpose(0, 2, 3, 1), exact.transpose(0, 2, 3, 1)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=za)
    cg, og = cin // groups, cout // groups
    for i in range(5):
        for j in range(5):
            for o in range(cout):
                g = o // og
                a = padded[0, i:i + 3, j:j + 3, g * cg:(g + 1) * cg].reshape(-1)  # (kh, kw, c)
                b = w[o].transpose(1, 2, 0).reshape(-1)
                assert got[0, i, j, o] == kernel_sum(a, b, za, 0), (i, j, o)
    assert (got != exact).any()  # the case does saturate


def test_tap_variant_pairs_channels_within_a_tap():
    """oneDNN pads an odd channel count per tap: with 3 channels the pairs are (c0, c1) and
    (c2, 0) at every tap, never (c2 of one tap, c0 of the next) as the im2col order has it."""
    rng = np.random.default_rng(7)
    x = rng.integers(170, 256, (1, 6, 6, 3)).astype(np.uint8)
    w = rng.integers(90, 128, (4, 3, 3, 3)).astype(np.int8)
    got = call("qnn.conv2d", x, w, np.int32(0), np.int32(0), F32(1), F32(1), padding=(1, 1),
               data_layout="NHWC", accumulate="vpmaddubsw_tap")
    flat = call("qnn.conv2d", x, w, np.int32(0), np.int32(0), F32(1), F32(1), padding=(1, 1),
                data_layout="NHWC", accumulate="vpmaddubsw")
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    for i in range(6):
        for j in range(6):
            for o in range(4):
                a = np.pad(padded[0, i:i + 3, j:j + 3, :], ((0, 0), (0, 0), (0, 1))).reshape(-1)
                b = np.pad(w[o].transpose(1, 2, 0), ((0, 0), (0, 0), (0, 1))).reshape(-1)
                assert got[0, i, j, o] == kernel_sum(a, b, 0, 0)
    assert (got != flat).any()
    with pytest.raises(TypeInferenceError, match="only for groups=1"):
        call("qnn.conv2d", np.zeros((1, 4, 4, 6), np.uint8), np.zeros((6, 3, 3, 3), np.int8),
             np.int32(0), np.int32(0), F32(1), F32(1), groups=2, data_layout="NHWC",
             accumulate="vpmaddubsw_tap")


def test_refuses_other_dtypes():
    x = np.zeros((1, 4), np.int16)
    w = np.zeros((2, 4), np.int8)
    with pytest.raises(TypeInferenceError, match="vpmaddubsw.*int16"):
        call("qnn.dense", x, w, np.int32(0), np.int32(0), F32(1), F32(1),
             accumulate="vpmaddubsw")
    with pytest.raises(TypeInferenceError, match="vpmaddubsw.*weight uint8"):
        call("qnn.dense", x.astype(np.uint8), w.astype(np.uint8), np.int32(0), np.int32(0),
             F32(1), F32(1), accumulate="vpmaddubsw")
