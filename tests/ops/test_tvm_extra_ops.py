"""left_shift, right_shift and nn.depth_to_space: values against independent index loops,
inferred types, and precise failures."""

from __future__ import annotations

import numpy as np
import pytest
from op_helpers import assert_same, run, type_error, type_of

from partita import TensorType


def test_shifts_broadcast_and_keep_the_dtype():
    x = np.array([[1, -2, 64], [3, 5, -128]], "int8")
    s = np.array([1, 2, 1], "int8")
    assert_same(run("left_shift", x, s), (x.astype(np.int64) << s).astype(np.int8))
    assert_same(run("right_shift", x, s), x >> s)  # arithmetic: -2 >> 2 == -1


def test_shifts_refuse_floats():
    with type_error("shifts take integers"):
        type_of("left_shift", ((2,), "float32"), ((2,), "float32"))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_moves_each_channel_to_its_block(layout, mode):
    b, n, c, h, w = 2, 1, 8, 2, 3
    rng = np.random.default_rng(0)
    nchw = rng.integers(-128, 128, (n, c, h, w), dtype=np.int8)
    data = nchw if layout == "NCHW" else np.transpose(nchw, (0, 2, 3, 1))
    out = run("nn.depth_to_space", data, block_size=b, layout=layout, mode=mode)
    out_nchw = out if layout == "NCHW" else np.transpose(out, (0, 3, 1, 2))
    cp = c // (b * b)
    for oc in range(cp):
        for y in range(h * b):
            for x in range(w * b):
                i, j = y % b, x % b
                ic = (i * b + j) * cp + oc if mode == "DCR" else oc * b * b + i * b + j
                assert out_nchw[0, oc, y, x] == nchw[0, ic, y // b, x // b]


def test_depth_to_space_type_and_errors():
    t = type_of("nn.depth_to_space", ((1, 4, 4, 8), "int8"), block_size=2, layout="NHWC")
    assert t == TensorType((1, 8, 8, 2), "int8")
    with type_error("do not divide into blocks of 2x2"):
        type_of("nn.depth_to_space", ((1, 6, 4, 4), "int8"), block_size=2)


def _fpm_reference(v: int, multiplier: int, shift: int) -> int:
    """Python integers (unbounded): round(v * multiplier * 2^(shift - 31)) half up, then
    wrapped to int32, computed as the formula reads."""
    left, right = max(shift, 0), max(-shift, 0)
    prod = (v << left) * multiplier
    out = (prod + (1 << (30 + right))) >> (31 + right)
    return (out + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize(
    "multiplier,shift",
    [(1518500250, -3), (2**31 - 1, 0), (1073741825, 2), (-1518500250, -1), (1288490189, 5)],
)
def test_fixed_point_multiply_rounds_half_up(multiplier, shift):
    rng = np.random.default_rng(0)
    x = rng.integers(-(2**20), 2**20, 64, dtype=np.int32)
    x[:4] = [0, 1, -1, 2**20 - 1]
    out = run("fixed_point_multiply", x, multiplier=multiplier, shift=shift)
    assert out.dtype == np.int32
    assert out.tolist() == [_fpm_reference(int(v), multiplier, shift) for v in x]


@pytest.mark.parametrize("shift", [-2, 0, 1, 3])
def test_fixed_point_multiply_by_a_half_is_a_shift(shift):
    x = np.array([-7, -6, -5, -1, 0, 1, 5, 6, 7, 1000], np.int32)
    out = run("fixed_point_multiply", x, multiplier=1 << 30, shift=shift)
    e = shift - 1
    expected = x << e if e > 0 else ((x + (1 << (-e - 1))) >> -e if e < 0 else x)
    assert out.tolist() == expected.tolist()


def test_fixed_point_multiply_takes_int32_only():
    with type_error("data must be int32"):
        type_of("fixed_point_multiply", ((2,), "int8"), multiplier=1 << 30, shift=0)
