"""The MAC kernels' output stage: TFLite's fixed-point multiplier and shift per channel
(QuantizeMultiplier), the other runtimes' float scales, or the int32 accumulator itself
(mac.py, wide_mac.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.registry import BackendError

from partita.ir import Constant
from partita.ops.emulation.pytorch_x86 import onednn_inverse
from partita.ops.emulation.tflite_fixedpoint import (
    quantize_multiplier_array,
)

if TYPE_CHECKING:
    pass

RANGE = {"int8": (-128, 127), "uint8": (0, 255)}



def _c(e) -> np.ndarray:
    if not isinstance(e, Constant):
        raise BackendError(f"llvm: expected a constant operand, got {e.short()}")
    return np.asarray(e.data)


def _raw_stage(call, by: dict, where: str) -> tuple[dict, dict]:
    """The output stage of an accumulator read as such (no requantize: TVM's canonical QNN, a
    dynamic quantization's product): the int32 sum, plus a fused bias, wrapping as int32 does
    (``rounding`` "raw"; the scalar CONV/FC kernels store int32)."""
    x = call.args[0]
    if x.checked_type.dtype not in RANGE or _c(call.args[1]).dtype.name not in RANGE:
        raise BackendError(f"llvm: {where}: only int8/uint8 data and weights")
    n_out = call.checked_type.shape[-1]
    bias = by.get("nn.bias_add")
    zeros = np.zeros(n_out, np.int32)
    arrays = {
        "multiplier": zeros, "shift": zeros.copy(), "scale": np.zeros(n_out),
        "bias": (_c(bias.args[1]).astype(np.int32).reshape(-1) if bias is not None
                 else zeros.copy()),
        "w_zp": np.broadcast_to(np.atleast_1d(_c(call.args[3])), (n_out,)).astype(np.int32),
        "fscale": np.zeros(n_out, np.float32),
    }  # fmt: skip
    params = {
        "in_zp": int(_c(call.args[2])), "rq_zp": 0, "out_zp": 0, "lo": -(1 << 31),
        "hi": (1 << 31) - 1, "rounding": "raw", "in_dtype": x.checked_type.dtype,
        "w_dtype": _c(call.args[1]).dtype.name, "out_dtype": "int32",
    }  # fmt: skip
    return params, arrays


def output_stage(call, by: dict, where: str) -> tuple[dict, dict]:
    """A fused MAC kernel's output stage: parameters and per-channel arrays (bias, TFLite's
    multipliers and shifts, the real scale, weight zero points, and the float32 stages' scale,
    negated float bias ``fzp`` and oneDNN's ``finv``) for requantize ``by["qnn.requantize"]``
    and the clip after it."""
    if "qnn.requantize" not in by:
        return _raw_stage(call, by, where)
    rq = by["qnn.requantize"]
    sem = rq.attrs.semantics
    if sem not in ("tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm", "onednn"):
        raise BackendError(f"llvm: {where}: requantize semantics {sem!r}")
    x = call.args[0]
    if x.checked_type.dtype not in RANGE or _c(call.args[1]).dtype.name not in RANGE:
        raise BackendError(f"llvm: {where}: only int8/uint8 data and weights")
    torch = sem in ("fbgemm", "onednn")  # zp_in: a float bias, per channel
    if _c(rq.args[4]).size > 1 or (_c(rq.args[2]).size > 1 and not torch):
        raise BackendError(f"llvm: {where}: per-channel zero points in requantize")
    lo, hi = RANGE[rq.attrs.out_dtype]
    if "clip" in by:
        lo = max(lo, math.ceil(by["clip"].attrs.a_min))
        hi = min(hi, math.floor(by["clip"].attrs.a_max))
    n_out = call.checked_type.shape[-1]
    s_in, s_out = _c(rq.args[1]), _c(rq.args[3])
    real = np.broadcast_to(np.atleast_1d(s_in.astype(np.float64) / s_out.astype(np.float64)),
                           (n_out,)).copy()
    q, shift = quantize_multiplier_array(real)
    fscale = s_in.astype(np.float32) if sem == "onednn" else (
        s_in.astype(np.float32) / s_out.astype(np.float32))
    bias = by.get("nn.bias_add")

    def per_channel(v, dtype):
        return np.broadcast_to(np.atleast_1d(v), (n_out,)).astype(dtype).copy()

    arrays = {
        "multiplier": np.asarray(q, np.int32),
        "shift": np.asarray(shift, np.int32),
        "scale": real,
        "bias": (_c(bias.args[1]).astype(np.int32).reshape(-1) if bias is not None
                 else np.zeros(n_out, np.int32)),
        "w_zp": per_channel(_c(call.args[3]), np.int32),
        "fscale": per_channel(fscale.reshape(-1), np.float32),
    }
    if torch:
        arrays["fzp"] = per_channel(_c(rq.args[2]).astype(np.float32).reshape(-1), np.float32)
    if sem == "onednn":
        arrays["finv"] = per_channel(onednn_inverse(s_out.reshape(-1)[0]), np.float32)
    params = {
        "in_zp": int(_c(call.args[2])),
        "rq_zp": 0 if torch else int(_c(rq.args[2]).flat[0]),
        "out_zp": int(_c(rq.args[4]).flat[0]),
        "lo": lo,
        "hi": hi,
        "rounding": sem,
        "in_dtype": x.checked_type.dtype,
        "w_dtype": _c(call.args[1]).dtype.name,
        "out_dtype": rq.attrs.out_dtype,
    }
    return params, arrays
