"""Lowering of the float ops that read windows or interpolate (spatial.py's kernels):

    nn.avg_pool2d of float32 (NCHW or NHWC, any pads, ceil mode, count_include_pad)   FPOOL
    nn.max_pool2d of float32 or integers not taken by lower/context.py's NHWC MAXPOOL          FPOOL
    image.resize2d, method "linear", of float32 (NCHW or NHWC, every coordinate mode)   FRESIZE

All are exact: the average adds each window's taps in float64 as the reference does (from +0.0,
as numpy's sum, so even the sign of a zero sum agrees) and divides by the window's count, a
table made with the op's own ``pool_counts``; FRESIZE takes its rows, columns and float32
weights from the op's own coordinate code (nn_image) at compile time and evaluates the
reference's float32 expression in its order, one float32 rounding per operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import refuse
from partita.backends.llvm.kinds import Kind
from partita.backends.registry import BackendError

from partita.ops.nn_common import layout_dims
from partita.ops.nn_image import _linear_taps, resize_coordinates
from partita.ops.nn_pool import pool_counts, pool_out_dims

from .registry import FLOAT, lowers

if TYPE_CHECKING:
    from .context import LowerContext

SPATIAL_OPS = ("nn.avg_pool2d", "image.resize2d")


def where(call) -> str:
    """The op's name and span, as lower/context.py names a refused op."""
    name = call.op.name
    return name + (f" ({call.span})" if call.span is not None else "")


@lowers("image.resize2d", "nn.avg_pool2d", "nn.max_pool2d", priority=FLOAT + 2)
def lower_spatial(low: LowerContext, call) -> bool:
    """Emit FPOOL / FRESIZE for ``call`` on ``low`` (a context.LowerContext), False for ops that
    are not pooling or linear resizes; unsupported attribute combinations
    are refused with the reason."""
    name = call.op.name
    if name == "image.resize2d" and call.attrs.method == "linear":
        return _resize(low, call)
    if name in ("nn.avg_pool2d", "nn.max_pool2d"):
        return _pool(low, call, name)
    return False


def _float32_only(call) -> None:
    data, out = call.args[0].checked_type.dtype, call.checked_type.dtype
    if data != "float32" or out != "float32":
        refuse(call, f"{data} -> {out} (the kernel reads and writes float32)")


def _pool(low: LowerContext, call, name: str) -> bool:
    dtype = call.args[0].checked_type.dtype
    if name == "nn.avg_pool2d" or dtype not in ("int8", "uint8", "int16", "int32", "int64"):
        _float32_only(call)
    a = call.attrs
    shape = [int(d) for d in call.args[0].checked_type.shape]
    n, h, w, c = layout_dims(shape, a.layout)
    oh, ow = pool_out_dims(h, w, a)
    include = getattr(a, "count_include_pad", False)
    counts = pool_counts(shape, a, include).astype(np.int64).reshape(-1)
    params = {
        "nhwc": a.layout == "NHWC", "N": n, "H": h, "W": w, "C": c, "OH": oh, "OW": ow,
        "pool": list(a.pool_size), "strides": list(a.strides), "dilation": list(a.dilation),
        "padding": list(a.padding), "mode": "avg" if name == "nn.avg_pool2d" else "max",
    }  # fmt: skip
    # the reference divides by max(count, 1): a window with no counted tap gives 0 / 1
    arrays = {"counts": np.maximum(counts, 1).astype(np.float64)} if params["mode"] == "avg" else {}
    low.emit(Kind.FPOOL, call, [low.src(call.args[0])], params, arrays)
    return True


def _resize(low: LowerContext, call) -> bool:
    _float32_only(call)
    a = call.attrs
    shape = [int(d) for d in call.args[0].checked_type.shape]
    n, h, w, c = layout_dims(shape, a.layout)
    oh, ow = (int(s) for s in a.size)
    if oh * ow > 1 << 24:
        raise BackendError(f"llvm: {where(call)}: {oh}x{ow} outputs: tables too large")
    mode = a.coordinate_transformation_mode
    one = np.float32(1)
    arrays = {}
    for axis, out_size, in_size in (("y", oh, h), ("x", ow, w)):
        lo, hi, frac = _linear_taps(resize_coordinates(out_size, in_size, mode), in_size)
        arrays[f"{axis}0"] = lo.astype(np.int32)
        arrays[f"{axis}1"] = hi.astype(np.int32)
        # float32 weights (1 - f, f) as the reference computes them, held exactly as float64
        arrays[f"w{axis}0"] = (one - frac.astype(np.float32)).astype(np.float64)
        arrays[f"w{axis}1"] = frac.astype(np.float32).astype(np.float64)
    params = {"nhwc": a.layout == "NHWC", "N": n, "H": h, "W": w, "C": c, "OH": oh, "OW": ow}
    low.emit(Kind.FRESIZE, call, [low.src(call.args[0])], params, arrays)
    return True


__all__ = ["SPATIAL_OPS", "lower_spatial", "refuse", "where"]
