"""Integer products read as int32 (dynamic quantization's MatMulInteger): ``qnn.dense`` whose
input zero point is computed at run time (a ``qnn.dynamic_quantize`` field) and whose int32
accumulator is the result, not requantized. One DYNQ_DENSE kernel: the exact sum of
(x - zx) * (w - zw) over k, wrapped to int32 as the reference casts its int64 sum; with
accumulate="vpmaddubsw" (ONNX Runtime's kernels on x86 CPUs without VNNI) plus what the int16
saturation of each pair of raw u8 x s8 products takes off (x86_int8.pair_saturation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant

from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext


@lowers("qnn.dense", priority=OP)
def lower_int_dense(low: LowerContext, call) -> bool:
    x, w, zx, zw = call.args[:4]
    if (
        isinstance(zx, Constant)
        or not isinstance(w, Constant)
        or not isinstance(zw, Constant)
        or call.checked_type.dtype != "int32"
        or x.checked_type.dtype not in ("int8", "uint8")
        or zx.checked_type.shape != ()
    ):
        return False
    weights = np.asarray(w.data)
    n, k = weights.shape
    zw = np.broadcast_to(np.asarray(zw.data, np.int32).ravel(), (n,)).copy()
    params = {
        "M": int(np.prod(x.checked_type.shape[:-1], dtype=np.int64)), "K": int(k), "N": int(n),
        "x_dtype": x.checked_type.dtype, "zx_dtype": zx.checked_type.dtype,
        # a dense has one tap: "vpmaddubsw_tap" pairs as "vpmaddubsw" does
        "pairs": call.attrs.accumulate != "exact",
    }  # fmt: skip
    arrays = {"w": weights.astype(np.int32), "zw": zw}
    low.emit(Kind.DYNQ_DENSE, call, [low.src(x), low.src(zx)], params, arrays)
    return True
