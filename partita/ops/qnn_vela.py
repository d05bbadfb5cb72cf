"""More of TFLite's quantized operators, bit for bit with its reference kernels (BUILTIN_REF):
qnn.exp, qnn.log and qnn.elu (LUTPopulate tables, as EXP, LOG and ELU build them; ELU's is the
builtin kernel's, BUILTIN_REF has none) and qnn.prelu (PRELU's two fixed-point multipliers). All
are ops Arm's Vela runs on the Ethos-U NPU (EXP, LOG and ELU as tables, PRELU as elementwise
passes)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from partita.errors import InterpreterError
from partita.ir.types import TensorType
from partita.ops.emulation import activation_kernels as k
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)

from .qnn import quantized, scalar_param
from .qnn_lut import INPUTS, qparams
from .registry import Attrs, NoAttrs, choice, register_op
from .relations import broadcast_shapes, fail

F32 = np.float32
TFLITE = ("tflite", "tflite", "tflite_builtin")


@dataclass(frozen=True)
class TfliteAttrs(Attrs):
    semantics: str = choice(*TFLITE)


def _unary_rel(types, attrs) -> TensorType:
    data = quantized(types[0], "data", ("int8",))
    for i, what in enumerate(
        ("input_scale", "input_zero_point", "output_scale", "output_zero_point")
    ):
        scalar_param(types[1 + i], what, "int32" if "zero" in what else "float32")
    return data


def _f32(fn):
    """A float32 libm function as the correctly rounded value of ``fn`` in double."""

    def apply(x):
        with np.errstate(all="ignore"):
            return fn(np.asarray(x, F32).astype(np.float64)).astype(F32)

    return apply


@lru_cache(maxsize=256)
def _table(kind: str, q) -> np.ndarray:
    if kind == "exp":
        transform = _f32(np.exp)
    elif kind == "elu":  # EluPrepare's lambda: x < 0 gives expf(x) - 1 (float32), else x
        exp = _f32(np.exp)

        def transform(x):
            x = np.asarray(x, F32)
            return np.where(x < 0, exp(x) - F32(1), x).astype(F32)

    else:  # LogLUTPrepare: x <= 0 maps to the output's smallest value
        lo, _ = k.dtype_range(q.dtype)
        output_min = F32(lo - q.out_zp) * F32(q.out_scale)
        log = _f32(np.log)

        def transform(x):
            return np.where(x <= 0, output_min, log(np.where(x <= 0, F32(1), x)))

    with np.errstate(all="ignore"):
        table = k.tflite_lut(q.dtype, q.in_scale, q.in_zp, q.out_scale, q.out_zp, transform)
    table.flags.writeable = False
    return table


@register_op("qnn.exp", inputs=INPUTS, attrs=TfliteAttrs, type_rel=_unary_rel, kind="elemwise")
def exp(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized e**x, int8 -> int8: TFLite's EXP table (LUTPopulate: all float32, expf, round
    half away from zero, clamped)."""
    q = qparams("qnn.exp", data, input_scale, input_zero_point, output_scale, output_zero_point)
    return k.lookup(_table("exp", q), data)


@register_op("qnn.log", inputs=INPUTS, attrs=TfliteAttrs, type_rel=_unary_rel, kind="elemwise")
def log(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized natural log, int8 -> int8: TFLite's LOG table (LUTPopulate of logf; a value
    <= 0 maps to the output's smallest representable value, not an error)."""
    q = qparams("qnn.log", data, input_scale, input_zero_point, output_scale, output_zero_point)
    return k.lookup(_table("log", q), data)


@register_op("qnn.elu", inputs=INPUTS, attrs=TfliteAttrs, type_rel=_unary_rel, kind="elemwise")
def elu(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized ELU (alpha 1), int8 -> int8: TFLite's ELU table (LUTPopulate of x < 0 ?
    expf(x) - 1 : x, all float32). BUILTIN_REF has no ELU kernel; this is the builtin one."""
    q = qparams("qnn.elu", data, input_scale, input_zero_point, output_scale, output_zero_point)
    return k.lookup(_table("elu", q), data)


# ---- prelu -------------------------------------------------------------------------------------

PRELU_INPUTS = (
    "data",
    "alpha",
    "input_scale",
    "input_zero_point",
    "alpha_scale",
    "alpha_zero_point",
    "output_scale",
    "output_zero_point",
)


def _prelu_rel(types, attrs) -> TensorType:
    data = quantized(types[0], "data", ("int8", "uint8"))
    alpha = quantized(types[1], "alpha", ("int8", "uint8"))
    if alpha.dtype != data.dtype:
        fail(f"alpha must be {data.dtype} like data, got {alpha.dtype}")
    for i, what in enumerate(PRELU_INPUTS[2:]):
        scalar_param(types[2 + i], what, "int32" if "zero" in what else "float32")
    shape = broadcast_shapes(data.shape, alpha.shape)
    if tuple(shape) != tuple(data.shape):
        fail(f"alpha {alpha.shape} must broadcast to data {data.shape}")
    return data


def _scalar(x, what: str, integer: bool):
    v = np.asarray(x).reshape(())
    if integer:
        return int(v)
    s = float(v)
    if not (math.isfinite(s) and s > 0):
        raise InterpreterError(f"qnn.prelu: {what} must be positive and finite, got {s}")
    return s


@register_op(
    "qnn.prelu", inputs=PRELU_INPUTS, attrs=TfliteAttrs, type_rel=_prelu_rel, kind="broadcast"
)
def prelu(data, alpha, in_scale, in_zp, alpha_scale, alpha_zp, out_scale, out_zp, attrs):
    """Quantized PReLU (TFLite's PRELU, reference_ops::BroadcastPrelu4DSlow): v = q - zp_in;
    v >= 0 gives MultiplyByQuantizedMultiplier(v, s_in / s_out); else
    MultiplyByQuantizedMultiplier(v * (a - zp_alpha), s_in * s_alpha / s_out) (the real
    multipliers in float32); plus zp_out, clamped to the type."""
    s_in, s_a, s_out = (
        _scalar(in_scale, "input_scale", False),
        _scalar(alpha_scale, "alpha_scale", False),
        _scalar(out_scale, "output_scale", False),
    )
    m1, sh1 = quantize_multiplier(float(F32(s_in) / F32(s_out)))
    m2, sh2 = quantize_multiplier(float(F32(s_in) * F32(s_a) / F32(s_out)))
    v = data.astype(np.int64) - _scalar(in_zp, "", True)
    a = np.broadcast_to(alpha.astype(np.int64) - _scalar(alpha_zp, "", True), v.shape)
    pos = multiply_by_quantized_multiplier(v, m1, sh1)
    neg = multiply_by_quantized_multiplier(v * a, m2, sh2)
    out = np.where(v >= 0, pos, neg).astype(np.int64) + _scalar(out_zp, "", True)
    lo, hi = k.dtype_range(data.dtype.name)
    return np.clip(out, lo, hi).astype(data.dtype)


# ---- TFLite's int8 bilinear resize as one op (what the NPU runs) ----------------------------


def _taps_rel(types, attrs) -> TensorType:
    data = quantized(types[0], "data", ("int8",))
    wy, wx = types[1], types[2]
    if data.ndim != 4 or wy.ndim != 2 or wx.ndim != 2:
        fail(f"resize_bilinear_taps: data {data.shape} (NHWC) and 2-D weights")
    if wy.shape[1] != data.shape[1] or wx.shape[1] != data.shape[2]:
        fail(f"weights {wy.shape}, {wx.shape} do not match data {data.shape}")
    n, _, _, c = data.shape
    return TensorType((n, wy.shape[0], wx.shape[0], c), data.dtype)


@register_op(
    "resize_bilinear_taps",
    inputs=("data", "weight_y", "weight_x"),
    attrs=NoAttrs,
    type_rel=_taps_rel,
    kind="opaque",
)
def resize_bilinear_taps(data, weight_y, weight_x, attrs):
    """TFLite's ResizeBilinearInteger (int8) given its separable 10-bit fixed-point weights
    (weight_y (OH, H), weight_x (OW, W): the frontend's integer matrices): s = the exact sum
    of v * wy * wx over the taps, then (s + sign(s) * 2**19) / 2**20 truncated toward zero.
    The frontend imports RESIZE_BILINEAR as the same arithmetic in plain ops; the NPU runs it
    as this one operation."""
    v = data.astype(np.int64)
    v = np.einsum("nhwc,oh->nowc", v, weight_y.astype(np.int64))
    v = np.einsum("nowc,pw->nopc", v, weight_x.astype(np.int64))
    v = v + np.sign(v) * (1 << 19)
    q = np.sign(v) * (np.abs(v) // (1 << 20))
    return q.astype(data.dtype)
