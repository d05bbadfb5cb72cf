"""The input QUANTIZE Vela 5.2 runs no operation for: a region's uint8 input shifted to int8
at the same scale, onto zero point 0 (uint8 zero point 128: the table is x - 128), read by one
convolution. The convolution then reads the uint8 map itself (Vela's debug database: its
Conv2D's ifm_dtype UInt8, the graph input in NHWC where it lives), so the QUANTIZE costs
nothing and the convolution is charged as reading the region's input.

Found by running Vela on eleven TFLite models with a uint8 input QUANTIZE before a 3x3
convolution (`vela --enable-debug-db`, u55-256; the QUANTIZEs all pure shifts at equal
scales): it is folded in the seven whose int8 zero point is 0 (8x8, 16x16 and 96x96 maps, 3 and
4 channels, strides 1 and 2, SAME and VALID: quantize_uint8_io among them) and runs as an
operation in the four whose converter picked zero point -1 (uint8 127; 8x8 stride 2, 32x32,
96x96 stride 2, and mobilenet_v2_035_96_uint8's, 14,016 cycles). Which regor pass folds it was
not read in its source; the rule is those eleven models' and is not applied to other readers
(depthwise, fully connected) nor to 16-bit maps.
"""

from __future__ import annotations

import numpy as np

from .program import NPUOp, Program

READERS = ("CONV",)


def _shift(op: NPUOp) -> bool:
    p = op.params
    if op.kind != "LUT" or p.get("op") != "qnn.requantize" or len(op.inputs) != 1:
        return False
    if (p.get("in_dtype"), p.get("out_dtype"), p.get("zero_points")) != ("uint8", "int8", [128, 0]):
        return False
    return bool(np.array_equal(op.arrays["table"], np.arange(256) - 128))


def folded_quantize(op: NPUOp, program: Program) -> bool:
    """Whether ``op`` is a region input's QUANTIZE Vela folds into its one convolution."""
    if not _shift(op) or op.inputs[0] not in program.inputs or op.output in program.outputs:
        return False
    readers = [o for o in program.ops if op.output in o.inputs]
    return len(readers) == 1 and readers[0].kind in READERS and readers[0].inputs == [op.output]


def read_through(op: NPUOp, program: Program) -> int | None:
    """The region input a convolution reads through a folded QUANTIZE, or None."""
    if op.kind not in READERS or not op.inputs:
        return None
    src = next((o for o in program.ops if o.output == op.inputs[0]), None)
    return src.inputs[0] if src is not None and folded_quantize(src, program) else None
