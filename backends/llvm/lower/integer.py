"""Lowering of integer products and of requantization outside the fused MAC kernels:

    nn.dense of integer data (exact int64 sums, wrapped to out_dtype)     EXACT_INT_DENSE
    qnn.requantize of any integer data, every semantics, per channel       a step of EWISE

EXACT_INT_DENSE takes constant weights as compressed rows (each output unit's nonzero weights and
their columns: TFLite's int8 RESIZE_BILINEAR imports as two such products whose rows hold two
taps), or weights computed at run time as a dense loop. A requantize is one scalar op of the
EWISE tree (float_ops.Tree), its per-channel parameters leaves computed here exactly as the
reference computes them (QuantizeMultiplier, float32 scale quotients, oneDNN's reciprocal); the
arithmetic per element is integer.IntKernels.requantize_value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import refuse
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant
from partita.ops.emulation.pytorch_x86 import onednn_inverse
from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier_array

from .registry import FLOAT, lowers

if TYPE_CHECKING:
    from .context import LowerContext

TYPES = ("float32", "int32", "int64", "bool")
READ = (*TYPES, "int8", "uint8", "int16", "float16")  # what EWISE kernels load

INT_DATA = ("int8", "uint8", "int16", "int32", "int64")
F32 = np.float32


@lowers("nn.dense", priority=FLOAT + 3)
def lower_int_product(low: LowerContext, call) -> bool:
    """nn.dense of integer data and weights ("exact" accumulation) as EXACT_INT_DENSE, or False."""
    x, w = call.args
    dtypes = (x.checked_type.dtype, w.checked_type.dtype, call.checked_type.dtype)
    if not all(d in INT_DATA for d in dtypes):
        return False
    if isinstance(x, Constant):
        refuse(call, "a constant data operand")
    m = int(np.prod(x.checked_type.shape[:-1], dtype=np.int64))
    n, k = (int(d) for d in w.checked_type.shape)
    params = {"M": m, "K": k, "N": n, "x_dtype": dtypes[0], "w_dtype": dtypes[1]}
    if not isinstance(w, Constant):
        low.emit(Kind.EXACT_INT_DENSE, call, [low.src(x), low.src(w)], params)
        return True
    weights = np.asarray(w.data).astype(np.int64)
    rows, cols = np.nonzero(weights)  # row-major: each unit's columns in order
    starts = np.searchsorted(rows, np.arange(n + 1)).astype(np.int32)
    arrays = {
        "starts": starts,
        "cols": cols.astype(np.int32),
        # int64 values as bytes ("weights": the code generator passes bytes through as such)
        "weights": np.ascontiguousarray(weights[rows, cols]).view(np.uint8),
    }
    params["sparse"] = True
    low.emit(Kind.EXACT_INT_DENSE, call, [low.src(x)], params, arrays)
    return True


def requantize_ok(call) -> bool:
    """Whether qnn.requantize ``call`` is an EWISE step: constant parameters, data of a dtype
    the EWISE kernels read."""
    data = call.args[0].checked_type.dtype
    return (
        all(isinstance(a, Constant) for a in call.args[1:])
        and data in READ
        and call.checked_type.dtype in READ
    )


def requantize_node(tree, call, data_node) -> list:
    """The EWISE tree node of qnn.requantize ``call`` over ``data_node``: kids (data, q, shift,
    scale, zp_in, zp_out), each parameter a leaf broadcast along the channel axis."""
    a = call.attrs
    shape = [int(d) for d in call.args[0].checked_type.shape]
    consts = [np.asarray(c.data) for c in call.args[1:]]
    per_channel = any(c.size > 1 for c in consts)
    nd = len(shape)
    size = shape[a.axis % nd] if per_channel and nd else 1
    pshape = [1] * nd
    if per_channel and nd:
        pshape[a.axis % nd] = size

    def chan(v, dtype):
        return np.broadcast_to(np.asarray(v).astype(dtype).ravel(), (size,)).copy()

    s_in, zp_in, s_out, zp_out = consts
    sem = a.semantics
    real = chan(s_in, np.float64) / chan(s_out, np.float64)
    q, shift = quantize_multiplier_array(real)
    if sem in ("tflite", "tflite_builtin") and call.args[0].checked_type.dtype == "int64":
        if np.any(shift > 14) or np.any(shift < -31):
            refuse(call, f"int64 data needs a multiplier shift in [-31, 14], got {shift}")
    if sem in ("onnx", "fbgemm"):  # float32 quotients, as the reference divides
        scale = chan(s_in, F32) / chan(s_out, F32)
    elif sem == "onednn":
        scale = chan(s_in, F32)
    else:
        scale = real
    torch = sem in ("fbgemm", "onednn")
    zi = chan(zp_in, F32).astype(np.float64) if torch else chan(zp_in, np.int64)
    extra = {"semantics": sem, "in_dtype": call.args[0].checked_type.dtype}
    if sem == "onednn":
        extra["inverse"] = float(onednn_inverse(np.asarray(s_out).reshape(-1)[0]))
    kids = [data_node] + [
        tree.array_leaf(v, pshape)
        for v in (
            np.asarray(q, np.int64),
            np.asarray(shift, np.int64),
            np.asarray(scale, np.float64),
            zi,
            chan(zp_out, np.int64),
        )
    ]
    return ["op", "requantize", kids, extra, call.checked_type.dtype]


__all__ = ["lower_int_product", "requantize_node", "requantize_ok"]
