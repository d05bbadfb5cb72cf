"""The data movement of a depthwise convolution with a depth multiplier as Vela 5.2 runs it.

legalize_dwconv.py rewrites DEPTHWISE_CONV_2D with multiplier M as Vela does: M depthwise
convolutions writing the M batch slices of an (M, H, W, C) map, then a transpose (1, 2, 3, 0)
to (H, W, C, M), the output in memory. Our lowering spells the slices' assembly as a
concatenation on axis 0 and the output as a reshape of the transpose; Vela has neither (its
convolutions write their slices of one map, and the reshape is a view), so both cost nothing
here. Vela runs the 4-D transpose as seven hardware transposes of 3-D views of the map, each
costed as regor costs a compound Transpose (vela_layout.hardware_transpose_cycles). The seven
steps, read off Vela's debug database (`vela --enable-debug-db`: perf_debug's shapes and
transpose_type, perf's op_cycles; dwconv_m2_s1_valid, dwconv_m2_s2_valid_relu and
dwconv_m2_in_graph of tests/models/tflite/ops, u55-256 and u65-256), as (hardware transpose,
how the current 4-D axes a0..a3 are grouped into the 3-D view's H | W | C):

    NWHC  a0 | a1 | a2 a3        NCWH  a0 | a1 a2 | a3        NHCW  a0 a1 | a2 | a3
    NWHC  a0 | a1 | a2 a3        NHCW  a0 a1 | a2 | a3
    NHCW  a0 a1 | a2 | a3        NWHC  a0 | a1 | a2 a3

(left column first, then the right; the first two undo each other, as Vela emits them). For
(2, 6, 6, 4): 1x2x6x24 -> 1x6x2x24, 1x6x2x24 -> 1x2x6x24, 1x12x6x4 -> 1x12x4x6, 1x2x24x6 ->
1x6x24x2, 1x36x4x2 -> 1x36x2x4, 1x6x6x8 (NWHC), 1x36x2x4 -> 1x36x4x2: 108, 108, 288, 288, 288,
72 and 288 cycles on u55-256 (1,440), Vela's op cycles exactly. Every step reads and writes
SRAM but the last, which writes the output where the reshape's output lives (a region's
output: the U65's DRAM, 634 cycles there against 144 in SRAM).

On 16-bit maps Vela runs the pieces' fused activation once, after the transposes, on the whole
(H, W, C x M) output (its debug database, the 16x8 dwconv_m2 and dwconv_m2_in_graph: a 'Relu'
operation, mac_count one per element, 604 and 1,556 op cycles on u55-256, 1,040 and 1,412 on
u65-256, blocks 4x6x8 and 6x6x16); the pieces write their slices without it. We charge it as
a 16-bit 1x1 pool in the block model (our blocks are Vela's on both), from the transposes'
NHWC SRAM map to the output (NHCWB16 bricks between two operations): 592 / 1,520 on u55-256,
929 / 1,376 on u65-256. Fitted on these two models (one per map size).
"""

from __future__ import annotations

import numpy as np

from .blocks import Query, mac_cycles
from .config import NPUConfig
from .program import TensorDesc
from .vela_access import map_transfer
from .vela_layout import HW_TRANSPOSES, hardware_transpose_cycles, source_operator

SOURCE = "DEPTHWISE_CONV_2D"
AXES = (1, 2, 3, 0)
# (the 3-D permutation, the sizes of the view's H, W and C groups in 4-D axes) per step
_NWHC, _NHCW, _NCWH = (1, 0, 2), (0, 2, 1), (2, 1, 0)
STEPS = (
    (_NWHC, (1, 1, 2)),
    (_NWHC, (1, 1, 2)),
    (_NHCW, (2, 1, 1)),
    (_NCWH, (1, 2, 1)),
    (_NHCW, (2, 1, 1)),
    (_NWHC, (1, 1, 2)),
    (_NHCW, (2, 1, 1)),
)


def transpose_views(shape) -> list[tuple[tuple, tuple, str]]:
    """Vela's seven hardware transposes of the (M, H, W, C) map ``shape`` to (H, W, C, M): per
    step its 3-D input view, its output and the hardware transpose's name."""
    axes = [int(d) for d in shape]
    steps = []
    for perm, groups in STEPS:
        cuts = np.cumsum((0, *groups))
        parts = [axes[cuts[i] : cuts[i + 1]] for i in range(3)]
        view = tuple(int(np.prod(p)) for p in parts)
        steps.append((view, tuple(view[p] for p in perm), HW_TRANSPOSES[perm]))
        axes = [d for p in perm for d in parts[p]]
    assert axes == [int(shape[a]) for a in AXES], (shape, axes)
    return steps


def _is_multiplier_op(op, name: str) -> bool:
    return op.kind == "UNIT" and op.params.get("op") == name and source_operator(op) == SOURCE


def _transpose_of(op) -> bool:
    axes = op.params.get("attrs", {}).get("axes")
    return _is_multiplier_op(op, "transpose") and tuple(int(a) for a in axes) == AXES


def depth_multiplier_as_vela(config: NPUConfig, op, program) -> float | None:
    """Cycles of a depth multiplier's concatenation, transpose or reshape as Vela runs them
    (module docstring): the concatenation and the reshape 0, the transpose Vela's seven
    hardware transposes; None for any other operation."""
    producers = {o.output: o for o in program.ops}
    if _is_multiplier_op(op, "concatenate") and len(op.inputs) > 1:
        readers = [r for r in program.ops if op.output in r.inputs]
        return 0.0 if len(readers) == 1 and _transpose_of(readers[0]) else None
    if _is_multiplier_op(op, "reshape") and len(op.inputs) == 1:
        src = producers.get(op.inputs[0])
        return 0.0 if src is not None and _transpose_of(src) else None
    if not _transpose_of(op) or len(op.inputs) != 1:
        return None
    ifm = program.tensors[op.inputs[0]]
    if len(ifm.shape) != 4:
        return None
    readers = [r for r in program.ops if op.output in r.inputs]
    out = op.output
    if len(readers) == 1 and _is_multiplier_op(readers[0], "reshape"):
        out = readers[0].output
    dst = program.tensors[out].memory if out in program.outputs else "sram"
    item = np.dtype(ifm.dtype).itemsize
    views = transpose_views(ifm.shape)
    pieces = [o for o in program.ops if _feeds_transpose(o, program, op)]
    later = any(activation_after_transposes(o, program) for o in pieces)
    cycles = sum(
        hardware_transpose_cycles(
            config,
            view,
            result,
            ("sram", dst if i == len(views) - 1 and not later else "sram"),
            item,
        )
        for i, (view, result, _) in enumerate(views)
    )
    if later:  # the activation on the whole output (module docstring)
        m, h, w, c = (int(d) for d in ifm.shape)
        src = TensorDesc((1, h, w, c * m), ifm.dtype, "sram")
        to = TensorDesc((1, h, w, c * m), ifm.dtype, dst)
        transfer = map_transfer(config, src, to, ("sram", dst), (False, out not in program.outputs))
        q = Query("pool", (h, w, c * m), (h, w, c * m), bits=8 * item)
        cycles += mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0]
    return cycles


def _feeds_transpose(piece, program, transpose) -> bool:
    """Whether ``piece`` writes a slice of the concatenation ``transpose`` reads."""
    return any(
        _is_multiplier_op(c, "concatenate") and piece.output in c.inputs
        for c in program.ops
        if c.output in transpose.inputs
    )


def activation_after_transposes(op, program) -> bool:
    """Whether ``op`` is a depth multiplier's piece on 16-bit maps whose fused activation Vela
    runs after the transposes (module docstring), not in its output stage nor split off."""
    if op.kind != "DWCONV" or source_operator(op) != SOURCE:
        return False
    if program.tensors[op.output].dtype != "int16" or op.params.get("activation") != "clip":
        return False
    readers = [r for r in program.ops if op.output in r.inputs]
    return len(readers) == 1 and _is_multiplier_op(readers[0], "concatenate")


def multiplier_depth(op, program) -> int | None:
    """The output depth of the depthwise convolution a multiplier's piece ``op`` was cut from
    (its depth x M), or None if ``op`` is not one. Vela splits off a fused activation on
    fewer than 8 channels (vela_activation.py) on the convolution as the graph has it, before
    its scheduler cuts the pieces: dwconv_m2_s2_valid_relu's 4-channel pieces keep their ReLU
    (its debug database: the two convolutions and seven transposes, no ReLU). On 16-bit maps
    Vela runs the ReLU after the transposes on the whole output: None there
    (``activation_after_transposes``)."""
    if op.kind != "DWCONV" or source_operator(op) != SOURCE:
        return None
    if program.tensors[op.output].dtype not in ("int8", "uint8"):
        return None
    readers = [r for r in program.ops if op.output in r.inputs]
    if len(readers) != 1 or not _is_multiplier_op(readers[0], "concatenate"):
        return None
    concat = readers[0]
    if not any(_transpose_of(r) for r in program.ops if concat.output in r.inputs):
        return None
    return int(program.tensors[op.output].shape[-1]) * len(concat.inputs)
