"""TRANSPOSE_CONV as Vela 5.2 runs it: one convolution that reads its input upscaled.

Our lowering (partita/passes/transpose_conv.py) inserts zeros between the input's pixels
(``nn.dilate``, a DMA operation of its own) and runs the flipped kernel's ordinary convolution
on the result. Vela runs the same convolution with the hardware's resampling mode: the input is
read at its own size and upscaled as it enters the MAC array (``vela --verbose-schedule``: IFM
stripe 8x8x4 for a 16x16x8 output, IFM block 10x10 for a 16x16 output block; regor's
RequiredInputSize divides the rows a block reads by the upscaling factor). So the zero
insertion costs nothing, and the convolution's input blocks, its block choice and its input
reads are those of the map before upscaling (blocks.Query.upscale).
"""

from __future__ import annotations

from .program import NPUOp, Program

UPSCALE = 2  # the hardware's resampling factor (TRANSPOSE_CONV with stride 2)


def _dilate_factor(op: NPUOp) -> int | None:
    if op.kind != "UNIT" or op.params.get("op") != "nn.dilate":
        return None
    strides = op.params["attrs"]["strides"]
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1 or strides[1] != strides[2]:
        return None
    return strides[1] if strides[1] == UPSCALE else None


def _only_reader(program: Program, t: int) -> NPUOp | None:
    readers = [op for op in program.ops if t in op.inputs]
    return readers[0] if len(readers) == 1 else None


def folded_dilate(op: NPUOp, program: Program) -> bool:
    """A zero insertion only a convolution reads: Vela's resampling does it (0 cycles)."""
    if _dilate_factor(op) is None or op.output in program.outputs:
        return False
    reader = _only_reader(program, op.output)
    return reader is not None and reader.kind == "CONV" and reader.inputs[0] == op.output


def upscaled_input(op: NPUOp, program: Program) -> tuple[int, int] | None:
    """(the map before zero insertion, the factor) for a convolution that reads a folded
    zero insertion's output; None otherwise."""
    if op.kind != "CONV" or not op.inputs:
        return None
    producer = next((o for o in program.ops if o.output == op.inputs[0]), None)
    if producer is None or not folded_dilate(producer, program):
        return None
    return producer.inputs[0], _dilate_factor(producer)
