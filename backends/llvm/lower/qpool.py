"""qnn.avg_pool2d: AVGPOOL (TFLite's and ONNX's arithmetic), or MEAN for ONNX's global
average."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ops.emulation.tflite_fixedpoint import (
    quantize_multiplier,
)
from partita.ops.nn_pool import pool_counts
from partita.ops.qnn_pool import TFLITE_POOL_SCALE_TOLERANCE as SCALE_TOLERANCE

from .qmean import mean_params, scalar_constant
from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}



@lowers("qnn.avg_pool2d", priority=OP)
def lower_qavgpool(low: LowerContext, call) -> bool:
    """qnn.avg_pool2d of 8-bit data with scalar parameters: AVGPOOL (the window's integer sum
    for "tflite", float32 taps in row-major order for "onnx"), or MEAN for ONNX's global
    average (MLAS's formula is the MEAN kernel's)."""
    x = call.args[0]
    a = call.attrs
    dtype = x.checked_type.dtype
    if dtype not in RANGE or not all(scalar_constant(c) for c in call.args[1:]):
        return False
    s_in, zp_in, s_out, zp_out = (np.asarray(c.data).reshape(-1)[0] for c in call.args[1:])
    shape = [int(d) for d in x.checked_type.shape]
    nhwc = a.layout == "NHWC"
    _, h, w, c = shape if nhwc else (shape[0], shape[2], shape[3], shape[1])
    onnx = a.semantics == "onnx"
    if onnx and tuple(a.pool_size) == (h, w) and not any(a.padding) and tuple(a.dilation) == (1, 1):
        consts = [s_in, zp_in, s_out, zp_out]  # NCHW: a mean over axes 2, 3 (inner = 1)
        params = mean_params(shape, (1, 2) if nhwc else (2, 3), "onnx", False, consts, dtype)
        low.emit(Kind.MEAN, call, [low.src(x)], params)
        return True
    counts = pool_counts(shape, a, a.count_include_pad).astype(np.int32).reshape(-1)
    if onnx and a.count_include_pad:
        counts = np.full_like(counts, math.prod(a.pool_size))
    f32 = np.float32
    same = int(zp_in) == int(zp_out) and abs(f32(s_in) - f32(s_out)) <= SCALE_TOLERANCE
    m, e = quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
    params = {
        "nhwc": nhwc, "H": h, "W": w, "C": c,
        "pool": list(a.pool_size), "strides": list(a.strides), "dilation": list(a.dilation),
        "padding": list(a.padding), "semantics": a.semantics, "dtype": dtype,
        "zp_in": int(zp_in), "zp_out": int(zp_out), "s_in": float(f32(s_in)),
        "s_out": float(f32(s_out)), "same": bool(same), "multiplier": int(m), "shift": int(e),
    }  # fmt: skip
    low.emit(Kind.AVGPOOL, call, [low.src(x)], params, {"counts": counts})
    return True
