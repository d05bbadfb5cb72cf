"""qnn.mean against independent scalar transcriptions of TFLite's reference kernels (reduce.h,
integer_ops/mean.h, common.h; the current kernel and the one before TFLite 2.13) and ONNX
Runtime's (MLAS qlgavgpool.cpp, DequantizeLinear -> ReduceMean -> QuantizeLinear): plain Python
ints and float32 scalars in loops, nothing shared with the implementation.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
from qnn_helpers import RANGE, clamp
from qnn_pool_helpers import F32, mlas_global, random_data, random_params, run
from test_fixedpoint import c_div, mbqm_ref, quantize_multiplier_ref, wrap32


def std_round(x):
    """std::round: half away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


# ---- TFLite MEAN -------------------------------------------------------------------------------


def groups(x, axes, keepdims):
    """{output index: [values]} of a reduction over ``axes``, in row-major order."""
    out = {}
    for idx in itertools.product(*map(range, x.shape)):
        key = tuple(0 if d in axes else i for d, i in enumerate(idx) if keepdims or d not in axes)
        out.setdefault(key, []).append(int(x[idx]))
    return out


def reduce_with(fn, x, axes, keepdims):
    shape = [1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes]
    out = np.zeros(shape, np.int64)
    for key, values in groups(x, axes, keepdims).items():
        out[key] = fn(values)
    return out


def floor_log2(n):
    k = 0
    while (2 << k) <= n:
        k += 1
    return k


def tflite_mean(values, s_in, zp_in, s_out, zp_out, dtype):
    """reference_ops::QuantizedMeanOrSum (integer rescale, TFLite >= 2.13)."""
    n = len(values)
    m, e = quantize_multiplier_ref(float(F32(s_in)) / float(F32(s_out)))
    k = min(floor_log2(n), 32, 31 + e)
    m, e = (m << k) // n, e - k
    return clamp(mbqm_ref(wrap32(wrap32(sum(values)) - zp_in * n), m, e) + zp_out, dtype)


AXES_CASES = [
    ((2, 3, 4, 5), (1, 2), True),
    ((2, 3, 4, 5), (1, 2), False),
    ((2, 3, 4, 5), (2, 1), True),
    ((2, 3, 4, 5), (-3, -2), True),
    ((2, 3, 4, 5), (0, 3), False),
    ((2, 3, 4, 5), None, False),
    ((3, 7), (1,), True),
    ((3, 7), (0,), False),
    ((17,), (0,), False),
    ((1, 2, 3, 2), (2, 3), True),
    ((2, 1, 1, 3), (1, 2), True),
]


@pytest.mark.parametrize("shape,axis,keepdims", AXES_CASES)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_tflite_matches_quantized_mean_or_sum(shape, axis, keepdims, dtype):
    rng = np.random.default_rng(len(shape) * 10 + (0 if axis is None else len(axis)))
    x = random_data(rng, shape, dtype)
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    for same in (False, True):
        params = random_params(rng, dtype, same)
        expected = reduce_with(
            partial(
                tflite_mean,
                s_in=params[0],
                zp_in=params[1],
                s_out=params[2],
                zp_out=params[3],
                dtype=dtype,
            ),
            x,
            axes,
            keepdims,
        )
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims)
        np.testing.assert_array_equal(out, expected)


def test_mean_tflite_hand_computed():
    x = np.array([[1, 2, 3, 4], [1, 2, 4, 0]], np.int8)
    # n = 4: M = 2**30, e = 1 -> k = 2, M' = 2**30, e' = -1: 10 -> 2.5 -> 3 (half away), 7 -> 2.
    out = run("qnn.mean", x, 0.5, 0, 0.5, 0, axis=(1,))
    assert out.tolist() == [3, 2]
    # n = 3 ([1, 2, 4]): k = 1, M' = 2**31 // 3, e' = 0: SRDHM(7, M') = 2.
    out = run("qnn.mean", x[1:, :3], 0.5, 0, 0.5, 0, axis=(1,))
    assert out.tolist() == [2]


def test_mean_tflite_reduce_nothing_copies_and_large_counts_clamp_the_shift():
    x = np.array([[5, -7]], np.int8)
    # exclude over every axis reduces nothing: TFLite's ReduceIsCopy ignores the quantization.
    out = run("qnn.mean", x, 0.1, 3, 0.7, -4, axis=(0, 1), exclude=True)
    assert out.tolist() == [[5, -7]]
    # A scale ratio of 2**-30 gives e = -29, so k is clamped to 31 + e = 2 (< log2(64) = 6).
    x = np.full((64,), 100, np.int8)
    params = (2.0**-30, 0, 1.0, 0)
    assert run("qnn.mean", x, *params).item() == tflite_mean([100] * 64, *params, "int8")


# ---- TFLite MEAN before 2.13 (EvalMeanReferenceOps) --------------------------------------------


def legacy_4d_int8(values, s_in, zp_in, s_out, zp_out):
    """reference_integer_ops::Mean."""
    n = len(values)
    m, e = quantize_multiplier_ref(float(F32(s_in)) / float(F32(s_out)))
    acc = mbqm_ref(wrap32(sum(v - zp_in for v in values)), m, e)
    acc = c_div(acc + n // 2, n) if acc > 0 else c_div(acc - n // 2, n)
    return clamp(acc + zp_out, "int8")


def legacy_4d_uint8(values, s_in, zp_in, s_out, zp_out):
    """reference_ops::Mean for uint8 (float-derived bias and multiplier)."""
    n = len(values)
    bias = zp_out - int(F32(F32(F32(zp_in) * F32(s_in)) / F32(s_out)))
    m, e = quantize_multiplier_ref(float(F32(F32(s_in) / F32(F32(n) * F32(s_out)))))
    return clamp(mbqm_ref(sum(values), m, e) + bias, "uint8")


def legacy_float(values, s_in, zp_in, s_out, zp_out, dtype):
    """QuantizedMeanOrSum with the float rescale (compute_sum = false)."""
    scale = F32(F32(s_in) / F32(s_out))
    bias = F32(F32(F32(-zp_in) * scale) + F32(0.5))
    mean = F32(F32(sum(values)) / F32(len(values)))
    r = F32(std_round(float(F32(F32(mean * scale) + bias))) + F32(zp_out))
    return int(min(max(r, F32(RANGE[dtype][0])), F32(RANGE[dtype][1])))


def legacy_expected(x, axis, keepdims, params, dtype):
    axes = tuple(a % x.ndim for a in axis)
    if keepdims and x.ndim == 4 and axis in ((1, 2), (2, 1)):
        fn = (
            (lambda v: legacy_4d_int8(v, *params))
            if dtype == "int8"
            else (lambda v: legacy_4d_uint8(v, *params))
        )
    elif params[1] == params[3] and F32(params[0]) == F32(params[2]):
        fn = lambda v: c_div(sum(v), len(v))  # noqa: E731
    else:
        fn = lambda v: legacy_float(v, *params, dtype)  # noqa: E731
    return reduce_with(fn, x, axes, keepdims)


@pytest.mark.parametrize("shape,axis,keepdims", [c for c in AXES_CASES if c[1] is not None])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_tflite_legacy_takes_each_path_under_its_conditions(shape, axis, keepdims, dtype):
    rng = np.random.default_rng(sum(shape) + len(axis))
    x = random_data(rng, shape, dtype)
    for same in (False, True):
        params = random_params(rng, dtype, same)
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims, semantics="tflite_legacy")
        np.testing.assert_array_equal(out, legacy_expected(x, axis, keepdims, params, dtype))


def test_mean_tflite_legacy_paths_differ_where_tflite_changed():
    # Same scale and zero point: legacy truncates (10 / 4 -> 2), the current kernel rounds (3).
    x = np.array([[1, 2, 3, 4]], np.int8)
    assert run("qnn.mean", x, 0.5, 0, 0.5, 0, axis=(1,), semantics="tflite_legacy").item() == 2
    assert run("qnn.mean", x, 0.5, 0, 0.5, 0, axis=(1,)).item() == 3
    # The float path's extra +0.5 before rounding (zero points differ, so legacy takes it): mean
    # 2.125 -> round(2.625) = 3, plus 1; the current kernel: RDPOT(SRDHM(17, 2**30), 2) = 2, plus 1.
    x = np.array([[2, 2, 2, 2, 2, 2, 2, 3]], np.int8)
    assert run("qnn.mean", x, 0.5, 0, 0.5, 1, axis=(1,), semantics="tflite_legacy").item() == 4
    assert run("qnn.mean", x, 0.5, 0, 0.5, 1, axis=(1,)).item() == 3
    # The current kernel rounds twice (SRDHM, then RoundingDivideByPOT): 9 / 4 = 2.25 -> 4.5 -> 5,
    # then 5 / 2 -> 3.
    assert run("qnn.mean", np.array([2, 2, 2, 3], np.int8), 0.5, 0, 0.5, 0).item() == 3


# ---- ONNX Runtime ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,axis", [((2, 3, 4, 5), (2, 3)), ((2, 4, 5, 3), (1, 2)), ((1, 2, 3, 2, 2), (2, 3, 4))]
)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_onnx_spatial_axes_match_qlinear_global_average_pool(shape, axis, dtype):
    rng = np.random.default_rng(sum(shape))
    x = random_data(rng, shape, dtype)
    params = random_params(rng, dtype)
    for keepdims in (True, False):
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims, semantics="onnx")
        expected = reduce_with(lambda v: mlas_global(v, *params, dtype), x, axis, keepdims)
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((2, 3, 4, 5), (1,)),
        ((2, 3, 4, 5), (0, 3)),
        ((2, 3, 9), (2,)),
        ((6, 7), (1,)),
        ((40,), None),
    ],
)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_onnx_elsewhere_is_dequantize_mean_quantize(shape, axis, dtype):
    # DequantizeLinear -> ReduceMean (float32) -> QuantizeLinear: exact wherever the exact mean is
    # not within float32 summation error of a rounding tie.
    rng = np.random.default_rng(sum(shape) + 1)
    x = random_data(rng, shape, dtype)
    s_in, zp_in, s_out, zp_out = params = random_params(rng, dtype)
    axes = tuple(range(x.ndim)) if axis is None else axis
    out = run("qnn.mean", x, *params, axis=axis, semantics="onnx")

    def exact(values):
        deq = [Fraction(float(F32(F32(s_in) * F32(v - zp_in)))) for v in values]
        return sum(deq) / len(deq) / Fraction(float(F32(s_out)))

    for key, values in groups(x, axes, False).items():
        value = exact(values)
        if abs(value - math.floor(value) - Fraction(1, 2)) > Fraction(1, 10**4):
            assert out[key] == clamp(round(value) + zp_out, dtype), (key, value)


def test_mean_within_one_lsb_of_float_math():
    rng = np.random.default_rng(11)
    for dtype, semantics, axis, keepdims in itertools.product(
        ("int8", "uint8"), ("tflite", "tflite_legacy", "onnx"), ((1, 2), (3,)), (True, False)
    ):
        x = random_data(rng, (2, 5, 6, 3), dtype)
        s_in, zp_in, s_out, zp_out = params = random_params(rng, dtype)
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims, semantics=semantics)
        real = ((x.astype(np.float64) - zp_in) * s_in).mean(axis=axis, keepdims=keepdims)
        exact = np.clip(real / s_out + zp_out, *RANGE[dtype])
        # TFLite <= 2.12's uint8 4-D path truncates its zero-point bias: up to 1.5 LSB off.
        legacy_4d = (semantics, dtype, keepdims, axis) == ("tflite_legacy", "uint8", True, (1, 2))
        assert np.abs(out - exact).max() <= (1.5 if legacy_4d else 1.0), (dtype, semantics, axis)


def test_mean_onnx_empty_reduction_gives_zero_point():
    x = np.zeros((2, 0, 3), np.int8)
    out = run("qnn.mean", x, 0.1, 0, 0.1, 5, axis=(1,), semantics="onnx")
    assert out.shape == (2, 3) and (out == 5).all()
    out = run("qnn.mean", x, 0.1, 0, 0.1, 5, axis=(1,))
    assert out.shape == (2, 3) and (out == 0).all()  # TFLite fills T() when the input is empty
