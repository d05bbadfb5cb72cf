"""RESHAPE, SQUEEZE, EXPAND_DIMS and the slices (SLICE, STRIDED_SLICE) as Vela 5.2 runs them:
one MemoryCopy, charged as vela_pad.copy_cycles charges the PAD family's (regor runs a
MemoryCopy as a 1x1 pooling operation: its debug database, `--enable-debug-db`, reports mac,
ao and cmd cycles for it). Per copy: regor's EstimateMacOpCycles for an operation both first
and last (blocks.single_mac_op): over the fractional block count max(MAC, output) x blocks +
min(MAC, output), each at least the command cycles (output + MAC + D) / 4, D the difference of
one block's input and output transfers when there is more than one block, else 0, plus one
block's input and output transfers. D is what the debug database's cmd cycles carry (248-251
on u65-256 for the PAD interior and borders, SPLIT, UNPACK and SLICE writing DRAM; 572 for
the half-pixel resize's copies reading it; 0-3 on u55-256's SRAM and on every one-block copy).
Session 21 (n30x) replaced the earlier form (the first block's transfers, MACs and output in
sequence, then the other blocks, D taken as the output's write latency): 43 rows of the
one-op table moved, 41 to within 0.3% of Vela.

The map Vela copies, from its debug database on the one-op models (8x8x4 inputs):

    a slice copies its output's shape (strided_slice 3x6x3 in a 4x4x8 block: Vela 221 / 1,073
        cycles on u55-256 / u65-256; strided_slice_shrink's 3x3 output as 1x3x3: 114 / 818);
    a reshape copies its bytes as one map of 16 channels where the size allows, its rows and
        columns as near a square as they divide (256 bytes: 4x4x16, Vela's block, 320 /
        1,026 cycles; squeeze's 16 bytes: 1x1x16, 109 / 801). Read off two debug-database
        rows, not off regor's source (its graph optimiser's reshaping was not found).

regor's GraphIrOptimiser::RemoveReshape removes every reshape and inserts a MemoryCopy only
where the reshape's output is a graph output and its input a graph input or output, so the
reshape family is charged this way only there (a region's input to its output); elsewhere the
caller keeps its DMA charge (Vela charges nothing there; charging nothing was tried in session
19, n30f, and moves the integer LSTM's rows, whose lowering is not Vela's, out of their bands).
A slice is charged this way where it reads a region's input or writes its output (the one-op
slices, SPLIT and UNPACK, whose copies Vela's figures confirm); the slices between two
operations are the integer LSTM's own lowering (its gates' int16 slices), not Vela's, and keep
their charge.
"""

from __future__ import annotations

from .config import NPUConfig
from .lstm_cycles import lstm_op
from .program import TensorDesc
from .vela_access import flat_shape
from .vela_pad import copy_cycles

RESHAPES = ("reshape", "squeeze", "expand_dims")
SLICES = ("strided_slice",)
MAC_KINDS = ("CONV", "DWCONV", "FC")


def copy_shape(name: str, out: TensorDesc) -> tuple[int, int, int]:
    """The h x w x c map Vela's MemoryCopy moves for operation ``name`` writing ``out``."""
    dims = tuple(int(d) for d in out.shape)
    if name in SLICES:
        hwc = (1, 1, *dims)[-3:] if len(dims) < 4 else dims[-3:]
        return tuple(int(d) for d in hwc)
    return flat_shape(dims)


def copies_as_vela(name: str, reads_io: bool, writes_output: bool) -> bool:
    """Whether operation ``name`` is charged as Vela's MemoryCopy; ``reads_io``: it reads a
    region's input or output, ``writes_output``: it writes a region's output."""
    if name in SLICES:
        return reads_io or writes_output
    return name in RESHAPES and reads_io and writes_output


def _folded_into(op, program):
    """The reshape-family operation that reads ``op``'s output (its only reader) and writes a
    region output, or None: regor removes that reshape and ``op`` writes the output itself."""
    readers = [r for r in program.ops if op.output in r.inputs]
    if len(readers) != 1 or op.output in program.outputs:
        return None
    r = readers[0]
    name = r.params.get("op")
    return r if r.kind == "UNIT" and name in RESHAPES and r.output in program.outputs else None


def writes_through(op, program):
    """The region output a slice charged as a copy writes, through a reshape regor removes
    (strided_slice_shrink, UNPACK: a slice, then a reshape to the output), or None."""
    r = _folded_into(op, program)
    return None if r is None else r.output


def folded(op, program) -> bool:
    """Whether ``op`` is a reshape regor removes because its input's producer, a slice on a
    region's input, writes the region's output directly (``writes_through``)."""
    if op.params.get("op") not in RESHAPES or not op.inputs:
        return False
    producers = [p for p in program.ops if p.output == op.inputs[0]]
    if len(producers) != 1:
        return False
    p = producers[0]
    if p.kind in MAC_KINDS and not lstm_op(p, program.tensors[p.output]):
        return _folded_into(p, program) is op  # a MAC operation writes the output itself
    name = p.params.get("op")
    if p.kind != "UNIT" or name not in SLICES or not p.inputs:
        return False
    reads_io = p.inputs[0] in (*program.inputs, *program.outputs)
    return reads_io and _folded_into(p, program) is op


def copy_as_vela(config: NPUConfig, name: str, mapped: TensorDesc, io) -> float:
    """Cycles of the one MemoryCopy Vela runs for ``name``: ``mapped``, the map it moves as
    ``copy_shape`` reads it (a slice's output, a reshape's input or output), ``io`` the
    memories it reads and writes."""
    return copy_cycles(config, copy_shape(name, mapped), io[0], io[1], mapped.dtype)
