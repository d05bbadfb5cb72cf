"""The op semantics the TFLite frontend added, on hand-computed values: qnn.requantize
"tflite_builtin" (ties upward, the optimized kernels' NEON rounding) and "tflite_double" (the
reference FULLY_CONNECTED's double product), and qnn.mean "tflite_builtin"."""

from __future__ import annotations

import numpy as np
import pytest

from partita import interpret
from partita.ir import const
from partita.ops import get_op
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier_upward,
    scale_round_half_away_double,
)


def requantize(data, scale, semantics):
    op = get_op("qnn.requantize")
    call = op(const(np.asarray(data, np.int32)), const(np.float64(scale)), const(0, "int32"),
              const(np.float32(1.0)), const(0, "int32"), out_dtype="int8", semantics=semantics)
    return interpret(call)[0].tolist()


@pytest.mark.parametrize("semantics, want", [
    ("tflite", [-1, 1, -2, 2, -3, 3]),          # RoundingDivideByPOT: half away from zero
    ("tflite_builtin", [0, 1, -1, 2, -2, 3]),   # vrshl: half up
    ("tflite_double", [-1, 1, -2, 2, -3, 3]),   # round(double): half away from zero
])
def test_requantize_ties(semantics, want):
    """x * 0.25 (q = 2**30, shift -1) for x = -2, 2, -6, 6, -10, 10: every value is a tie
    (the high multiply is exact, so only the final shift rounds)."""
    assert requantize([-2, 2, -6, 6, -10, 10], 0.25, semantics) == want


def test_requantize_double_rounding_differs_from_one_rounding():
    """acc = -11630 with m = 0.0022785173431440846 (a depthwise channel of the test models):
    acc * m = -26.4992, but TFLite's fixed-point multiply first rounds acc * q / 2**31 to
    -6784 = -26.5 * 256, then rounds that half away: -27. One double rounding gives -26."""
    m = 0.0022785173431440846
    assert requantize([-11630], m, "tflite") == [-27]
    assert requantize([-11630], m, "tflite_double") == [-26]


def test_upward_multiply_shift_conventions():
    """r = max(-shift, 1): a multiplier above one (shift > 0) still takes one rounding shift."""
    q = 1 << 30  # 0.5
    assert multiply_by_quantized_multiplier_upward(np.array([7, -7]), q, 1).tolist() == [7, -7]
    # -7 * 0.25 = -1.75: vqrdmulh rounds -3.5 up to -3, the shift rounds -1.5 up to -1 (the
    # NEON double rounding); 7 * 0.25 = 1.75 -> 3.5 -> 4 -> 2.
    assert multiply_by_quantized_multiplier_upward(np.array([7, -7]), q, -1).tolist() == [2, -1]
    # 5 * 0.25 = 1.25 -> 2.5 -> 3 -> 2: the double rounding the kernels really do.
    assert multiply_by_quantized_multiplier_upward(np.array([5]), q, -1).tolist() == [2]


def test_round_half_away_double_is_exact():
    v = scale_round_half_away_double(np.array([1, -1, 3, -3]), np.array(0.49999999999999994))
    assert v.tolist() == [0, 0, 1, -1]  # 1.4999999999999998 rounds down, not up
    assert scale_round_half_away_double(np.array([5, -5]), np.array(0.5)).tolist() == [3, -3]


def test_mean_builtin_blocks_of_16_channels():
    """Sum -2 over four taps of each of 17 channels; s_in = s_out, zero points 0: r = 1/4, so
    every channel is -0.5 before rounding. The first 16 channels (one NEON block) round half up
    to 0, the 17th (scalar tail) half away to -1; "tflite" rounds all half away."""
    x = np.zeros((1, 2, 2, 17), np.int8)
    x[0, 0, 0, :] = -1
    x[0, 1, 1, :] = -1
    args = (const(x), const(np.float32(0.5)), const(0, "int32"), const(np.float32(0.5)),
            const(0, "int32"))
    mean = get_op("qnn.mean")
    builtin = interpret(mean(*args, axis=(1, 2), keepdims=True, semantics="tflite_builtin"))[0]
    assert builtin.reshape(-1).tolist() == [0] * 16 + [-1]
    ref = interpret(mean(*args, axis=(1, 2), keepdims=True, semantics="tflite"))[0]
    assert ref.reshape(-1).tolist() == [-1] * 17
