"""Quantized activations: qnn.sigmoid, qnn.tanh, qnn.hardswish, qnn.leaky_relu, qnn.softmax.

Each takes (data, input_scale, input_zero_point, output_scale, output_zero_point) with float32 /
int32 scalar parameters and returns data's type. ``semantics`` picks the runtime whose integer
results are reproduced bit for bit: "tflite" is TFLite's reference kernels (the BUILTIN_REF op
resolver, KernelType kReference), "tflite_builtin" the default BuiltinOpResolver's kernels where
they differ and we reproduce them, "onnx" ONNX Runtime's CPU kernels. The arithmetic itself lives
in qnn_lut_kernels.py and gemmlowp.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from partita.errors import InterpreterError
from partita.ir.types import TensorType
from partita.ops.emulation import activation_kernels as k
from partita.ops.emulation import tflite_int16

from .registry import Attrs, choice, register_op
from .relations import fail, normalize_axis, tensor

QPARAMS = ("input_scale", "input_zero_point", "output_scale", "output_zero_point")
INPUTS = ("data",) + QPARAMS
_EIGHT_BIT = ("int8", "uint8")


def _semantics(*options):
    return choice("tflite", "tflite", *options)


@dataclass(frozen=True)
class LutAttrs(Attrs):
    semantics: str = _semantics("tflite_builtin", "onnx")


@dataclass(frozen=True)
class HardSwishAttrs(Attrs):
    semantics: str = _semantics("onnx")


@dataclass(frozen=True)
class LeakyReluAttrs(Attrs):
    alpha: float
    semantics: str = _semantics("tflite_builtin", "onnx")

    def validate(self):
        if not math.isfinite(self.alpha):
            raise ValueError(f"alpha must be finite, got {self.alpha}")


@dataclass(frozen=True)
class SoftmaxAttrs(Attrs):
    axis: int = -1
    beta: float = 1.0
    semantics: str = _semantics("tflite_builtin", "onnx")

    def validate(self):
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta must be positive and finite, got {self.beta}")
        if self.semantics == "onnx" and self.beta != 1.0:
            raise ValueError("semantics 'onnx' (QLinearSoftmax) has no beta; beta must be 1.0")


def _scalar_param(t, what: str, dtype: str) -> None:
    t = tensor(t, what)
    if t.dtype != dtype:
        fail(f"{what} must be {dtype}, got {t.dtype}")
    if t.ndim != 0 and t.shape != (1,):
        fail(f"{what} must be a scalar, got shape {t.shape}")


def _activation_rel(dtypes_for):
    """Type relation: data of an allowed dtype, four scalar quantization parameters; the result
    has data's type. ``dtypes_for(attrs)`` gives the allowed data dtypes."""

    def rel(types, attrs) -> TensorType:
        data = tensor(types[0], "data")
        allowed = dtypes_for(attrs)
        if data.dtype not in allowed:
            fail(
                f"data must be {' or '.join(allowed)} with semantics {attrs.semantics!r}, got "
                f"{data.dtype}"
            )
        for t, what in zip(types[1:], QPARAMS):
            _scalar_param(t, what, "float32" if what.endswith("scale") else "int32")
        return TensorType(data.shape, data.dtype)

    return rel


def _softmax_rel(types, attrs) -> TensorType:
    out = _activation_rel(
        lambda a: _EIGHT_BIT + ("int16",) if a.semantics != "onnx" else _EIGHT_BIT
    )(types, attrs)
    if out.ndim == 0:
        fail("data must have at least one dimension")
    normalize_axis(attrs.axis, out.ndim)
    return out


@dataclass(frozen=True)
class QParams:
    """Validated quantization parameters: Python floats (exact float32 values) and ints."""

    dtype: str
    in_scale: float
    in_zp: int
    out_scale: float
    out_zp: int


def qparams(op: str, data, in_scale, in_zp, out_scale, out_zp) -> QParams:
    q = QParams(
        data.dtype.name,
        float(np.asarray(in_scale).reshape(())),
        int(np.asarray(in_zp).reshape(())),
        float(np.asarray(out_scale).reshape(())),
        int(np.asarray(out_zp).reshape(())),
    )
    for what, s in (("input_scale", q.in_scale), ("output_scale", q.out_scale)):
        if not (math.isfinite(s) and s > 0):
            raise InterpreterError(f"{op}: {what} must be positive and finite, got {s}")
    lo, hi = k.dtype_range(q.dtype)
    for what, zp in (("input_zero_point", q.in_zp), ("output_zero_point", q.out_zp)):
        if not lo <= zp <= hi:
            raise InterpreterError(f"{op}: {what} {zp} is outside the {q.dtype} range")
    return q


_TRANSFORMS = {
    ("sigmoid", "tflite"): (k.tflite_lut, k.tflite_sigmoid_f32),
    ("sigmoid", "onnx"): (k.ort_lut, k.mlas_logistic_f32),
    ("tanh", "tflite"): (k.tflite_lut, k.tflite_tanh_f32),
    ("tanh", "onnx"): (k.ort_lut, k.mlas_tanh_f32),
    ("hardswish", "onnx"): (k.ort_lut, k.onnx_hardswish_f32),
}


@lru_cache(maxsize=512)
def _table(fn: str, semantics: str, q: QParams) -> np.ndarray:
    """The lookup table (one entry per value of q.dtype) for a float-defined activation."""
    semantics = "tflite" if semantics == "tflite_builtin" else semantics
    build, transform = _TRANSFORMS[fn, semantics]
    with np.errstate(all="ignore"):
        table = build(q.dtype, q.in_scale, q.in_zp, q.out_scale, q.out_zp, transform)
    table.flags.writeable = False
    return table


def _with_int16(attrs):
    return _EIGHT_BIT + ("int16",) if attrs.semantics != "onnx" else _EIGHT_BIT


def _int16_sigmoid_or_tanh(op: str, q, data) -> np.ndarray:
    """TFLite's 16x8 LOGISTIC / TANH (both kernel sets): zero points 0, output scale 2**-15;
    the interpolated sigmoid table of emulation/tflite_int16.py."""
    if q.in_zp or q.out_zp or abs(math.log2(q.out_scale) + 15) >= 1e-3:
        raise InterpreterError(
            f"{op}: TFLite's int16 kernel needs zero points 0 and output scale 1/32768; got "
            f"{q.in_zp}, {q.out_zp} and {q.out_scale}"
        )
    fn = tflite_int16.logistic16 if op == "qnn.sigmoid" else tflite_int16.tanh16
    try:
        return fn(data, q.in_scale)
    except ValueError as e:
        raise InterpreterError(f"{op}: {e}") from None


@register_op(
    "qnn.sigmoid",
    inputs=INPUTS,
    attrs=LutAttrs,
    type_rel=_activation_rel(_with_int16),
    kind="elemwise",
)
def sigmoid(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized logistic 1 / (1 + exp(-x)), int8/uint8 -> same, through a 256-entry table.
    int16 (TFLite's 16x8): the kernel's rescale and its interpolated sigmoid table
    (emulation/tflite_int16.logistic16, the table measured from TFLite's interpreter).

    "tflite" (= "tflite_builtin"; both kernels share LUTPopulate), all float32:
    q -> clamp(int(round(f(s_in * (q - zp_in)) * (1 / s_out)) + zp_out)), round half away from
    zero, f(x) = 1.0f / (1.0f + expf(-x)). TFLite requires s_out = 1/256 (converters use zp_out
    -128 for int8, 0 for uint8); other output parameters get the same formula.
    (kFixedPointOptimized instead evaluates gemmlowp's fixed-point logistic.)
    "onnx" (QLinearSigmoid): q -> MlasQuantizeLinear(MlasComputeLogistic(s_in * (q - zp_in))),
    i.e. clamp(round_half_even(y / s_out) + zp_out), y = clamp(p(v) / q(v) + 0.5, 0, 1) with
    v = clamp(x, -18, 18) and Eigen's rational polynomials evaluated by fused multiply-adds (as
    MLAS's FMA3 and NEON kernels; an SSE2-only build rounds each step and may differ by 1).
    """
    q = qparams("qnn.sigmoid", data, input_scale, input_zero_point, output_scale, output_zero_point)
    if q.dtype == "int16":
        return _int16_sigmoid_or_tanh("qnn.sigmoid", q, data)
    return k.lookup(_table("sigmoid", attrs.semantics, q), data)


@register_op(
    "qnn.tanh",
    inputs=INPUTS,
    attrs=LutAttrs,
    type_rel=_activation_rel(_with_int16),
    kind="elemwise",
)
def tanh(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized tanh, int8/uint8 -> same, through a 256-entry table. int16 (16x8):
    emulation/tflite_int16.tanh16 (the same measured table as qnn.sigmoid's int16 form).

    "tflite" (= "tflite_builtin"; both share LUTPopulate): as qnn.sigmoid with f(x) = tanhf(x);
    TFLite puts no constraint on the output parameters (converters use s_out = 1/128, zp_out 0
    for int8). (kFixedPointOptimized instead evaluates gemmlowp's fixed-point tanh.)
    "onnx" (DequantizeLinear -> Tanh -> QuantizeLinear; ORT has no QLinearTanh):
    q -> clamp(round_half_even(y / s_out) + zp_out), y = MlasComputeTanh(s_in * (q - zp_in)) =
    p(v) / q(v), v = clamp(x, -9, 9), Eigen's degree-13/6 rational evaluated by fused
    multiply-adds (ORT releases whose tanh kernel used other coefficients can differ by 1).
    """
    q = qparams("qnn.tanh", data, input_scale, input_zero_point, output_scale, output_zero_point)
    if q.dtype == "int16":
        return _int16_sigmoid_or_tanh("qnn.tanh", q, data)
    return k.lookup(_table("tanh", attrs.semantics, q), data)


@register_op(
    "qnn.hardswish",
    inputs=INPUTS,
    attrs=HardSwishAttrs,
    type_rel=_activation_rel(lambda a: _EIGHT_BIT),
    kind="elemwise",
)
def hardswish(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized hard-swish x * relu6(x + 3) / 6, int8/uint8 -> same.

    "tflite" (reference_ops::HardSwish, 16-bit fixed point): with hires = (q - zp_in) * 2**7,
    m_out = s_in / 128 / s_out and m_relu = s_in / 128 / (3 / 32768) (float32) quantized to
    Q0.15 multipliers and exponents (e_out <= 0 required): v = SRDHM16(hires, m_out);
    r = hires rescaled by m_relu (saturating shifts), mapped to [0, 1] as (r + 2**15) >> 1;
    out = clamp(RoundingDivideByPOT(SaturatingDoublingHighMul16(r, v), -e_out) + zp_out).
    The builtin kernel (optimized_ops::HardSwish) has a NEON path; it is not modelled.
    "onnx" (DequantizeLinear -> HardSwish -> QuantizeLinear): y = x * max(0, min(1,
    x * (1/6) + 0.5)) in float32, x = s_in * (q - zp_in), then clamp(round_half_even(y / s_out)
    + zp_out).
    """
    q = qparams(
        "qnn.hardswish", data, input_scale, input_zero_point, output_scale, output_zero_point
    )
    if attrs.semantics == "onnx":
        return k.lookup(_table("hardswish", "onnx", q), data)
    lo, hi = k.dtype_range(q.dtype)
    params = k.tflite_hardswish_params(q.in_scale, q.out_scale)
    out = k.tflite_hardswish(data, q.in_zp, q.out_zp, params)
    return np.clip(out, lo, hi).astype(q.dtype)


def _leaky_dtypes(attrs):
    return _EIGHT_BIT + ("int16",) if attrs.semantics == "tflite" else _EIGHT_BIT


@register_op(
    "qnn.leaky_relu",
    inputs=INPUTS,
    attrs=LeakyReluAttrs,
    type_rel=_activation_rel(_leaky_dtypes),
    kind="elemwise",
)
def leaky_relu(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized leaky ReLU (x >= 0 ? x : alpha * x), int8/uint8 (and int16) -> same.

    "tflite" (= "tflite_builtin" for 8 bits; reference_ops::QuantizeLeakyRelu): v = q - zp_in;
    out = clamp(zp_out + MultiplyByQuantizedMultiplier(v, M)) with M = s_in / s_out for v >= 0
    and M = (s_in * alpha) / s_out for v < 0, both ratios in float32, each quantized by
    QuantizeMultiplier. int16 needs zero points 0 (the builtin int16 kernel differs).
    "onnx" (QLinearLeakyRelu): q -> clamp(round_half_even(y / s_out) + zp_out) with
    y = x >= 0 ? x : alpha * x in float32, x = s_in * (q - zp_in).
    """
    q = qparams(
        "qnn.leaky_relu", data, input_scale, input_zero_point, output_scale, output_zero_point
    )
    if attrs.semantics == "onnx":
        return k.lookup(_leaky_table(q, attrs.alpha), data)
    if q.dtype == "int16" and (q.in_zp or q.out_zp):
        raise InterpreterError("qnn.leaky_relu: int16 needs zero points 0 (as TFLite)")
    lo, hi = k.dtype_range(q.dtype)
    out = k.tflite_leaky_relu(data, q.in_scale, q.in_zp, q.out_scale, q.out_zp, attrs.alpha)
    return np.clip(out, lo, hi).astype(q.dtype)


@lru_cache(maxsize=256)
def _leaky_table(q: QParams, alpha: float) -> np.ndarray:
    table = k.ort_lut(
        q.dtype, q.in_scale, q.in_zp, q.out_scale, q.out_zp, k.onnx_leaky_relu_f32(alpha)
    )
    table.flags.writeable = False
    return table


def _check_softmax_output(q: QParams) -> None:
    want_zp = k.dtype_range(q.dtype)[0]
    if abs(q.out_scale - 1 / 256) > 0.001 / 256 or q.out_zp != want_zp:
        raise InterpreterError(
            f"qnn.softmax: TFLite's {q.dtype} softmax outputs scale 1/256 and zero point "
            f"{want_zp}; got {q.out_scale} and {q.out_zp}"
        )


@register_op("qnn.softmax", inputs=INPUTS, attrs=SoftmaxAttrs, type_rel=_softmax_rel, kind="opaque")
def softmax(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Quantized softmax(beta * x) along ``axis``, int8/uint8 -> same; zp_in cancels out.
    int16 (TFLite's 16x8, "tflite" and "tflite_builtin" alike): reference_ops::SoftmaxInt16,
    emulation/tflite_int16.py (interpolated exp and 1/(1+x) tables built as TFLite builds them).

    "tflite" (reference_ops::Softmax, gemmlowp fixed point; needs s_out = 1/256 and zp_out =
    -128 / 0): d = q - max(q) scaled by M = min(beta * s_in * 2**26, 2**31 - 1) into Q5.26
    (QuantizeMultiplierGreaterThanOne), e = exp_on_negative_values(d) in Q0.31 for d >= diff_min
    = -floor(31 * 2**26 / 2**shift) (else 0), S = sum of e / 2**12 (rounded, Q12.19),
    r = GetReciprocal(S) with n bits over unit; out = clamp(RoundingDivideByPOT(SRDHM(r, e),
    n + 23) + zp_out), and zp_out where d < diff_min.
    "tflite_builtin" (optimized_ops::Softmax as built for x86; clang/aarch64 builds use a uint16
    table instead): t = expf((-s_in * beta) * (max(q) - q)), S = float sum in order,
    p = t * (1 / (S * s_out)); int8: round half away (p) + zp_out; uint8: int(p + 0.5f).
    "onnx" (QLinearSoftmax, opset 13): t = float(exp((q - max(q) + b) * s_in)), b = max(0,
    log(FLT_MAX / n) - 5) / s_in for n elements; S = float sum in order; out =
    clamp(round_half_even(t * floor(1 / s_out) / S) + zp_out) (ORT before PR 29728 wrapped int8
    instead of clamping).
    """
    q = qparams("qnn.softmax", data, input_scale, input_zero_point, output_scale, output_zero_point)
    if data.size == 0:
        return data.copy()
    axis = attrs.axis % data.ndim
    x = np.moveaxis(data, axis, -1)
    if q.dtype == "int16":  # TFLite's 16x8 SOFTMAX, both kernel sets
        if q.in_zp or q.out_zp or abs(q.out_scale * 32768 - 1) > 0.001:
            raise InterpreterError(
                "qnn.softmax: TFLite's int16 softmax needs zero points 0 and output scale "
                f"1/32768; got {q.in_zp}, {q.out_zp} and {q.out_scale}"
            )
        out = tflite_int16.softmax_int16(x, q.in_scale, attrs.beta)
        return np.ascontiguousarray(np.moveaxis(out, -1, axis))
    if attrs.semantics == "onnx":
        out = k.ort_softmax(x, q.in_scale, q.out_scale, q.out_zp, q.dtype)
    else:
        _check_softmax_output(q)
        if attrs.semantics == "tflite":
            out = k.tflite_softmax_reference(x, q.in_scale, attrs.beta, q.dtype)
        else:
            out = k.tflite_softmax_builtin(
                x, q.in_scale, attrs.beta, q.out_scale, q.out_zp, q.dtype
            )
    return np.ascontiguousarray(np.moveaxis(out, -1, axis)).astype(q.dtype)
