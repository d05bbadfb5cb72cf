"""The cycle model: per operation, compute cycles from the MAC array's block shape, memory
cycles from bytes moved per memory and its bandwidth, their overlap, and a fixed overhead.

    MAC ops    Vela's block model (blocks.py): the output block chosen to fit the shared buffer,
               per block kernel elements x 32-channel passes x micro-blocks (at least the
               weight-buffer refill), the output stage overlapping the next block
               (16-bit inputs with Vela's 16-bit rules)
    pools      MAX_POOL_2D and AVERAGE_POOL_2D in Vela 5.2's block model (BLOCK_POOLS)
    unit ops   output elements / elementwise rate (MEAN: input elements); operations Vela
               decomposes are charged as its decomposition: MEAN (all-ones depthwise
               convolutions, partial-sum additions, a scaling multiplication), ARG_MAX (four
               operations), bilinear resize (copies and 2x2 depthwise convolutions, or
               upscaling average pools), 8-bit QUANTIZE (a 1x1 average pool), REDUCE_MAX
               and REDUCE_MIN (ReduceMax pools per axis: vela_reduce.py), a table or ReLU
               from a region's input to its output (a 1x1 pool and the table's load:
               vela_unary.py), int8 SOFTMAX (29 operations), CONCATENATION, PACK and
               TRANSPOSE (copies, hardware transposes: vela_softmax.py, vela_layout.py),
               BATCH_MATMUL (a Transpose and the compound MatMul: vela_matmul.py)
    memory     feature maps read and written where they live (a MAC op's input once per output
               block, with the kernel's overlap, and per block of output channels for a
               convolution: Vela's element access), weights (a MAC op's: Vela's encoded stream
               and 10-byte records, vela_weights.py; on the U55 read from flash with no
               first-byte latency) and tables from the weight memory
               and, once per block of output rows and columns, from their SRAM buffer; halo
               rows re-read by each extra stripe (weights Vela leaves in DRAM on the U65:
               read from there once per block of rows and columns, weight_staging.py); per
               memory, bytes / bandwidth plus the first-byte latency of an off-chip one; a
               map spilled off-chip between two streaming operations moves at SRAM speed
               (Vela cascades it)
    total      max(compute, the slowest memory) + per-operation overhead (memories work in
               parallel, as Vela's pass cycles; weight DMA double-buffers under compute); a
               MAC op and a table between two ops pay no overhead: their first block's
               transfers, MACs and output stage run in sequence (Vela 5.2, blocks.mac_cycles'
               fill); a table between two ops runs as a 1x1 pool, its table loaded under the
               previous op; PReLU as Vela's MUL, MUL and MAXIMUM (vela_access.prelu_as_vela)
    elementwise Vela 5.2's rule for its native elementwise operations (ADD, SUB, MUL, MAXIMUM,
               MINIMUM): no per-operation overhead and no first-byte latency on the memory
               side; per output element the output stage's rate, but at least a quarter of one
               block's minimum memory cycles (the slower of the input and output blocks'
               transfers) per block element plus the rate; on a region's maps, the maps'
               flat shape: ``elementwise_cycles``
"""

from __future__ import annotations

from math import ceil

import numpy as np

from .blocks import SPLIT_DEPTH, round_up
from .config import NPUConfig
from .lstm_cycles import (
    LSTM_UNITS,
    TINY_ELEMENTS,
    fused_activations,
    lstm_op,
    lstm_sequences,
    native_activation,
)
from .op_compute import (
    BLOCK_POOLS,
    MAC_KINDS,
    activates16,
    compute_cycles,
    constant_record_bytes,
    requantizes16,
    resizes16,
    staged_weights,
    standalone_table,
)
from .program import NPUOp, Program, TensorDesc
from .vela_access import (
    bandwidth,
    broadcasts,
    elementwise_access,
    elementwise_op_cycles,
    ifm_block_read,
    is_elementwise,
    leaky_as_max,
    leaky_as_vela,
    map16_access,
    maps16,
    prelu_as_max,
    prelu_as_vela,
    prelu_tail,
    unary16_as_vela,
    unary16_tail,
    unfused_table,
)
from .vela_activation import activation_cycles, split_activation
from .vela_cascade import cascade_stripes, cascaded_offchip
from .vela_copy import SLICES, copies_as_vela, copy_as_vela, folded, writes_through
from .vela_decompose import (
    BIAS_RECORD_BYTES,
    argmax_as_vela,
    half_pixel,
    mean_op_as_vela,
    mean_tail,
    resizes_as_vela,
)
from .vela_depthmult import (
    activation_after_transposes,
    depth_multiplier_as_vela,
    multiplier_depth,
)
from .vela_layout import bricked_map, evicted_maps, feeds_concat_copies, layout_as_vela
from .vela_matmul import matmul_as_vela
from .vela_pad import pad_as_vela, pads_as_vela
from .vela_quantize import (
    folded_quantize,
    output_quantize_cycles,
    quantize_after,
    read_through,
)
from .vela_reduce import reduce_as_vela, reduces_as_vela
from .vela_resample import folded_dilate, upscaled_input
from .vela_reshape import mac_io, removed
from .vela_softmax import softmax_as_vela
from .vela_sum import sum_as_vela
from .vela_unary import TABLELESS, unary_as_vela
from .weight_staging import (
    buffered_cycles,
    dma_hidden,
    next_slack,
    refetches,
    shared_sram_wait,
    transfer_cycles,
)

MEMORY_BANDWIDTH = ("sram", "dram", "flash")


def input_descs(op: NPUOp, program: Program) -> list[TensorDesc]:
    """The maps ``op`` reads as it reads them: a view (a slice read at an offset) is the box's
    shape in its source's memory."""
    views = op.params.get("views") or [None] * len(op.inputs)
    out = []
    for t, v in zip(op.inputs, views):
        desc = program.tensors[t]
        if v is not None:
            shape = tuple(e - b for b, e in zip(*v))
            desc = TensorDesc(shape, desc.dtype, desc.memory, desc.address)
        out.append(desc)
    return out


def depth16(t: TensorDesc, brick: bool) -> float:
    """The bytes a MAC operation moves per byte of map ``t``: in NHCWB16 bricks its depth
    rounded up to 16 (regor's MeasureElementAccess, storage rounding: sum_in_graph's 8x8x1 SUM
    output written as 1,024 bytes)."""
    depth = int(t.shape[-1]) if len(t.shape) else 1
    return round_up(depth, 16) / depth if brick else 1.0


def move(t: TensorDesc, memory: str) -> TensorDesc:
    return TensorDesc(t.shape, t.dtype, memory, t.address)


def op_cycles(
    op: NPUOp,
    program: Program,
    config: NPUConfig,
    cascaded: set[int] | None = None,
    fused: set[int] | None = None,
    slack: float | None = None,
    stripes: dict[int, int] | None = None,
    exposed: float | None = None,
) -> dict:
    """Cycles, MACs, utilisation and bytes per memory of one operation (``cascaded``,
    ``fused`` and ``stripes``: the program's cascaded_offchip, fused_activations and
    vela_cascade.cascade_stripes, computed here if None; ``slack``: the previous operation's
    cycles, None for the program's first, which decide whether Vela stages the weights in
    SRAM: weight_staging.py; ``exposed``: the cycles of the previous operation's last
    elementwise operation, under which this one's weights move, None if it has none)."""
    if cascaded is None:
        cascaded = cascaded_offchip(program, config)
    if stripes is None:
        stripes = cascade_stripes(program, config)
    if fused is None:
        fused = fused_activations(program)
    ins, inputs, upscale = input_descs(op, program), list(op.inputs), 1
    if (upscaled := upscaled_input(op, program)) is not None:  # Vela's TRANSPOSE_CONV reads
        inputs[0], upscale = upscaled  # the map before zero insertion, upscaled
    read, output = mac_io(op, program)  # through the reshapes regor removes
    read = read if read is not None else read_through(op, program)  # a folded QUANTIZE
    inputs[0] = inputs[0] if read is None else read
    output = op.output if output is None else output
    if inputs[0] != op.inputs[0]:
        ins[0] = program.tensors[inputs[0]]
    out = program.tensors[output]
    far = evicted_maps(program, config)  # maps Vela moves back off-chip
    if far:
        ins = [move(d, config.spill_memory) if t in far else d for t, d in zip(inputs, ins)]
        out = move(out, config.spill_memory) if output in far else out
    # Vela writes an SRAM map, then runs the activation (a multiplier's piece: as the whole)
    split = split_activation(op, out, multiplier_depth(op, program))
    split = split and not activation_after_transposes(op, program)  # 16-bit: after them
    requant = quantize_after(op)  # a fused output QUANTIZE: Vela's own operation after it
    # the maps' memories for the per-block minimum: a region's input or output where it lives,
    # any other map in SRAM (Vela keeps or cascades what our plan spills)
    writes_io = output in program.outputs and not split and not requant
    through = writes_through(op, program)  # a reshape regor removes after it (vela_copy.py)
    io = (
        ins[0].memory if inputs and (inputs[0] in program.inputs or inputs[0] in far) else "sram",
        out.memory if writes_io or output in far else "sram",
    )
    if op.kind in MAC_KINDS and through is not None and not lstm_op(op, out) and not split:
        io = (io[0], program.tensors[through].memory)
    # Vela keeps an intermediate map in NHCWB16 bricks, a region's input and output in NHWC
    bricked = inputs[0] not in program.inputs and not writes_io
    staged = staged_weights(op, ins, out, config, slack, upscale)
    stripe = stripes.get(next(i for i, o in enumerate(program.ops) if o is op))
    # which of a MAC operation's maps Vela keeps in bricks (not one a removed reshape reads
    # or writes: regor keeps those NHWC)
    bricks = (
        read is None and bricked_map(program, inputs[0]),
        not writes_io and through is None and (requant or bricked_map(program, output)),
    )
    macs, compute, block, query = compute_cycles(
        op, ins, out, config, io, bricked, staged, stripe, upscale, bricks
    )
    # a region input to a region output: Vela's flat shape (vela_access.flat_shape)
    # (or to the copies of a concatenation: vela_layout.feeds_concat_copies)
    to_copies = set(op.inputs) <= {*program.inputs} and feeds_concat_copies(op, program)
    flat = set(op.inputs) <= {*program.inputs} and op.output in program.outputs or to_copies
    brick = op.output not in program.outputs and not to_copies
    if is_elementwise(op):
        compute = elementwise_op_cycles(config, op, ins, out, brick, flat)
    if op.params.get("op") == "qnn.prelu" and prelu_as_max(op):  # Vela's MULs and MAXIMUM
        total = int(ceil(prelu_as_vela(config, op, ins[0], out, brick, flat)))
        cost = _as_vela_decomposes(op, total, ins[0], out, config)
        return {**cost, "tail": prelu_tail(config, out, brick, flat)}  # its MAXIMUM
    if leaky_as_max(op):  # 16x8 LEAKY_RELU that rescales: Vela's MULs and MAXIMUM
        total = int(ceil(leaky_as_vela(config, ins[0], out, brick, flat)))
        cost = _as_vela_decomposes(op, total, ins[0], out, config)
        return {**cost, "tail": prelu_tail(config, out, brick, flat)}  # its MAXIMUM
    if unfused_table(op):  # 16x8 ABS, LEAKY_RELU: Vela's Abs / LeakyRelu operation
        total = int(ceil(unary16_as_vela(config, ins[0], out, brick, flat)))
        cost = _as_vela_decomposes(op, total, ins[0], out, config)
        brick_in = op.inputs[0] not in program.inputs
        return {**cost, "tail": unary16_tail(config, ins[0], out, brick_in, brick, flat)}
    if reduces_as_vela(op, ins[0]):  # Vela's ReduceMax operations (vela_reduce.py)
        total, tail = reduce_as_vela(config, op, ins[0], out, io)
        cost = _as_vela_decomposes(op, int(ceil(total)), ins[0], out, config)
        return {**cost, "tail": tail} if op.params["op"] == "min" else cost  # its last SUB
    matmul = matmul_as_vela(config, op, program)  # Vela's Transpose and MatMul
    if matmul is not None:  # (vela_matmul.py; its reshapes and requantize: 0)
        cost = _as_vela_decomposes(op, int(ceil(matmul)), ins[0], out, config)
        capacity = cost["cycles"] * config.macs_per_cycle
        return {**cost, "macs": int(macs), "utilisation": macs / capacity if capacity else 0.0}
    summed = sum_as_vela(config, op, program, io, slack, op_cycles)  # vela_sum.py
    if summed is not None:  # Vela's Transpose and ReduceSum or Conv2D
        return _as_vela_decomposes(op, int(ceil(summed)), ins[0], out, config)
    layout = layout_as_vela(config, op, program, ins[0] if ins else out, io)
    if layout is None:  # a depth multiplier's transposes (vela_depthmult.py)
        layout = depth_multiplier_as_vela(config, op, program)
    if op.params.get("op") == "qnn.softmax" and ins[0].dtype == out.dtype:
        src = TensorDesc(ins[0].shape, ins[0].dtype, io[0])
        layout = softmax_as_vela(config, src, io[1])  # Vela's 29 (int8) or 15 (16x8)
    if layout is not None:  # Vela's copies, transposes (vela_layout.py), softmax graph
        return _as_vela_decomposes(op, int(ceil(layout)), ins[0], out, config)
    name = op.params.get("op")
    if standalone_table(op) and flat and len(op.inputs) == 1:  # vela_unary.py
        table = 0 if name in TABLELESS else sum(_constant_bytes(*a) for a in op.arrays.items())
        if to_copies and op is not program.ops[0]:  # loaded under the previous operation
            table = 0
        total = int(ceil(unary_as_vela(config, out, io, table)))
        return _as_vela_decomposes(op, total, ins[0], out, config, {config.weight_memory: table})
    reads_io = bool(op.inputs) and op.inputs[0] in (*program.inputs, *program.outputs)
    writes = op.output in program.outputs
    through = through if name in SLICES else None
    copy = op.kind == "UNIT" and len(op.inputs) == 1
    copy = copy and copies_as_vela(name, reads_io, writes or through is not None)
    if folded_dilate(op, program) or removed(op, program) or folded_quantize(op, program):
        # the MAC op reads through it
        return _as_vela_decomposes(op, 0, ins[0], out, config)
    if pads_as_vela(op, ins[0]) or copy or (op.kind == "UNIT" and folded(op, program)):
        if not copy and not pads_as_vela(op, ins[0]):  # regor removes it (vela_copy.py)
            total = 0
        elif copy:  # a reshape reading a view of its input is a slice (compiler.py's views)
            viewed = (op.params.get("views") or [None])[0] is not None
            kind = "strided_slice" if name in SLICES or viewed else name
            dst = io[1] if through is None else program.tensors[through].memory
            mapped = ins[0] if viewed else out
            total = int(ceil(copy_as_vela(config, kind, mapped, (io[0], dst))))
        else:
            a = op.params["attrs"]
            reflect = a.get("pad_mode") == "reflect"
            total = int(ceil(pad_as_vela(config, ins[0], out, a["pad_width"], reflect, io)))
        return _as_vela_decomposes(op, total, ins[0], out, config)
    moved: dict[str, int] = {}
    scaled: dict[str, float] = {}  # bytes weighted by burst efficiency, as Vela's scaled_bws

    def add(memory: str, nbytes: float, efficiency: float = 1.0) -> None:
        moved[memory] = moved.get(memory, 0) + int(nbytes)
        scaled[memory] = scaled.get(memory, 0.0) + nbytes * efficiency

    halo = 1.0
    if op.stripes > 1 and op.kind in ("CONV", "DWCONV"):
        kh = op.arrays["weights"].shape[1]
        halo = 1.0 + (op.stripes - 1) * (kh - 1) / max(1, out.shape[1])
    for i, t in enumerate(ins):
        if inputs[i] in cascaded:
            add("sram", t.nbytes * halo)
            continue
        # a region input read from off-chip memory: Vela's burst-inefficient first layer (our
        # spilled maps stream at full bandwidth instead, standing in for Vela's cascading)
        if i == 0 and block is not None and t.memory != "sram" and inputs[0] in program.inputs:
            add(t.memory, *ifm_block_read(config, query, block, t))
        elif i == 0 and block is not None and t.memory == "sram":
            # Vela's element access: an SRAM map is fetched per output block as well (each
            # block with its kernel overlap, a convolution's once per block of output channels)
            add("sram", ifm_block_read(config, query, block, t)[0] * depth16(t, bricks[0]))
        else:
            add(t.memory, t.nbytes * halo)
    out_bytes = out.nbytes * (depth16(out, bricks[1]) if block is not None else 1.0)
    add("sram" if op.output in cascaded or split or requant else out.memory, out_bytes)
    # an elementwise op's scalar parameters are command-stream registers, not memory traffic
    constant_bytes = sum(
        _constant_bytes(name, a)
        for name, a in op.arrays.items()
        if not (op.kind == "UNIT" and (a.size == 1 or op.params["op"] == "resize_bilinear_taps"))
        and not native_activation(op)
        and not activates16(op)  # Vela's native int16 sigmoid / tanh: no table
        and not (op.kind == "LUT" and is_elementwise(op))  # Vela's native ABS/NEG: no table
    )  # a bilinear resize's tap matrices are ours: Vela's kernels are counted below
    constant_bytes *= lstm_sequences(op, out)
    if op.kind in MAC_KINDS and not lstm_op(op, out):  # Vela's encoded stream and records
        depth = block.ofm[2] if block is not None else query.ofm[2]
        table = _constant_bytes("table", op.arrays["table"]) if "table" in op.arrays else 0
        table = 0 if requant else table  # Vela's Quantize rescales: no table
        constant_bytes = constant_record_bytes(op, query, config, depth) + table
    if block is not None and "weights" in op.arrays and not staged:
        # weights, scales and biases read where they live, once per block of rows and columns
        add(config.weight_memory, constant_bytes * refetches(query, block))
    elif constant_bytes and standalone_table(op) and bricked:
        # Vela loads the table of an operation between two others while the previous one runs
        # (its per-layer report charges the load to no operation)
        moved[config.weight_memory] = moved.get(config.weight_memory, 0) + constant_bytes
    elif (
        constant_bytes
        and staged
        and dma_hidden(config, slack)
        and mac_staged(op, out)
        and (not _sliced(query, block))
    ):  # DMA'd to SRAM while the previous operation runs: buffered_cycles charges its wait
        moved[config.weight_memory] = moved.get(config.weight_memory, 0) + constant_bytes
    elif constant_bytes:
        add(config.weight_memory, constant_bytes)
    if block is not None and "weights" in op.arrays and staged:
        # the MAC array reads the weights from their SRAM buffer once per output block of
        # rows and columns (Vela's weight fetch: kernel x input depth x block depth per block;
        # the DMA from the weight memory above double-buffers under the previous block)
        (oh, ow, _), (bh, bw, _) = query.ofm, block.ofm
        add("sram", op.arrays["weights"].nbytes * ceil(oh / bh) * ceil(ow / bw))
    if is_elementwise(op):
        elementwise_access(config, op, ins, out, moved, scaled)
        if writes_io and maps16(ins, out) and not broadcasts(config, op, ins, out):
            bricked_in = [t not in program.inputs for t in op.inputs]  # Vela's NHCWB16 maps
            map16_access(config, ins, out, scaled, bricked_in)  # 16-bit NHWC maps' bursts
    # each memory transfers in parallel with the others (Vela's pass cycles: the slowest memory)
    if op.kind == "UNIT" and op.params["op"] == "qnn.mean":
        _, weights, sums = mean_op_as_vela(config, op, ins[0], out)
        add(config.weight_memory, weights)
        add("sram", sums)
    if op.kind == "UNIT" and op.params["op"] == "resize_bilinear_taps" and len(out.shape) == 4:
        c = ins[0].shape[-1]
        if half_pixel(op.arrays["c0"]):  # four 2x2 kernels and their biases
            add(config.weight_memory, 4 * (4 + BIAS_RECORD_BYTES) * c)
    if op.kind == "UNIT" and op.params["op"] == "argmax":
        _, weights, middle = argmax_as_vela(config, ins[0].shape, io)
        add(config.weight_memory, weights)
        add("sram", middle)
    # Vela's memory access cycles carry no first-byte latency: for its elementwise operations
    # the latency is in the per-block bound of their compute (elementwise_cycles)
    latency = 0 if is_elementwise(op) else config.dma_latency_cycles
    # nor does a MAC operation's weight stream read from flash (Vela's FullyConnected on
    # u55-256: 528 encoded bytes and 160 of records, 688 cycles)
    streamed = op.kind in MAC_KINDS and not lstm_op(op, out) and config.weight_memory == "flash"
    memory = max(
        n / bandwidth(config, m)
        + (latency if m != "sram" and not (streamed and m == "flash") else 0)
        for m, n in scaled.items()
    )
    fixed = _fixed_cycles(op, op.output in fused, out, config, bricked, ins)
    total = int(ceil(max(compute, memory))) + fixed
    if split:  # the activation from the SRAM map to where the output lives
        dst = out.memory if output in program.outputs else "sram"
        total += int(ceil(activation_cycles(config, out, dst)))
    scheduled = None  # regor's scheduler estimate, the maps where they are before SRAM
    if mac_staged(op, out) and config.spill_memory != "none" and not _sliced(query, block):
        # placement (a deeper operation whose transfer outlasts the slack has its weights
        # sliced in depth: its own slack is its last slice's, the stall its first slice's);
        # the next operation's slack (program_cycles: ``exposed``)
        off = config.spill_memory
        maps = [TensorDesc(t.shape, t.dtype, off) for t in ins]
        far = TensorDesc(out.shape, out.dtype, off)
        args = (bricked, staged, stripe, upscale, bricks)  # unstaged: weights from DRAM
        scheduled = compute_cycles(op, maps, far, config, (off, off), *args)[1]
    if staged and mac_staged(op, out):  # waiting for the weights
        depth = query.ofm[2]
        nbytes = constant_record_bytes(op, query, config, block.ofm[2] if block else depth)
        estimate = None
        if _sliced(query, block):  # sliced in depth:
            nbytes = nbytes * block.ofm[2] / depth  # the first slice's transfer
        elif exposed is not None and (
            depth <= SPLIT_DEPTH or transfer_cycles(config, nbytes) <= exposed
        ):  # a deeper one is sliced in depth where its transfer outlasts the slack
            estimate = scheduled
        total = int(ceil(buffered_cycles(config, total, nbytes, exposed, estimate)))
        if block is not None:  # the U55's wait where Vela buffers the weights
            full = constant_record_bytes(op, query, config, block.ofm[2])
            total += int(ceil(shared_sram_wait(config, query, block, full, slack, total)))
    if requant:  # Vela's Quantize from the SRAM map to where the output lives
        dst = out.memory if output in program.outputs else "sram"
        total += int(ceil(output_quantize_cycles(config, out, dst)))
        moved[dst] = moved.get(dst, 0) + out.nbytes
        moved["sram"] = moved.get("sram", 0) + out.nbytes
    tail = {} if scheduled is None else {"estimate": scheduled}
    if op.kind == "UNIT" and op.params["op"] == "qnn.mean" and len(ins[0].shape) <= 4:
        tail = {"tail": mean_tail(config, op, ins[0], out)}  # Vela's MUL ends it
    capacity = total * config.macs_per_cycle
    return {
        "cycles": total,
        "compute_cycles": int(ceil(compute)),
        "memory_cycles": int(ceil(memory)),
        "macs": int(macs),
        "utilisation": macs / capacity if capacity and macs else 0.0,
        "bytes": moved,
        "stripes": op.stripes,
        **({"block": "x".join(map(str, block.ofm))} if block else {}),
        "time_at_clock_s": total / config.clock_hz,
        **tail,
    }


def _sliced(query, block) -> bool:
    """Whether Vela slices the operation's weights in depth (more than two blocks deep) and
    streams the slices through its buffer while it runs."""
    return block is not None and query.ofm[2] // min(block.ofm[2], query.ofm[2]) > 2


def mac_staged(op: NPUOp, out) -> bool:
    """A MAC operation whose staged weights ``buffered_cycles`` charges (not an LSTM's)."""
    return op.kind in MAC_KINDS and not lstm_op(op, out)


def _fixed_cycles(
    op: NPUOp, fused: bool, out, config: NPUConfig, bricked: bool = False, ins=()
) -> int:
    """The per-operation fixed cost: the configured overhead, except for an LSTM's tiny
    elementwise operations, which Vela's per-layer report charges their output-stage cycles
    only (6-34 cycles for 16-64 values), and a fused activation (none; a standalone one pays
    it: Vela's standalone int16 TANH of 16 values costs 153 cycles on the U55, 625 on the U65);
    an LSTM op of a batch pays it once per sequence."""
    name = op.params.get("op")
    elems = int(np.prod(out.shape))
    if fused or is_elementwise(op) or name in (*BLOCK_POOLS, "argmax") or resizes_as_vela(op):
        return 0
    if name == "qnn.mean" or requantizes16(op, ins, out) or resizes16(op, ins, out):
        return 0  # MEAN: its convolutions' first blocks unoverlapped (vela_decompose.py)
    if activates16(op):
        return 0  # MEAN: its convolutions' first blocks unoverlapped (vela_decompose.py)
    if (op.kind in MAC_KINDS or standalone_table(op) and bricked) and not lstm_op(op, out):
        return 0  # Vela 5.2: a MAC operation's first block runs unoverlapped (mac_cycles' fill)
    if name in LSTM_UNITS and elems <= TINY_ELEMENTS:
        return 0
    return config.op_overhead_cycles * lstm_sequences(op, out)


def _as_vela_decomposes(op, total: int, src, out, config, more: dict | None = None) -> dict:
    """The cost record of an operation charged as Vela's own decomposition (PReLU's MULs and
    MAXIMUM, a PAD's copies, a copy): ``total`` cycles, no MACs."""
    nbytes = {src.memory: src.nbytes, out.memory: out.nbytes}
    for memory, n in (more or {}).items():  # a table's bytes (vela_unary.py)
        nbytes[memory] = nbytes.get(memory, 0) + n
    return {
        "cycles": total,
        "compute_cycles": total,
        "memory_cycles": 0,
        "macs": 0,
        "utilisation": 0.0,
        "bytes": nbytes,
        "stripes": op.stripes,
        "time_at_clock_s": total / config.clock_hz,
    }


def _constant_bytes(name: str, a: np.ndarray) -> int:
    """Bytes of a constant array the op loads. Vela packs bias and scale into one record per
    channel whatever the bias width: a 16x8 op's int64 bias is charged as the 8-bit ops' int32
    one. An int16 table (16x8 LOGISTIC / TANH: the simulator holds the whole function) is
    charged as the hardware's int16 LUT, 512 32-bit entries, as Vela loads it."""
    if name == "bias" and a.dtype == np.int64:
        return a.size * 4
    if name == "table" and a.dtype == np.int16:
        return 512 * 4
    return a.nbytes


def program_cycles(program: Program, config: NPUConfig) -> list[dict]:
    """``op_cycles`` of every operation, in order."""
    cascaded, fused = cascaded_offchip(program, config), fused_activations(program)
    stripes = cascade_stripes(program, config)
    out, slack = [], None
    exposed = None
    for op in program.ops:
        out.append(op_cycles(op, program, config, cascaded, fused, slack, stripes, exposed))
        # the next weights' DMA waits where it outlasts the slack Vela's scheduler gives it
        # (next_slack: an elementwise operation's cycles, a MAC operation's estimate; a pool
        # or a table: none, the transfer hides)
        exposed = next_slack(op, out[-1])
        slack = out[-1]["cycles"]
    return out
