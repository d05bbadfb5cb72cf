"""``nn.conv2d_transpose`` with constant weights, of float32 data or (relay graphs) of int8,
uint8 or int32 data with integer weights: one FCONVT kernel.

Each output element gathers the taps that scatter into it (the reference,
``conv2d_transpose_reference``, scatters every input pixel times every tap): output row ``oy``
meets kernel row ``a`` where ``oy + top - a * dh`` is a multiple of the stride ``sh``, at input
row ``(oy + top - a * dh) / sh``, and likewise for columns. The products are summed in
float64 and rounded once, as the reference's float64 accumulator is (it adds the taps in
another order: results agree to float64 rounding, far inside the float tolerance); integer
products are summed exactly in int64 and wrapped to the output dtype, as the reference does. Scalar
loops: no test model has one; correctness over speed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from .float_conv import const_value
from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

LAYOUTS = ("NCHW", "NHWC")
INTEGER = ("int8", "uint8", "int32")  # data and output dtypes of the integer form


@lowers("nn.conv2d_transpose", priority=OP)
def lower_fconv_transpose(low: LowerContext, call) -> bool:
    """The FCONVT kernel for ``call`` on ``low`` (a context.LowerContext), or False to refuse it."""
    x, w = call.args
    a = call.attrs
    weights = const_value(low, w)
    dtype, out_dtype = x.checked_type.dtype, call.checked_type.dtype
    if weights is None or a.data_layout not in LAYOUTS:
        return False
    floating = dtype == out_dtype == "float32" and weights.dtype == np.float32
    integer = (dtype in INTEGER and out_dtype in INTEGER
               and np.issubdtype(weights.dtype, np.integer))
    if not (floating or integer):
        return False
    iohw = np.transpose(weights, [a.kernel_layout.index(c) for c in "IOHW"])
    dims = {d: int(s) for d, s in zip(a.data_layout, x.checked_type.shape)}
    odims = {d: int(s) for d, s in zip(a.data_layout, call.checked_type.shape)}
    params = {
        "layout": a.data_layout,
        "in": [dims[d] for d in "NCHW"],
        "out": [odims[d] for d in "NCHW"],
        "kernel": list(iohw.shape[2:]),
        "groups": int(a.groups),
        "strides": [int(v) for v in a.strides],
        "dilation": [int(v) for v in a.dilation],
        "pad": [int(a.padding[0]), int(a.padding[1])],
    }
    if integer:  # exact int64 sums (the reference's), wrapped to the output's width
        params["integer"] = [dtype, out_dtype]
    low.emit(Kind.FCONVT, call, [low.src(x)], params,
             {"weights": np.ascontiguousarray(iohw.astype(np.int64 if integer else np.float32))})
    return True
