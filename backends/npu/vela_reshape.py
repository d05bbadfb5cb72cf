"""The reshapes regor removes around a FULLY_CONNECTED operation
(GraphIrOptimiser::RemoveReshape: Vela 5.2 keeps no reshape; it inserts a MemoryCopy only where
a reshape reads a graph input or output and writes a graph output, vela_copy.py). A
reshape-family operation (RESHAPE, SQUEEZE, EXPAND_DIMS) between a region's input and the one
FULLY_CONNECTED that reads it, or between one and a region's output, is therefore free, and
the FC reads the region's input (writes its output) where that lives: FULLY_CONNECTED with
keep_num_dims (our lowering: a reshape to rows, the FC, a reshape back) is one operation in
Vela, reading and writing DRAM on the U65 (its first block's transfers carry DRAM's
latencies).

Convolutions are left out: ours reshape to their 4-D maps where Vela's operation differs (SUM
run as a convolution, not Vela's ReduceSum; moving those reshapes took sum_hw_tall further
from Vela's figure). Reshapes between two operations keep our DMA charge (vela_copy.py's
note: charging nothing there moves the integer LSTM's rows, whose lowering is not Vela's).
"""

from __future__ import annotations

from .program import NPUOp, Program
from .vela_copy import RESHAPES

MAC_KINDS = ("FC",)  # a convolution needs its 4-D maps: ours reshape to them (SUM's lowering)


def _fc(op: NPUOp, program: Program) -> bool:
    """A FULLY_CONNECTED of 8-bit output: the integer LSTM's FCs (int16 and int32 outputs) are
    our lowering, not Vela's, and keep the reshapes around them (test_npu_lstm.py's bands)."""
    return op.kind in MAC_KINDS and program.tensors[op.output].dtype in ("int8", "uint8")


def _is_reshape(op: NPUOp) -> bool:
    return op.kind == "UNIT" and op.params.get("op") in RESHAPES and len(op.inputs) == 1


def _readers(program: Program, t: int) -> list[NPUOp]:
    return [op for op in program.ops if t in op.inputs]


def _producer(program: Program, t: int) -> NPUOp | None:
    return next((op for op in program.ops if op.output == t), None)


def _input_side(op: NPUOp, program: Program) -> bool:
    """A reshape of a region's input whose only reader is a FULLY_CONNECTED's input."""
    if not _is_reshape(op) or op.inputs[0] not in program.inputs:
        return False
    if op.output in program.outputs:
        return False
    readers = _readers(program, op.output)
    return len(readers) == 1 and _fc(readers[0], program) and readers[0].inputs[0] == op.output


def _output_side(op: NPUOp, program: Program) -> bool:
    """A reshape to a region's output of a FULLY_CONNECTED's output that only it reads."""
    if not _is_reshape(op) or op.output not in program.outputs:
        return False
    producer = _producer(program, op.inputs[0])
    if producer is None or not _fc(producer, program) or op.inputs[0] in program.outputs:
        return False
    return _readers(program, op.inputs[0]) == [op]


def removed(op: NPUOp, program: Program) -> bool:
    """Whether regor removes this reshape next to a FULLY_CONNECTED (0 cycles)."""
    return _input_side(op, program) or _output_side(op, program)


def mac_io(op: NPUOp, program: Program) -> tuple[int | None, int | None]:
    """(the region input a FULLY_CONNECTED reads through a removed reshape, the region output it
    writes through one); None where it does not."""
    if not _fc(op, program) or not op.inputs:
        return None, None
    src = _producer(program, op.inputs[0])
    read = src.inputs[0] if src is not None and _input_side(src, program) else None
    readers = _readers(program, op.output)
    write = readers[0].output if len(readers) == 1 and _output_side(readers[0], program) else None
    return read, write
