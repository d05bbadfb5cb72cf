"""Quantized elementwise ops: ``qnn.add``, ``qnn.subtract``, ``qnn.mul`` and ``qnn.concatenate``.

"tflite" transcribes TFLite's reference integer kernels (kernels/add.cc, sub.cc, mul.cc,
concatenation.cc and reference/integer_ops/add.h, mul.h, reference/concatenation.h). "onnx"
transcribes what ONNX Runtime's CPU provider runs on x86-64 (MLAS): the AVX2 QLinearAdd kernel,
the SSE2 QLinearMul kernel, and for what has no fused kernel (subtract, int16) the
DequantizeLinear -> float op -> QuantizeLinear path. Broadcasting is numpy's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.errors import PartitaError
from partita.ir.types import TensorType
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier_array,
    saturate,
    wrap_int32,
)

from .qnn import (
    QUANTIZED_DTYPES,
    _broadcast_param,
    _channels,
    channel_param,
    quantized,
    round_half_even_to_int,
    scalar_param,
)
from .registry import Attrs, choice, register_op
from .relations import broadcast_shapes, fail, tuple_of_tensors
from .tensor_transform import ConcatenateAttrs
from .tensor_transform import _concatenate_rel as _tensor_concat_rel

F32, F64 = np.float32, np.float64
BINARY_INPUTS = (
    "lhs",
    "rhs",
    "lhs_scale",
    "lhs_zero_point",
    "rhs_scale",
    "rhs_zero_point",
    "output_scale",
    "output_zero_point",
)


@dataclass(frozen=True)
class QnnBinaryAttrs(Attrs):
    lhs_axis: int = -1
    rhs_axis: int = -1
    out_dtype: str = choice("", "", *QUANTIZED_DTYPES)
    semantics: str = choice("tflite", "tflite", "onnx")


def _binary_rel(types, attrs):
    lhs, rhs = quantized(types[0], "lhs"), quantized(types[1], "rhs")
    if lhs.dtype != rhs.dtype:
        fail(f"lhs and rhs must share one dtype, got {lhs.dtype} and {rhs.dtype}")
    shape = broadcast_shapes(lhs.shape, rhs.shape)
    for t, side, axis in ((lhs, "lhs", attrs.lhs_axis), (rhs, "rhs", attrs.rhs_axis)):
        n = _channels(t, axis)
        whose = f"channel of {side} {t.shape} along {side}_axis={axis}"
        channel_param(types[2 if side == "lhs" else 4], f"{side}_scale", "float32", n, whose)
        channel_param(types[3 if side == "lhs" else 5], f"{side}_zero_point", "int32", n, whose)
    scalar_param(types[6], "output_scale", "float32")
    scalar_param(types[7], "output_zero_point", "int32")
    return TensorType(shape, attrs.out_dtype or lhs.dtype)


class _Params:
    """The eight arguments of a binary qnn op, with the parameters shaped to broadcast against
    their inputs (int64 zero points, float32 scales)."""

    def __init__(self, lhs, rhs, ls, lz, rs, rz, os_, oz, attrs):
        self.lhs, self.rhs = lhs.astype(np.int64), rhs.astype(np.int64)
        self.ls = _broadcast_param(ls.astype(F32), lhs.ndim, attrs.lhs_axis)
        self.lz = _broadcast_param(lz.astype(np.int64), lhs.ndim, attrs.lhs_axis)
        self.rs = _broadcast_param(rs.astype(F32), rhs.ndim, attrs.rhs_axis)
        self.rz = _broadcast_param(rz.astype(np.int64), rhs.ndim, attrs.rhs_axis)
        self.os, self.oz = os_.astype(F32).reshape(()), oz.astype(np.int64).reshape(())
        self.in_dtype = lhs.dtype.name
        self.out_dtype = attrs.out_dtype or lhs.dtype.name


# ---- tflite ------------------------------------------------------------------------------------


def smaller_than_one(real, what: str):
    """QuantizeMultiplierSmallerThanOneExp over an array, or fail as TFLite's CHECK would."""
    real = np.asarray(real, F64)
    if np.any(real <= 0) or np.any(real >= 1):
        raise PartitaError(
            f"TFLite needs the {what} multiplier in (0, 1), got "
            f"{real.min() if np.any(real <= 0) else real.max()} (an output "
            f"scale too small for the input scales, or a scale <= 0?)"
        )
    return quantize_multiplier_array(real)


def _tflite_add(p: _Params, sign: int) -> np.ndarray:
    """TFLite's quantized ADD (sign=1) and SUB (sign=-1, input2's multiplier negated)."""
    left = 15 if p.in_dtype == "int16" else 20
    s1, s2, so = p.ls.astype(F64), p.rs.astype(F64), p.os.astype(F64)
    twice_max = 2 * np.maximum(s1, s2)
    q1, e1 = smaller_than_one(s1 / twice_max, "input1")
    q2, e2 = smaller_than_one(s2 / twice_max, "input2")
    qo, eo = smaller_than_one(twice_max / ((1 << left) * so), "output")
    a = multiply_by_quantized_multiplier_smaller_than_one_exp((p.lhs - p.lz) << left, q1, e1)
    b = multiply_by_quantized_multiplier_smaller_than_one_exp((p.rhs - p.rz) << left, sign * q2, e2)
    raw = wrap_int32(a + b)
    return multiply_by_quantized_multiplier_smaller_than_one_exp(raw, qo, eo) + p.oz


def _tflite_mul(p: _Params) -> np.ndarray:
    """TFLite's quantized MUL: one multiplier, s1 * s2 / s_out computed in float32 (mul.cc's
    expression has float operands; checked against TFLite's reference kernels, LiteRT 2.3)."""
    q, shift = quantize_multiplier_array((p.ls * p.rs) / p.os)
    prod = wrap_int32((p.lhs - p.lz) * (p.rhs - p.rz))
    return multiply_by_quantized_multiplier(prod, q, shift) + p.oz


# ---- onnx --------------------------------------------------------------------------------------


def fma32(x, y, z) -> np.ndarray:
    """float32 fused multiply-add x * y + z with one rounding (as _mm256_fmadd_ps)."""
    prod = np.asarray(x, F64) * np.asarray(y, F64)  # exact: 24 + 24 significant bits
    zz = np.asarray(z, F64)
    s = prod + zz
    bb = s - prod
    err = (prod - (s - bb)) + (zz - bb)  # TwoSum: s + err is the exact sum
    r = s.astype(F32)
    # Rounding s to float32 is the one rounding, except when s sits exactly on a float32 tie
    # and the exact sum is off it: then the exact sum's side decides.
    other = np.nextafter(r, np.where(s > r, F32(np.inf), F32(-np.inf)).astype(F32))
    tie = (s != r) & (err != 0) & (s == (r.astype(F64) + other.astype(F64)) / 2)
    fixed = np.where(err > 0, np.maximum(r, other), np.minimum(r, other))
    return np.where(tie, fixed, r).astype(F32)


def ort_scalar_side(lhs_shape, rhs_shape) -> str | None:
    """Which input ORT's broadcast loop hands to MLAS as a scalar per span: the one that is
    broadcast along the innermost output dimension larger than 1 ("lhs" first; a one-element
    output counts as "lhs"), or None when both vary there."""
    out = broadcast_shapes(tuple(lhs_shape), tuple(rhs_shape))
    a = (1,) * (len(out) - len(lhs_shape)) + tuple(lhs_shape)
    b = (1,) * (len(out) - len(rhs_shape)) + tuple(rhs_shape)
    for i in reversed(range(len(out))):
        if out[i] > 1:
            return "lhs" if a[i] == 1 else "rhs" if b[i] == 1 else None
    return "lhs"


def _dequantized(x, zp, scale) -> np.ndarray:
    """DequantizeLinear: float32(x - zp) * scale, one float32 rounding."""
    return (x - zp).astype(F32) * scale


def _quantize_linear(v, p: _Params) -> np.ndarray:
    """QuantizeLinear of float32 ``v`` with the output parameters: v / scale in float32, round
    half to even, + zero point (saturated by the caller)."""
    return round_half_even_to_int(np.asarray(v, F32) / p.os) + p.oz


def _onnx_add(p: _Params) -> np.ndarray:
    """MLAS QLinearAdd, AVX2 kernel (int8/uint8). ORT passes the per-span scalar input as B; the
    kernel's float expressions are contracted to FMAs (checked against onnxruntime 1.31)."""
    a, sa, za, b, sb, zb = p.lhs, p.ls, p.lz, p.rhs, p.rs, p.rz
    if ort_scalar_side(p.lhs.shape, p.rhs.shape) == "lhs":
        a, sa, za, b, sb, zb = b, sb, zb, a, sa, za
    ra, rb = sa / p.os, sb / p.os
    fixed = p.oz.astype(F32) - fma32(ra, za.astype(F32), rb * zb.astype(F32))
    return round_half_even_to_int(fma32(a.astype(F32), ra, fma32(b.astype(F32), rb, fixed)))


def _onnx_float_path(p: _Params, op) -> np.ndarray:
    """DequantizeLinear both inputs, ``op`` in float32, QuantizeLinear."""
    return _quantize_linear(op(_dequantized(p.lhs, p.lz, p.ls), _dequantized(p.rhs, p.rz, p.rs)), p)


def _onnx_mul(p: _Params) -> np.ndarray:
    """MLAS QLinearMul, SSE2 kernel (int8/uint8): the integer product times one float32 scale."""
    scale = (p.ls * p.rs) / p.os
    prod = ((p.lhs - p.lz) * (p.rhs - p.rz)).astype(F32)
    return round_half_even_to_int(prod * scale + p.oz.astype(F32))


# ---- registration ------------------------------------------------------------------------------


def _binary(p: _Params, attrs, tflite, onnx) -> np.ndarray:
    out = tflite(p) if attrs.semantics == "tflite" else onnx(p)
    return saturate(out, p.out_dtype)


@register_op(
    "qnn.add",
    inputs=BINARY_INPUTS,
    attrs=QnnBinaryAttrs,
    type_rel=_binary_rel,
    commutative=True,
    kind="broadcast",
)
def qnn_add(
    lhs,
    rhs,
    lhs_scale,
    lhs_zero_point,
    rhs_scale,
    rhs_zero_point,
    output_scale,
    output_zero_point,
    attrs,
):
    """Quantized add, numpy broadcasting; out_dtype "" = the inputs' dtype; scales and zero
    points of lhs/rhs may be per channel along lhs_axis/rhs_axis, the output's are scalars.

    "tflite" (TFLite ADD): left_shift = 20 (15 for int16); t = 2 * max(s1, s2);
    (m1, e1), (m2, e2), (mo, eo) = QuantizeMultiplierSmallerThanOneExp of s1 / t, s2 / t and
    t / (2**left_shift * s_out) in double; x_i' = MultiplyByQuantizedMultiplierSmallerThanOneExp(
    (x_i - zp_i) * 2**left_shift, m_i, e_i); out = MultiplyByQuantizedMultiplierSmallerThanOneExp(
    x1' + x2', mo, eo) + zp_out, clamped.
    "onnx" int8/uint8 (ORT QLinearAdd, MLAS AVX2 kernel), in float32 with fused multiply-adds:
    r_a = s_a / s_out, r_b = s_b / s_out, f = zp_out - fma(r_a, zp_a, r_b * zp_b),
    out = round_half_even(fma(a, r_a, fma(b, r_b, f))) saturated, where B is the input ORT hands
    over as a scalar per span (the one broadcast along the innermost output dimension larger
    than 1; lhs if the output has one element), else rhs. int16 (no
    QLinearAdd): QuantizeLinear(DequantizeLinear(lhs) + DequantizeLinear(rhs)) in float32.
    """
    p = _Params(
        lhs,
        rhs,
        lhs_scale,
        lhs_zero_point,
        rhs_scale,
        rhs_zero_point,
        output_scale,
        output_zero_point,
        attrs,
    )
    onnx = _onnx_add if p.in_dtype != "int16" else (lambda q: _onnx_float_path(q, np.add))
    return _binary(p, attrs, lambda q: _tflite_add(q, 1), onnx)


@register_op(
    "qnn.subtract",
    inputs=BINARY_INPUTS,
    attrs=QnnBinaryAttrs,
    type_rel=_binary_rel,
    kind="broadcast",
)
def qnn_subtract(
    lhs,
    rhs,
    lhs_scale,
    lhs_zero_point,
    rhs_scale,
    rhs_zero_point,
    output_scale,
    output_zero_point,
    attrs,
):
    """Quantized lhs - rhs, numpy broadcasting, parameters as qnn.add.

    "tflite" (TFLite SUB): qnn.add's "tflite" arithmetic with rhs's multiplier m2 negated (SUB
    runs the ADD kernel with input2_multiplier * -1; rounding is not symmetric, so this is not
    the negated sum). "onnx" (ORT has no QLinearSub): QuantizeLinear(DequantizeLinear(lhs) -
    DequantizeLinear(rhs)) in float32: dq = float32(x - zp) * s, v = dq_l - dq_r,
    round_half_even(v / s_out) + zp_out, saturated.
    """
    p = _Params(
        lhs,
        rhs,
        lhs_scale,
        lhs_zero_point,
        rhs_scale,
        rhs_zero_point,
        output_scale,
        output_zero_point,
        attrs,
    )
    return _binary(
        p, attrs, lambda q: _tflite_add(q, -1), lambda q: _onnx_float_path(q, np.subtract)
    )


@register_op(
    "qnn.mul",
    inputs=BINARY_INPUTS,
    attrs=QnnBinaryAttrs,
    type_rel=_binary_rel,
    commutative=True,
    kind="broadcast",
)
def qnn_mul(
    lhs,
    rhs,
    lhs_scale,
    lhs_zero_point,
    rhs_scale,
    rhs_zero_point,
    output_scale,
    output_zero_point,
    attrs,
):
    """Quantized multiply, numpy broadcasting, parameters as qnn.add.

    "tflite" (TFLite MUL): (m, e) = QuantizeMultiplier(s1 * s2 / s_out), the product and the
    quotient each rounded to float32 as TFLite computes them;
    out = MultiplyByQuantizedMultiplier((x1 - zp1) * (x2 - zp2), m, e) + zp_out, clamped.
    "onnx" int8/uint8 (ORT QLinearMul, MLAS SSE2): scale = s1 * s2 / s_out in float32,
    out = round_half_even(float32((x1 - zp1) * (x2 - zp2)) * scale + zp_out) in float32,
    saturated. int16: QuantizeLinear(DequantizeLinear(lhs) * DequantizeLinear(rhs)).
    """
    p = _Params(
        lhs,
        rhs,
        lhs_scale,
        lhs_zero_point,
        rhs_scale,
        rhs_zero_point,
        output_scale,
        output_zero_point,
        attrs,
    )
    onnx = _onnx_mul if p.in_dtype != "int16" else (lambda q: _onnx_float_path(q, np.multiply))
    return _binary(p, attrs, _tflite_mul, onnx)


# ---- concatenate -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QnnConcatenateAttrs(ConcatenateAttrs):
    semantics: str = choice("tflite", "tflite", "onnx")


def _qnn_concatenate_rel(types, attrs):
    fields = tuple_of_tensors(types[0], "data")
    for i, f in enumerate(fields):
        quantized(f, f"data field {i}")
    n = len(fields)
    for what, dtype, t in (
        ("input_scales", "float32", types[1]),
        ("input_zero_points", "int32", types[2]),
    ):
        params = tuple_of_tensors(t, what)
        if len(params) != n:
            fail(f"{what} has {len(params)} entries but data has {n} tensors")
        for i, p in enumerate(params):
            scalar_param(p, f"{what} field {i}", dtype)
    scalar_param(types[3], "output_scale", "float32")
    scalar_param(types[4], "output_zero_point", "int32")
    return _tensor_concat_rel([types[0]], attrs)


def _rescale(x: np.ndarray, s: F32, zp: int, so: F32, zo: int, semantics: str) -> np.ndarray:
    """One input brought to the output's parameters (int64 result, not yet saturated)."""
    x = x.astype(np.int64)
    if zp == zo and s == so:
        return x
    if semantics == "tflite":
        scale = s * (F32(1) / so)
        bias = F32(-zp) * scale
        v = (x.astype(F32) * scale + bias).astype(F64)  # exact, so floor(|v| + 0.5) is too
        return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64) + zo
    dq = (x - zp).astype(F32) * s
    return round_half_even_to_int(dq / so) + zo


@register_op(
    "qnn.concatenate",
    inputs=("data", "input_scales", "input_zero_points", "output_scale", "output_zero_point"),
    attrs=QnnConcatenateAttrs,
    type_rel=_qnn_concatenate_rel,
    kind="injective",
)
def qnn_concatenate(data, input_scales, input_zero_points, output_scale, output_zero_point, attrs):
    """Join the tuple ``data`` along ``axis``; an input whose scale and zero point equal the
    output's is copied, any other is rescaled, saturated to the common dtype.

    "tflite" (ConcatenationWithScaling, TFLite's uint8 kernel; its int8 kernel requires equal
    parameters and its int16 kernel copies): in float32, scale = s_in * (1 / s_out),
    bias = -zp_in * scale, out = round_half_away(x * scale + bias) + zp_out.
    "onnx" (ORT QLinearConcat's lookup table, and DequantizeLinear -> Concat -> QuantizeLinear):
    round_half_even(float32(x - zp_in) * s_in / s_out) + zp_out, each step in float32.
    """
    so, zo = F32(output_scale.reshape(-1)[0]), int(output_zero_point.reshape(-1)[0])
    dtype = data[0].dtype.name
    parts = [
        saturate(
            _rescale(x, F32(s.reshape(-1)[0]), int(z.reshape(-1)[0]), so, zo, attrs.semantics),
            dtype,
        )
        for x, s, z in zip(data, input_scales, input_zero_points)
    ]
    return np.concatenate(parts, axis=attrs.axis)
