"""CONCATENATION (and PACK, which we import as reshapes and a concatenation) and TRANSPOSE as
Vela 5.2 runs them, read off its debug database (`vela --enable-debug-db`: perf_debug's shapes,
offsets, memories and transpose type, perf's op cycles; one-op models of
tests/models/tflite/ops, u55-256 and u65-256, figures in test_npu_layout_vela.py):

    CONCATENATION: one MemoryCopy per input, written into the output at the input's offset
        (concat_same_scale: two 8x8x4 copies into 8x8x8, 446 / 1,354 cycles each on u55-256 /
        u65-256, the PAD interior's figure). An input of another scale is rescaled by its copy
        (concat_diff_scale: Vela's 'Quantize' and 'Relu6' copies cost the same 446 cycles), so
        a QUANTIZE feeding only the concatenation is folded into that copy.
    PACK: the copies read the packed maps where their slices read them (pack: two copies of an
        8x8x2 channel slice of the 8x8x4 input into the 2x8x8x2 output, 370 / 1,236 cycles
        each, SPLIT's half): the slices and reshapes feeding only the concatenation are
        folded into its copies (0 cycles).
    TRANSPOSE: the hardware writes three permutations of an NHWC map through its output
        strides, NWHC, NHCW and NCWH; regor decomposes NWCH into NHCW then NCWH and NCHW
        into NCWH then NHCW, the intermediate in SRAM (transpose, perm 0,3,1,2 on 8x8x4: NCWH
        160 / 841 cycles, then NHCW 64 / 306). Vela charges a transpose no MAC, output or
        command cycles (its debug database: ao 0, cmd 0), only its memories' access, as
        regor's EthosU55Performance::MeasureCycleCost costs a compound Transpose: the slower
        of the input's read (its bytes in the bursts of its NHWC shape a block at a time,
        vela_access.burst_factor, the block of a 1x1 pool of the input, over the memory's
        bandwidth, plus its read latency: 32 cycles in SRAM, 500 on the U65's DRAM) and the
        output's write (likewise, plus the write latency: 32 in SRAM, 250 on the DRAM). The
        four figures above and BATCH_MATMUL's transposes (56 / 564, 44 / 532) come out exact.
"""

from __future__ import annotations

import numpy as np

from .blocks import Query, find_block, round_up
from .config import NPUConfig
from .program import TensorDesc
from .vela_access import (
    SHALLOW_DEPTH,
    bandwidth,
    burst_factor,
    is_elementwise,
    memory_latency,
    nhwc,
)
from .vela_pad import copy_cycles

CONCATS = ("concatenate", "qnn.concatenate")
# the source operators (an NPUOp's name: "npu.concat (CONCATENATION #3)") whose concatenations
# and transposes Vela runs as this module charges them; those of our own lowerings of other
# operators (SUM's transpose, the integer LSTM's transposes and concatenation) are not Vela's
# and keep their charge
CONCAT_SOURCES = ("CONCATENATION", "PACK", "CONCAT")
TRANSPOSE_SOURCES = ("TRANSPOSE",)
# operations a concatenation's copy absorbs when they feed only it: views and reshapes (PACK's
# slices and reshapes) and a QUANTIZE (the copy rescales)
FEEDERS = ("reshape", "squeeze", "expand_dims", "strided_slice")
RESCALE = "qnn.requantize"

# the hardware's transposes of an NHWC map (regor's TransposeType), as permutations of the
# (H, W, C) axes, and regor's decomposition of the two it does in two steps
HW_TRANSPOSES = {(1, 0, 2): "NWHC", (0, 2, 1): "NHCW", (2, 1, 0): "NCWH"}
TWO_STEP = {(1, 2, 0): ((0, 2, 1), (2, 1, 0)), (2, 0, 1): ((2, 1, 0), (0, 2, 1))}


def source_operator(op) -> str:
    """The source operator an operation was lowered from ("" if its name does not say)."""
    name = op.name
    if "(" not in name:
        return ""
    return name[name.rindex("(") + 1 :].split("#")[0].strip().upper()


def _readers(program, t: int) -> list:
    return [r for r in program.ops if t in r.inputs]


def _feeds_concat(op, program) -> bool:
    """Whether ``op`` is absorbed into the copy of a concatenation it alone feeds."""
    if op.output in program.outputs or len(op.inputs) != 1:
        return False
    name = op.params.get("op")
    shape_only = op.kind == "UNIT" and name in FEEDERS
    rescale = op.kind in ("LUT", "UNIT") and name == RESCALE  # int16: a UNIT
    if not (shape_only or rescale):
        return False
    readers = _readers(program, op.output)
    if len(readers) != 1:
        return False
    r = readers[0]
    if r.kind == "UNIT" and r.params.get("op") in CONCATS:
        return source_operator(r) in CONCAT_SOURCES
    return _feeds_concat(r, program) and r.inputs == [op.output]


def feeds_concat_copies(op, program) -> bool:
    """Whether every reader of ``op``'s output is a concatenation's copy (or folded into
    one): Vela then runs ``op`` on its flat shape, as between a region's maps
    (concat_diff_scale's MUL and TANH on 4x4x16, 96 and 320 cycles on u55-256)."""
    readers = _readers(program, op.output)
    return (
        bool(readers)
        and op.output not in program.outputs
        and all(
            (
                r.kind == "UNIT"
                and r.params.get("op") in CONCATS
                and source_operator(r) in CONCAT_SOURCES
            )
            or folded_into_concat(r, program)
            for r in readers
        )
    )


def folded_into_concat(op, program) -> bool:
    """Whether ``op`` costs nothing because Vela's concatenation copy does its work."""
    return _feeds_concat(op, program)


def _source_memory(t: int, program) -> str:
    """Where the copy of concatenation input ``t`` reads: the memory of the map at the start of
    the folded chain feeding it (a region input where it lives, any other map in SRAM)."""
    while True:
        producers = [p for p in program.ops if p.output == t]
        if len(producers) != 1 or not _feeds_concat(producers[0], program):
            break
        t = producers[0].inputs[0]
    return program.tensors[t].memory if t in program.inputs else "sram"


def concat_as_vela(config: NPUConfig, op, program) -> float:
    """Cycles of a concatenation as Vela's copies, one per input into the output."""
    dst = program.tensors[op.output].memory if op.output in program.outputs else "sram"
    cycles = 0.0
    for t in op.inputs:
        desc = program.tensors[t]
        src = _source_memory(t, program)
        cycles += copy_cycles(config, nhwc(desc.shape), src, dst, desc.dtype)
    return cycles


def transpose_steps(shape: tuple, axes) -> list[tuple[int, int, int]] | None:
    """The (H, W, C) permutations Vela's hardware transposes apply, in order, for a
    transpose of ``shape`` by ``axes``; None where the batch axis (the first) moves or the
    map has more than one batch: not modelled (the integer LSTM's time-major transposes,
    (T, B, I) to (B, T, I), are our lowering and keep their charge)."""
    rank = len(shape)
    axes = [int(a) % rank for a in axes]
    if rank < 3 or axes[0] != 0 or axes[:-3] != list(range(rank - 3)):
        return None
    if int(np.prod(shape[:-3])) != 1:
        return None
    perm = tuple(a - (rank - 3) for a in axes[-3:])
    if perm == (0, 1, 2):
        return []
    if perm in HW_TRANSPOSES:
        return [perm]
    return list(TWO_STEP[perm])


def hardware_transpose_cycles(
    config: NPUConfig, ifm: tuple, ofm: tuple, io, item: int, bound: bool = True
) -> float:
    """One hardware transpose as regor costs it (EthosU55Performance::MeasureCycleCost for a
    Transpose, a compound operation): the slower of reading the input (its elements in the
    bursts of its NHWC shape over the block, / bandwidth + the memory's read latency) and
    writing the output (likewise in the output's bursts + the write latency), at least each
    memory's access (its reads and writes together, no latency: the scheduler's bound; Vela's
    160 x 80 transpose of sum_hw_tall, 4,800 cycles on u55-256, is that bound; ``bound``
    False: without it, the NPU cycles Vela's total counts: BATCH_MATMUL's 64x6 transpose,
    384 op cycles and 224 NPU cycles on u55-256, vela_matmul.py). A 16-bit
    input is read a block of regor's 16-bit input depth at a time (up to 16 channels, in 4s:
    the depth multiplier's seven 16-bit transposes in the 16x8 dwconv_m2 and
    dwconv_m2_in_graph, ifm_block_c 4, 8 or 16 in Vela's debug database, its op cycles
    exactly on u55-256)."""
    block = find_block(config, Query("pool", ifm, ifm)).ofm
    read = block if item == 1 else (*block[:2], round_up(min(ifm[2], 16), 4))
    nbytes = int(np.prod(ifm)) * item
    ends, access = [], {}
    for memory, shape, write in ((io[0], ifm, False), (io[1], ofm, True)):
        moved = nbytes * burst_factor(config, memory, shape, block if write else read, item, write)
        ends.append(moved / bandwidth(config, memory) + memory_latency(config, memory, write))
        access[memory] = access.get(memory, 0.0) + moved
    # the scheduler's bound: each memory's transfers, read and write together, no latency
    if not bound:
        return max(ends)
    return max(*ends, *(n / bandwidth(config, m) for m, n in access.items()))


def transpose_as_vela(config: NPUConfig, ifm: TensorDesc, axes, io) -> float | None:
    """Cycles of a transpose as Vela's hardware transposes (module docstring), or None where
    the batch axes move; ``io``: the memories of its input and output maps."""
    steps = transpose_steps(tuple(ifm.shape), axes)
    if steps is None:
        return None
    item = np.dtype(ifm.dtype).itemsize
    shape = nhwc(ifm.shape)
    if not steps:  # an identity: one copy
        return copy_cycles(config, shape, io[0], io[1], ifm.dtype)
    cycles = 0.0
    for i, perm in enumerate(steps):
        out = tuple(shape[p] for p in perm)
        src = io[0] if i == 0 else "sram"
        dst = io[1] if i == len(steps) - 1 else "sram"
        cycles += hardware_transpose_cycles(config, shape, out, (src, dst), item)
        shape = out
    return cycles


def layout_as_vela(config: NPUConfig, op, program, ifm: TensorDesc, io) -> float | None:
    """Cycles of ``op`` as Vela runs it if it is a concatenation, an operation folded into
    one, or a transpose this module models (module docstring); None for any other."""
    name = op.params.get("op")
    if op.kind not in ("UNIT", "LUT"):
        return None
    if folded_into_concat(op, program):
        return 0.0
    if op.kind == "UNIT" and name in CONCATS and source_operator(op) in CONCAT_SOURCES:
        return concat_as_vela(config, op, program)
    transposes = source_operator(op) in TRANSPOSE_SOURCES
    if op.kind == "UNIT" and name == "transpose" and len(op.inputs) == 1 and transposes:
        return transpose_as_vela(config, ifm, op.params["attrs"]["axes"], io)
    return None


# the operations whose maps Vela keeps in NHCWB16 bricks between two of them: the MAC and
# table operations, the pools, MEAN, QUANTIZE, PReLU and the native elementwise ones
BRICK_UNITS = ("qnn.avg_pool2d", "nn.max_pool2d", "qnn.mean", "qnn.requantize", "qnn.prelu")


def _bricks(op) -> bool:
    if op.kind != "UNIT":
        return True
    return is_elementwise(op) or op.params.get("op") in BRICK_UNITS


def bricked_map(program, t: int) -> bool:
    """Whether Vela keeps map ``t`` in NHCWB16 bricks: a map between two operations whose
    producer and readers all keep bricks (a region's maps are NHWC; so are those a transpose,
    concatenation, reshape or copy reads or writes: the depth multiplier's pieces write
    their NHWC slices for the transposes, 2x8x8x8 int16 in the 16x8 dwconv_m2_in_graph)."""
    if t in program.inputs or t in program.outputs:
        return False
    ops = [op for op in program.ops if op.output == t or t in op.inputs]
    return bool(ops) and all(_bricks(op) and not deepened(program, op) for op in ops)


def deepened(program, op) -> bool:
    """Whether Vela runs elementwise ``op`` on its maps deepened to 16 channels
    (vela_access.deepens: an 8-bit output shallower than 8 channels, more than 16 elements,
    no operand broadcasting). Its maps then keep no bricks: the 3x3 convolution of
    rescale_in_graph reads the ADD's 64x64x3 map as NHWC (Vela 5.2's per-layer report: 6,454
    cycles on u65-512, ours 5,112 reading bricks)."""
    if not is_elementwise(op):
        return False
    out = program.tensors[op.output]
    elems = int(np.prod(out.shape))
    sizes = [int(np.prod(program.tensors[t].shape)) for t in op.inputs]
    sizes += [a.size for a in op.arrays.values() if a.size > 1]
    shallow = nhwc(out.shape)[2] < SHALLOW_DEPTH and elems > 16
    wide = all(np.dtype(program.tensors[t].dtype).itemsize == 2 for t in (*op.inputs, op.output))
    return shallow and not wide and not any(1 < n < elems for n in sizes)


def evicted_maps(program, config: NPUConfig) -> set[int]:
    """The maps between two operations that Vela 5.2 moves back off-chip: regor's
    FastStorageAllocator::ElementwiseSanitizer evicts from SRAM a binary elementwise
    operation's input when its other input is a map that is not there (a region's input in
    the U65's DRAM), so that both are read from the same memory (the 16x8 maximum on
    u65-256, its debug database: the QUANTIZE writes its NHCWB16 map to DRAM, 1,109 op cycles,
    and the MAXIMUM reads both inputs from there, 554)."""
    if config.spill_memory == "none":
        return set()
    far = set()
    for op in program.ops:
        if not is_elementwise(op) or len(op.inputs) != 2:
            continue
        for t, other in (op.inputs, op.inputs[::-1]):
            elsewhere = other in program.inputs and program.tensors[other].memory != "sram"
            if elsewhere and t not in program.inputs and t not in program.outputs:
                far.add(t)
    return far
