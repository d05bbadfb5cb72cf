"""qnn.softmax of int16 (TFLite's 16x8 SOFTMAX) over the last axis: QSOFTMAX16."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ops.emulation.tflite_int16 import softmax_multiplier, softmax_tables

from .qmean import scalar_constant
from .registry import EDGE, lowers

if TYPE_CHECKING:
    from .context import LowerContext


@lowers("qnn.softmax", priority=EDGE)
def lower_qsoftmax16(low: LowerContext, call) -> bool:
    """int16 data, zero points 0 and output scale 1/32768 (else the interpreter's error)."""
    data, a = call.args[0], call.attrs
    shape = [int(d) for d in data.checked_type.shape]
    if data.checked_type.dtype != "int16" or a.semantics == "onnx" or not shape:
        return False
    if not all(scalar_constant(c) for c in call.args[1:]) or a.axis % len(shape) != len(shape) - 1:
        return False
    s_in, zp_in, s_out, zp_out = (np.asarray(c.data).reshape(-1)[0] for c in call.args[1:])
    if int(zp_in) or int(zp_out) or abs(float(s_out) * 32768 - 1) > 0.001:
        return False
    mult, shift = softmax_multiplier(float(s_in), a.beta)
    exp_lut, recip_lut = softmax_tables()
    params = {"rows": math.prod(shape[:-1]), "n": shape[-1], "mult": int(mult), "shift": int(shift)}
    arrays = {"exp_lut": exp_lut.astype(np.int32), "recip_lut": recip_lut.astype(np.int32)}
    low.emit(Kind.QSOFTMAX16, call, [low.src(data)], params, arrays)
    return True
