"""Quantized ops of int8 transformer encoders as TFLite runs them: qnn.gelu (GELU's 256-entry
table), qnn.rsqrt (RSQRT's fixed-point inverse square root) and qnn.squared_difference
(SQUARED_DIFFERENCE; TFLite lowers LayerNormalization to MEAN, SQUARED_DIFFERENCE, RSQRT, MUL,
ADD and SUB). Each reproduces TFLite's reference kernels bit for bit ("tflite"; its builtin
kernels share the arithmetic, "tflite_builtin")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from partita.errors import InterpreterError
from partita.ir.types import TensorType
from partita.ops.emulation import activation_kernels as k
from partita.ops.emulation.gemmlowp import rescale, saturating_rounding_multiply_by_pot
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier,
    saturate,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)

from .qnn import quantized, scalar_param
from .qnn_elemwise import smaller_than_one
from .qnn_lut import INPUTS, qparams
from .registry import Attrs, choice, register_op
from .relations import broadcast_shapes, fail

F32 = np.float32
TFLITE = ("tflite", "tflite", "tflite_builtin")


@dataclass(frozen=True)
class GeluAttrs(Attrs):
    approximate: bool = False
    semantics: str = choice(*TFLITE)


@dataclass(frozen=True)
class TfliteAttrs(Attrs):
    semantics: str = choice(*TFLITE)


def _unary_rel(dtypes):
    def rel(types, attrs) -> TensorType:
        data = quantized(types[0], "data", dtypes)
        for i, what in enumerate(
            ("input_scale", "input_zero_point", "output_scale", "output_zero_point")
        ):
            scalar_param(types[1 + i], what, "int32" if "zero" in what else "float32")
        return data

    return rel


def _gelu_f32(approximate: bool):
    """reference_ops::GeluTransform(Approximate) in float32 (erfcf / tanhf as correctly rounded
    libm results)."""
    half, c = F32(0.5), F32(0.044715)
    sqrt_2_over_pi = F32((2.0 / math.sqrt(math.pi)) * math.sqrt(0.5))

    def exact(x):
        # 0.5f * x * erfc(x * -M_SQRT1_2): erfc keeps the negative tail accurate
        return (half * x) * k.libm_f32(math.erfc, x * F32(-math.sqrt(0.5)))

    def approx(x):
        inner = sqrt_2_over_pi * (x + ((c * x) * x) * x)
        return (half * x) * (F32(1) + k.libm_f32(math.tanh, inner))

    return approx if approximate else exact


@lru_cache(maxsize=256)
def _gelu_table(q, approximate: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        table = k.tflite_lut(
            q.dtype, q.in_scale, q.in_zp, q.out_scale, q.out_zp, _gelu_f32(approximate)
        )
    table.flags.writeable = False
    return table


@register_op(
    "qnn.gelu",
    inputs=INPUTS,
    attrs=GeluAttrs,
    type_rel=_unary_rel(("int8", "uint8")),
    kind="elemwise",
)
def gelu(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized GELU, int8/uint8 -> same, through TFLite's LUTPopulate table (all float32,
    round half away from zero): f(x) = 0.5f * x * erfcf(x * -sqrt(1/2)), or with
    ``approximate`` 0.5f * x * (1 + tanhf(sqrt(2/pi) * (x + 0.044715f * x^3)))."""
    q = qparams("qnn.gelu", data, input_scale, input_zero_point, output_scale, output_zero_point)
    return k.lookup(_gelu_table(q, attrs.approximate), data)


# ---- rsqrt -------------------------------------------------------------------------------------


def inv_sqrt_multiplier_exp(value: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(value, kReverseShift = -1): 1/sqrt(value) as
    (multiplier, left shift), by 5 Newton-Raphson steps in gemmlowp fixed point (F3)."""
    if value <= 1:
        return 2**31 - 1, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = ((32 - value.bit_length()) - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    x_in = value >> 1
    half_in = int(saturating_rounding_multiply_by_pot(x_in, -1))
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # F3 one
    for _ in range(5):
        x3 = int(rescale(_mul(_mul(x, x), x), 9, 3))
        x = int(rescale(wrap_int32(_mul(half_three, x) - _mul(half_in, x3)), 6, 3))
    x = _mul(x, 1518500250)  # * sqrt(2) / 2 in F0
    if shift < 0:
        x, shift = int(wrap_int32(x << -shift)), 0
    return x, -shift


def _mul(a: int, b: int) -> int:
    return int(saturating_rounding_doubling_high_mul(a, b))


@lru_cache(maxsize=256)
def _rsqrt_table(q) -> np.ndarray:
    denominator = float(F32(np.sqrt(F32(q.in_scale))) * F32(q.out_scale))
    if not (denominator > 0 and math.isfinite(1.0 / denominator)):
        raise InterpreterError(
            f"qnn.rsqrt: the rescale 1 / (sqrt(input scale {q.in_scale}) * output scale "
            f"{q.out_scale}) is not a finite number in float32, so no multiplier represents it"
        )
    scale = 1.0 / denominator
    mult, shift = quantize_multiplier(scale)
    lo, hi = k.dtype_range(q.dtype)
    table = np.full(hi - lo + 1, hi, np.int64)
    for v in range(lo, hi + 1):
        value = v - q.in_zp
        if value <= 0:
            continue  # 0 -> the maximum; negative values are an error TFLite reports
        m, s = inv_sqrt_multiplier_exp(value)
        data = multiply_by_quantized_multiplier(1, m, s + 20)
        out = multiply_by_quantized_multiplier(data, mult, shift - 20) + q.out_zp
        table[v - lo] = min(max(int(out), lo), hi)
    table.flags.writeable = False
    return table


@register_op(
    "qnn.rsqrt", inputs=INPUTS, attrs=TfliteAttrs, type_rel=_unary_rel(("int8",)), kind="elemwise"
)
def rsqrt(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized 1/sqrt(x), int8 -> int8 (TFLite's RSQRT): v = q - zp_in; v = 0 gives 127;
    else 1/sqrt(v) from GetInvSqrtQuantizedMultiplierExp, applied to 1 << 20, then scaled by
    QuantizeMultiplier(1 / (sqrtf(s_in) * s_out)) >> 20 and offset by zp_out, clamped. Values
    below the input zero point are an error, as in TFLite."""
    q = qparams("qnn.rsqrt", data, input_scale, input_zero_point, output_scale, output_zero_point)
    if data.size and int(data.min()) < q.in_zp:
        raise InterpreterError(
            f"qnn.rsqrt: input {int(data.min())} is below the zero point "
            f"{q.in_zp} (rsqrt of a negative value)"
        )
    return k.lookup(_rsqrt_table(q), data)


# ---- squared difference ------------------------------------------------------------------------


def _squared_difference_rel(types, attrs) -> TensorType:
    lhs, rhs = quantized(types[0], "lhs", ("int8",)), quantized(types[1], "rhs", ("int8",))
    names = (
        "lhs_scale",
        "lhs_zero_point",
        "rhs_scale",
        "rhs_zero_point",
        "output_scale",
        "output_zero_point",
    )
    for i, what in enumerate(names):
        scalar_param(types[2 + i], what, "int32" if "zero" in what else "float32")
    if lhs.dtype != rhs.dtype:
        fail(f"lhs and rhs must share one dtype, got {lhs.dtype} and {rhs.dtype}")
    return TensorType(broadcast_shapes(lhs.shape, rhs.shape), lhs.dtype)


@register_op(
    "qnn.squared_difference",
    inputs=(
        "lhs",
        "rhs",
        "lhs_scale",
        "lhs_zero_point",
        "rhs_scale",
        "rhs_zero_point",
        "output_scale",
        "output_zero_point",
    ),
    attrs=TfliteAttrs,
    type_rel=_squared_difference_rel,
    kind="broadcast",
)
def squared_difference(lhs, rhs, ls, lz, rs, rz, os_, oz, attrs):
    """Quantized (lhs - rhs)^2, int8 (TFLite's SQUARED_DIFFERENCE): both inputs shifted left by
    7 and rescaled by s / (2 max(s1, s2)), the difference squared in int32, scaled by
    (2 max(s1, s2))^2 / (2^14 s_out) (all multipliers from doubles), offset and clamped."""
    s1, s2, so = (float(F32(x.reshape(()))) for x in (ls, rs, os_))
    twice_max = 2.0 * max(s1, s2)
    q1, e1 = smaller_than_one(s1 / twice_max, "input1")
    q2, e2 = smaller_than_one(s2 / twice_max, "input2")
    qo, eo = quantize_multiplier(twice_max * twice_max / float(F32(F32(1 << 14) * F32(so))))
    a = multiply_by_quantized_multiplier_smaller_than_one_exp(
        (lhs.astype(np.int64) - int(lz.reshape(()))) << 7, q1, e1
    )
    b = multiply_by_quantized_multiplier_smaller_than_one_exp(
        (rhs.astype(np.int64) - int(rz.reshape(()))) << 7, q2, e2
    )
    diff = wrap_int32(a - b)
    out = multiply_by_quantized_multiplier(wrap_int32(diff * diff), qo, eo)
    return saturate(out + int(oz.reshape(())), lhs.dtype.name)
