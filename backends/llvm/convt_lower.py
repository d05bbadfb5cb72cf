"""``nn.conv2d_transpose`` of float32 data with constant weights: one FCONVT kernel.

Each output element gathers the taps that scatter into it (the reference,
``conv2d_transpose_reference``, scatters every input pixel times every tap): output row ``oy``
meets kernel row ``a`` where ``oy + top - a * dh`` is a multiple of the stride ``sh``, at input
row ``(oy + top - a * dh) / sh``, and likewise for columns. The products are summed in
float64 and rounded once, as the reference's float64 accumulator is (it adds the taps in
another order: results agree to float64 rounding, far inside the float tolerance). Scalar
loops: no test model has one; correctness over speed.
"""

from __future__ import annotations

import numpy as np

from .conv_lower import const_value

LAYOUTS = ("NCHW", "NHWC")


def lower_fconv_transpose(low, call) -> bool:
    """The FCONVT kernel for ``call`` on ``low`` (a lower._Lowering), or False to refuse it."""
    x, w = call.args
    a = call.attrs
    weights = const_value(low, w)
    if (x.checked_type.dtype != "float32" or weights is None or weights.dtype != np.float32
            or a.data_layout not in LAYOUTS or call.checked_type.dtype != "float32"):
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
    low.emit("FCONVT", call, [low.src(x)], params,
             {"weights": np.ascontiguousarray(iohw.astype(np.float32))})
    return True
