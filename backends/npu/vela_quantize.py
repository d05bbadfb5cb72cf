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

The output QUANTIZE our compiler fuses into the MAC operation before it (its table,
compiler.fuse_activations; ``params["table_op"]`` names it) Vela runs as an operation of its
own: the convolution writes its int8 map to SRAM in NHCWB16 bricks, with no table in its
output stage, and a 'Quantize' (a 1x1 average pool that rescales) moves it to the output
where it lives. Vela's debug database on quantize_uint8_io (8x8x8 maps): Conv2D 896 / 576 /
1,253 / 1,157 op cycles and Quantize 816 / 464 / 740 / 622 on u55-128 / u55-256 / u65-256 /
u65-512, the Quantize's blocks 5x8x8, 6x6x8, 6x6x8, 6x6x8. The Quantize is charged as
regor's EstimateMacOpCycles for an operation both first and last (blocks.single_mac_op: its
command-issue bound carries the difference of the block's read and write, e.g. 50 and 314
cycles on the U65, whose output is in DRAM; no scale and bias fetch), its output stage at the
plain rate on the block's elements (u65-512: 36 cycles per 6x6x8 block, both cores busy):
those four figures exactly. Fitted on this one operation.
"""

from __future__ import annotations

import numpy as np

from .blocks import Query, single_mac_op
from .config import NPUConfig
from .program import NPUOp, Program, TensorDesc
from .vela_access import map_transfers, nhwc

READERS = ("CONV",)
MAC_KINDS = ("CONV", "DWCONV", "FC")


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


def quantize_after(op: NPUOp) -> bool:
    """Whether ``op`` is a MAC operation carrying a fused QUANTIZE as its table, which Vela
    runs as an operation of its own after it."""
    fused = op.params.get("table_op") == "qnn.requantize"
    return op.kind in MAC_KINDS and fused and "table" in op.arrays


def output_quantize_cycles(config: NPUConfig, out: TensorDesc, memory: str) -> float:
    """Cycles of Vela's Quantize from the MAC operation's int8 SRAM map (NHCWB16) to ``out``
    in ``memory`` (NHWC)."""
    shape = nhwc(out.shape)
    src = TensorDesc(out.shape, "int8", "sram")
    dst = TensorDesc(out.shape, out.dtype, memory)
    transfers = map_transfers(config, src, dst, ("sram", memory), bricked=True)
    q = Query("pool", shape, shape)
    return single_mac_op(config, q, config.conv_output_cycles, transfers, const_latency=0)
