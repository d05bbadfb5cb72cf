"""Integer products outside the fused int8 MAC kernels (int_products.py):

    nn.conv2d / nn.conv2d_transpose of integer data and weights    GCONV
    nn.batch_matmul of integers                                     IBMM
    qnn.batch_matmul read as its accumulator (int32 / int64)        IBMM
    qnn.batch_matmul -> qnn.requantize (any semantics, per tensor   IBMM with the requantize
      or per channel) not taken by qtransformer.lower_qbmm

As the references compute them (partita/ops/nn_conv.py, nn.py, qnn.py): the exact int64 sum of
the products (numpy's int64 arithmetic, wrapping past 2**63 as it does), cast to the output dtype
with two's-complement wrap-around; the requantize's per-channel parameters are computed by
integer.requantize_node, as for an EWISE step. Weights may be constant, constant expressions
(copied into a buffer by a CONST kernel) or computed at run time, in any kernel layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant

from .float_conv import const_value
from .integer import requantize_node, requantize_ok
from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

INTS = ("int8", "uint8", "int16", "int32", "int64")


def weight_source(low: LowerContext, w) -> int:
    """The buffer holding weights ``w``; a constant expression folded for the convolutions
    (float_conv.weight_only: no kernel computes it) is copied in by a CONST kernel."""
    if not low.has_buffer(w) and not isinstance(w, Constant):
        value = const_value(low, w)
        if value is not None:
            low.emit(Kind.CONST, w, [], {}, {"value": np.ascontiguousarray(value)})
    return low.src(w)


@lowers("nn.conv2d", "nn.conv2d_transpose", priority=OP + 1)
def lower_int_conv(low: LowerContext, call) -> bool:
    """nn.conv2d / nn.conv2d_transpose of integers as GCONV, or False for other dtypes."""
    x, w = call.args
    if not all(t.dtype in INTS for t in (x.checked_type, w.checked_type, call.checked_type)):
        return False
    emit_gconv(low, call, weight_source(low, w))
    return True


def emit_gconv(low: LowerContext, call, weights: int) -> None:
    """GCONV for ``call`` (either convolution, either data layout, any kernel layout) reading
    its weights from buffer ``weights``."""
    x, w = call.args
    a = call.attrs
    transposed = call.op.name == "nn.conv2d_transpose"
    wshape = [int(d) for d in w.checked_type.shape]
    dense = [int(np.prod(wshape[i + 1 :], dtype=np.int64)) for i in range(4)]
    axes = "IOHW" if transposed else "OIHW"
    dims = {d: int(s) for d, s in zip(a.data_layout, x.checked_type.shape)}
    odims = {d: int(s) for d, s in zip(a.data_layout, call.checked_type.shape)}
    params = {
        "layout": a.data_layout, "transposed": transposed,
        "in": [dims[d] for d in "NCHW"], "out": [odims[d] for d in "NCHW"],
        "kernel": [wshape[a.kernel_layout.index("H")], wshape[a.kernel_layout.index("W")]],
        "wstrides": [dense[a.kernel_layout.index(d)] for d in axes],
        "groups": int(a.groups), "strides": [int(v) for v in a.strides],
        "dilation": [int(v) for v in a.dilation], "pad": [int(a.padding[0]), int(a.padding[1])],
        "dtypes": [x.checked_type.dtype, w.checked_type.dtype, call.checked_type.dtype],
    }  # fmt: skip
    low.emit(Kind.GCONV, call, [low.src(x), weights], params)


@lowers("nn.batch_matmul", priority=OP)
def lower_int_bmm(low: LowerContext, call) -> bool:
    """nn.batch_matmul of integers (exact sums wrapped to out_dtype) as IBMM, or False."""
    x, y = call.args
    if not all(t.dtype in INTS for t in (x.checked_type, y.checked_type, call.checked_type)):
        return False
    low.emit(Kind.IBMM, call, [low.src(x), low.src(y)], _bmm_params(call, 0, 0))
    return True


@lowers("qnn.batch_matmul", priority=OP + 1)
def lower_qbmm_any(low: LowerContext, call) -> bool:
    """qnn.batch_matmul as IBMM: its requantize fused when it is the accumulator's only reader
    (with constant parameters), else the accumulator itself."""
    x, y = call.args[:2]
    inputs = [low.src(x), low.src(y)]
    zps = []
    for z in call.args[2:4]:  # constants, or scalars computed at run time (dynamic quantization)
        if isinstance(z, Constant):
            zps.append(int(np.asarray(z.data).ravel()[0]))
        else:
            inputs.append(low.src(z))
            zps.append(["buf", len(inputs) - 1, z.checked_type.dtype])
    params = _bmm_params(call, *zps)
    arrays = {}
    last = call
    rq = low.only_user(call, "qnn.requantize")
    if rq is not None and rq.args[0] is call and requantize_ok(rq):
        params["rq"], arrays = _requantize_stage(rq, call.checked_type.dtype)
        low.absorb(rq)
        last = rq
    low.emit(Kind.IBMM, last, inputs, params, arrays)
    return True


def _bmm_params(call, zx, zy) -> dict:
    """IBMM's shapes and flags; zero points ``zx``, ``zy``: ints, or ["buf", input, dtype]."""
    x, y = call.args[:2]
    a = call.attrs
    bx, by = int(x.checked_type.shape[0]), int(y.checked_type.shape[0])
    return {
        "B": max(bx, by), "bx": bx, "by": by,
        "M": int(x.checked_type.shape[2 if a.transpose_a else 1]),
        "K": int(x.checked_type.shape[1 if a.transpose_a else 2]),
        "N": int(y.checked_type.shape[1 if a.transpose_b else 2]),
        "ta": bool(a.transpose_a), "tb": bool(a.transpose_b), "zx": zx, "zy": zy,
        "dtypes": [x.checked_type.dtype, y.checked_type.dtype],
    }  # fmt: skip


class _Leaves:
    """Stands in for float_ops.Tree: collects requantize_node's per-channel parameters."""

    def __init__(self):
        self.arrays: list[np.ndarray] = []

    def array_leaf(self, array, pshape) -> None:
        self.arrays.append(np.ascontiguousarray(np.asarray(array).reshape(-1)))


def _requantize_stage(rq, acc_dtype: str) -> tuple[dict, dict]:
    """IBMM's ``rq`` parameters and arrays: the requantize's semantics and its parameters per
    channel, exactly as the EWISE step computes them (integer.requantize_node)."""
    leaves = _Leaves()
    node = requantize_node(leaves, rq, None)
    q, shift, scale, zi, zo = leaves.arrays
    per_channel = q.size > 1
    params = {**node[3], "out_dtype": rq.checked_type.dtype, "acc": acc_dtype,
              "axis": rq.attrs.axis % 3 if per_channel else -1,
              "float_zp": zi.dtype.kind == "f"}
    arrays = {"rq_q": q, "rq_shift": shift, "rq_scale": scale.astype(np.float64),
              "rq_zi": zi, "rq_zo": zo}
    return params, arrays


__all__ = ["emit_gconv", "lower_int_bmm", "lower_int_conv", "lower_qbmm_any", "weight_source"]
