"""qnn.leaky_relu of int16 data ("tflite": reference_ops::QuantizeLeakyRelu), which int8.py's
256-entry LUT does not take, as an EWISE tree of existing steps:

    x < zp_in ? requantize(x; slope multiplier) : requantize(x; identity multiplier)

each requantize the EWISE "tflite" step (zp_out + MultiplyByQuantizedMultiplier(x - zp_in, q,
shift), saturated to int16), its (q, shift) quantized here as the reference does it
(partita/ops/emulation/activation_kernels.tflite_leaky_relu: float32 ratios s_in / s_out and
s_in * alpha / s_out, each through QuantizeMultiplier), so the bits are the interpreter's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import refuse

from partita.ir import Constant
from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier

from .float_ops import Tree, emit_ewise
from .registry import EDGE, lowers
from .tables import const_array

if TYPE_CHECKING:
    from .context import LowerContext

F32 = np.float32


@lowers("qnn.leaky_relu", priority=EDGE)
def lower_qleaky16(low: LowerContext, call) -> bool:
    """int16 "tflite" qnn.leaky_relu with constant scalar parameters as one EWISE kernel, or
    False (8-bit data: the LUT; run-time parameters: refused by the caller)."""
    data = call.args[0]
    if call.attrs.semantics != "tflite" or data.checked_type.dtype != "int16":
        return False
    if not all(isinstance(a, Constant) and const_array(a).size == 1 for a in call.args[1:]):
        return False
    s_in, zp_in, s_out, zp_out = (const_array(a).reshape(-1)[0] for a in call.args[1:])
    if zp_in or zp_out:  # the reference raises for these
        refuse(call, f"int16 needs zero points 0, as TFLite (got {zp_in} and {zp_out})")
    ratios = (F32(s_in) / F32(s_out), F32(s_in) * F32(call.attrs.alpha) / F32(s_out))
    out_shape = [int(d) for d in call.checked_type.shape]
    tree = Tree(low, out_shape)
    x = tree.kid(data)
    unit = [1] * len(out_shape)

    def leaf(value, dtype=np.int64):
        return tree.array_leaf(np.asarray([value], dtype), unit)

    def rescale(real):
        q, shift = quantize_multiplier(float(real))
        kids = [x, leaf(q), leaf(shift), leaf(real, np.float64), leaf(0), leaf(0)]
        return ["op", "requantize", kids, {"semantics": "tflite", "in_dtype": "int16"}, "int16"]

    negative = ["op", "less", [x, leaf(0)], {}, "bool"]
    root = ["op", "where", [negative, rescale(ratios[1]), rescale(ratios[0])], {}, "int16"]
    emit_ewise(low, call, tree, root)
    return True


__all__ = ["lower_qleaky16"]
