"""Lowerings registered at registry.EDGE, ahead of the general ones, for what those refuse
(each returns False to decline):

    nn.pad with a pad value computed at run time     GATHER, the value read as a second source
    qnn.add / subtract / mul, per-channel or int16   QBIN (qbinary.py)
    qnn.mean over axes MEAN does not take (any       QMEANX (qmean_axes.py); COPY, CONST
      semantics), over no axis, of empty data
    qnn.conv2d / qnn.dense of int16 data or weights,
      int64 accumulators, wide outputs (16x8), pair
      saturation with weight zero points or that
      the vector kernels refuse                      WMAC (wide_mac.py)
    qnn.leaky_relu of int16 ("tflite")               EWISE (qleaky.py)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant

from .gather import LIMIT, index_table
from .registry import EDGE, lowers

if TYPE_CHECKING:
    from .context import LowerContext


@lowers("nn.pad", priority=EDGE)
def lower_pad_value(low: LowerContext, call) -> bool:
    """nn.pad whose pad value is not a constant: GATHER's index table (made by the op's own
    reference) sends each filled element to the pad value's one element, numbered after the
    data's; "edge" and "reflect" never read it."""
    x, value = call.args
    if call.op.name != "nn.pad" or isinstance(value, Constant):
        return False
    dtype, vdtype = x.checked_type.dtype, value.checked_type.dtype
    where = "nn.pad" + (f" ({call.span})" if call.span is not None else "")
    if vdtype != dtype:
        raise LLVMError(f"llvm cannot compile {where}: a run-time {vdtype} pad value for {dtype} "
                        "data (the reference converts it, and fails on values it cannot hold)")
    size = int(np.prod(x.checked_type.shape, dtype=np.int64))
    count = int(np.prod(call.checked_type.shape, dtype=np.int64))
    if count > LIMIT or size > LIMIT:
        raise LLVMError(f"llvm cannot compile {where}: more than 2**24 elements to gather")
    table = index_table(call, [x], [size])
    filled = table < 0
    sources = [low.src(x), *([low.src(value)] if filled.any() else [])]
    params = {"itemsize": int(np.dtype(dtype).itemsize), "count": count,
              "offsets": [0, size][: len(sources)]}
    arrays = {"map": np.where(filled, size, table).astype(np.int32),
              "fill": np.zeros(int(np.dtype(dtype).itemsize), np.uint8)}
    low.emit(Kind.GATHER, call, sources, params, arrays)
    return True


__all__ = ["lower_pad_value"]
