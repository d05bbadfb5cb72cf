"""qnn.prelu (TFLite's PRELU) as one EWISE kernel of existing steps:

    v = x - zp_in
    v < 0 ? requantize(v * (alpha - zp_alpha); s_in * s_alpha / s_out)
          : requantize(v; s_in / s_out)

each requantize the EWISE "tflite" step (zp_out + MultiplyByQuantizedMultiplier, saturated to
the data's type), its (q, shift) quantized here from the float32 ratios the reference uses
(partita/ops/qnn_vela.prelu), so the bits are the interpreter's. alpha is read with broadcast
strides (per channel, or any shape that broadcasts to the data), from a constant or a tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from partita.ir import Constant
from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier

from .float_ops import Tree, emit_ewise
from .registry import OP, lowers
from .tables import const_array

if TYPE_CHECKING:
    from .context import LowerContext

F32 = np.float32


@lowers("qnn.prelu", priority=OP)
def lower_qprelu(low: LowerContext, call) -> bool:
    """qnn.prelu with constant scalar scales and zero points as one EWISE kernel, or False
    (the caller refuses it, naming the op)."""
    data, alpha, *params = call.args
    if not all(isinstance(a, Constant) and const_array(a).size == 1 for a in params):
        return False
    s_in, zp_in, s_a, zp_a, s_out, zp_out = (const_array(a).reshape(-1)[0] for a in params)
    dtype = call.checked_type.dtype
    out_shape = [int(d) for d in call.checked_type.shape]
    tree = Tree(low, out_shape)
    unit = [1] * len(out_shape)

    def leaf(value, kind=np.int64):
        return tree.array_leaf(np.asarray([value], kind), unit)

    def rescale(x, real):
        q, shift = quantize_multiplier(float(real))
        kids = [x, leaf(q), leaf(shift), leaf(real, np.float64), leaf(0), leaf(int(zp_out))]
        return ["op", "requantize", kids, {"semantics": "tflite", "in_dtype": "int32"}, dtype]

    v = ["op", "subtract", [tree.kid(data), leaf(int(zp_in))], {}, "int32"]
    a = ["op", "subtract", [tree.kid(alpha), leaf(int(zp_a))], {}, "int32"]
    product = ["op", "multiply", [v, a], {}, "int32"]  # |v|, |a| <= 255: no wrap-around
    negative = ["op", "less", [v, leaf(0)], {}, "bool"]
    pos = rescale(v, F32(s_in) / F32(s_out))
    neg = rescale(product, F32(s_in) * F32(s_a) / F32(s_out))
    emit_ewise(low, call, tree, ["op", "where", [negative, neg, pos], {}, dtype])
    return True


__all__ = ["lower_qprelu"]
