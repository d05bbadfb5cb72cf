"""qnn.mean's parameters for MEAN (int8.py) and QMEANX (qmean_axes.py), and TFLite's builtin
mean kernel (registered by float_ops.py, ahead of which MEAN and QMEANX are tried)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant
from partita.ops.emulation.tflite_fixedpoint import (
    quantize_multiplier,
)

if TYPE_CHECKING:
    from .context import LowerContext

RANGE = {"int8": (-128, 127), "uint8": (0, 255)}



def scalar_constant(e):  # 0-d: the kernels' parameters are read with int() / float()
    return isinstance(e, Constant) and np.asarray(e.data).ndim == 0


def mean_params(shape, axis, semantics: str, exclude: bool, consts, out_dtype: str,
                keepdims: bool = False) -> dict | None:
    """The MEAN kernel's parameters for qnn.mean of an 8-bit tensor of ``shape`` over ``axis``
    (``consts``: input scale, zero point, output scale, zero point), or None when the kernel does
    not take it (excluded or non-contiguous axes; "onnx" means only over H and W, of NHWC or
    NCHW)."""
    shape = [int(d) for d in shape]
    axes = tuple(sorted(a % len(shape) for a in axis))
    spatial = len(shape) == 4 and axes in ((1, 2), (2, 3))  # H, W of NHWC or NCHW
    contiguous = axes and axes == tuple(range(axes[0], axes[-1] + 1))
    onnx = semantics == "onnx"
    if (exclude or not contiguous or (onnx and not spatial)
            or semantics not in ("tflite", "onnx", "tflite_legacy")):
        return None
    s_in, zp_in, s_out, zp_out = consts
    n = math.prod(shape[axes[0] : axes[-1] + 1])
    # the reduced run of axes between the outer and inner ones: [outer][n][inner]
    lay = {"outer": math.prod(shape[: axes[0]]), "inner": math.prod(shape[axes[-1] + 1 :])}
    common = {"n": n, "in_zp": int(zp_in), "out_zp": int(zp_out), "out_dtype": out_dtype, **lay}
    if semantics == "tflite_legacy":
        four_d = keepdims and len(shape) == 4 and tuple(a % 4 for a in axis) in ((1, 2), (2, 1))
        return {**common, **legacy_mean(four_d, n, consts, out_dtype)}
    if onnx:  # MLAS: float32(acc) * (s_in / (s_out * n)), even
        scale = np.float32(s_in) / (np.float32(s_out) * np.float32(n))
        return {**common, "scale": float(scale)}
    m, e = quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
    k = min(int(math.floor(math.log2(n))), 32, 31 + e)
    return {**common, "multiplier": int((m << k) // n), "shift": e - k}


def legacy_mean(four_d: bool, n: int, consts, out_dtype: str) -> dict:
    """TFLite <= 2.12's reference MEAN (qnn_pool._mean_tflite_legacy), first match wins: the 4-D
    Mean ("q4_int8": MBQM then rounding division by n; "q4_uint8": MBQM of s_in / (n s_out)
    plus a float-derived bias), equal parameters ("copy": the sum truncated by n), else the
    float32 rescale ("float", scale and bias precomputed in float32 as the reference)."""
    f32 = np.float32
    s_in, zp_in, s_out, zp_out = consts
    if four_d and out_dtype == "int8":
        m, e = quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
        return {"legacy": "q4_int8", "multiplier": int(m), "shift": int(e)}
    if four_d:
        bias = int(zp_out) - int(f32(f32(zp_in) * f32(s_in)) / f32(s_out))
        m, e = quantize_multiplier(float(f32(s_in) / (f32(n) * f32(s_out))))
        return {"legacy": "q4_uint8", "multiplier": int(m), "shift": int(e), "bias": bias}
    if int(zp_in) == int(zp_out) and f32(s_in) == f32(s_out):
        return {"legacy": "copy"}
    scale = f32(s_in) / f32(s_out)
    bias = f32(f32(-int(zp_in)) * scale + f32(0.5))
    return {"legacy": "float", "fscale": float(scale), "fbias": float(bias)}


def lower_qmean_builtin(low: LowerContext, call) -> bool:
    """qnn.mean "tflite_builtin" as MEAN: TFLite's optimized kernel for a 4-D mean over H, W
    kept as dims (the sum, without the zero point, times QuantizeMultiplier(float32(s_in /
    (n * s_out))), plus a float32 bias; whole 16-channel blocks round upward), else "tflite"."""
    from partita.ops.tensor_reduce import reduce_axes

    x, a = call.args[0], call.attrs
    if x.checked_type.dtype not in RANGE or not all(scalar_constant(c) for c in call.args[1:]):
        return False
    s_in, zp_in, s_out, zp_out = (np.asarray(c.data).reshape(-1)[0] for c in call.args[1:])
    shape = [int(d) for d in x.checked_type.shape]
    dtype = call.checked_type.dtype
    if a.keepdims and len(shape) == 4 and reduce_axes(4, a) == (1, 2):
        f32 = np.float32
        n = shape[1] * shape[2]
        t = f32(f32(zp_in) * f32(s_in)) / f32(s_out)
        t = t + f32(0.5) if t > 0 else t - f32(0.5)
        m, e = quantize_multiplier(float(f32(s_in) / (f32(n) * f32(s_out))))
        params = {
            "n": n, "in_zp": 0, "out_zp": int(zp_out) - int(t), "out_dtype": dtype,
            "outer": shape[0], "inner": shape[3], "multiplier": int(m), "shift": int(e),
            "upward": shape[3] // 16 * 16,
        }  # fmt: skip
    else:
        consts = [s_in, zp_in, s_out, zp_out]
        params = mean_params(shape, a.axis, "tflite", a.exclude, consts, dtype)
    if params is None:
        return False
    low.emit(Kind.MEAN, call, [low.src(x)], params)
    return True
