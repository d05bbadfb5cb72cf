"""QUANTIZE operations Vela 5.2 folds into the operation that reads them, read off its debug
database (`vela --enable-debug-db`, session 20, n30m; the figures are in
tests/backends/npu/test_npu_quantize_vela.py):

    quantize_uint8_io (a uint8 8x8x4 input, QUANTIZE to int8, a 3x3 CONV_2D with ReLU, QUANTIZE
    back to uint8): Vela's perf table has no operation for the input QUANTIZE: its Conv2D
    reads the uint8 graph input itself (the tensors table: the Conv2D's input is the UInt8
    `x0`), the rescale moved into the convolution's input quantization, as regor's
    GraphIrOptimiser::FuseRescale moves a Rescale with one reader into that reader's input.
    The output QUANTIZE stays an operation of its own: Conv2D 576 / 1,253 cycles (writing
    int8 to SRAM), Quantize 464 / 740 (block 6x6x8) on u55-256 / u65-256. Before this, we
    charged the input QUANTIZE 620 / 843 and the convolution, with the output QUANTIZE in its
    output stage, 960 / 1,136.

So a QUANTIZE that reads a region's input and whose only reader is a MAC operation costs
nothing, a MAC operation on int8 maps writing a uint8 region output is charged as writing
int8 to SRAM plus Vela's Quantize; a QUANTIZE anywhere else keeps its 1x1 average pool
(cycles._compute).
"""

from __future__ import annotations

import dataclasses

from .blocks import Query, mac_cycles
from .config import NPUConfig
from .program import NPUOp, Program, TensorDesc
from .vela_access import map_transfer

MAC_READERS = ("CONV", "DWCONV", "FC")


def quantize_folded(op: NPUOp, program: Program) -> bool:
    """Whether ``op`` is a QUANTIZE of a region's input whose one reader, a MAC operation,
    reads the input itself in Vela's plan."""
    if op.kind != "LUT" or op.params.get("op") != "qnn.requantize" or len(op.inputs) != 1:
        return False
    if op.inputs[0] not in program.inputs or op.output in program.outputs:
        return False
    readers = [r for r in program.ops if op.output in r.inputs]
    return (
        len(readers) == 1 and readers[0].kind in MAC_READERS and readers[0].inputs[0] == op.output
    )


def quantize_split(op: NPUOp, program: Program) -> bool:
    """Whether ``op`` is a MAC operation on int8 maps whose output QUANTIZE to a uint8 4-D
    region output we fuse into its output stage and Vela runs as an operation of its own (the
    convolution writes int8 to SRAM, a Quantize reads it and writes the output)."""
    if op.kind not in MAC_READERS or op.output not in program.outputs or not op.inputs:
        return False
    ifm, ofm = program.tensors[op.inputs[0]], program.tensors[op.output]
    return ifm.dtype == "int8" and ofm.dtype == "uint8" and len(ofm.shape) == 4


def split_quantize_cycles(config: NPUConfig, out: TensorDesc) -> float:
    """Cycles of Vela's output Quantize (``quantize_split``): a 1x1 average pool in the block
    model, the first block unoverlapped, reading the int8 map from SRAM and writing ``out``
    where it lives (464 cycles, block 6x6x8, on u55-256 for 8x8x8, as Vela; 693 against 740
    on u65-256)."""
    shape = tuple(out.shape[1:])
    mid = dataclasses.replace(out, dtype="int8", memory="sram")
    transfer = map_transfer(config, mid, out, ("sram", out.memory))
    return mac_cycles(
        config, Query("pool", shape, shape), config.conv_output_cycles, transfer, fill=True
    )[0]
