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
               vela_unary.py)
    memory     feature maps read and written where they live (a MAC op's input once per output
               block, with the kernel's overlap, and per block of output channels for a
               convolution: Vela's element access), weights and tables from the weight memory
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

from .blocks import Query, find_block, mac_cycles
from .config import NPUConfig
from .lstm_cycles import (
    LSTM_UNITS,
    TINY_ELEMENTS,
    fused_activations,
    lstm_op,
    lstm_sequences,
    native_activation,
)
from .memory import cascaded_offchip
from .program import NPUOp, Program, TensorDesc
from .vela_access import (
    bandwidth,
    elementwise_access,
    elementwise_cycles,
    elementwise_op_cycles,
    elementwise_rate_name,
    is_elementwise,
    map_transfer,
    nhwc,
    prelu_as_max,
    prelu_as_vela,
)
from .vela_copy import SLICES, copies_as_vela, copy_as_vela, folded, writes_through
from .vela_decompose import (
    BIAS_RECORD_BYTES,
    STANDALONE_LUT_MACS,
    argmax_as_vela,
    half_pixel,
    mean_as_vela,
    resize_bilinear_as_vela,
)
from .vela_ops import VELA_PASSES
from .vela_pad import pad_as_vela, pads_as_vela
from .vela_reduce import reduce_as_vela, reduces_as_vela
from .vela_unary import TABLELESS, unary_as_vela
from .weight_staging import refetches, weights_staged

MEMORY_BANDWIDTH = ("sram", "dram", "flash")


DMA_OPS = (
    "reshape",
    "nn.pad",
    "concatenate",
    "qnn.concatenate",
    "strided_slice",
    "transpose",
    "squeeze",
    "expand_dims",
    "tile",
    "nn.dilate",
    "reverse",
)
MAC_KINDS = ("CONV", "DWCONV", "FC")
POOL_OPS = ("nn.max_pool2d", "qnn.avg_pool2d", "qnn.mean")
BLOCK_POOLS = {"nn.max_pool2d": "pool_output_cycles", "qnn.avg_pool2d": "conv_output_cycles"}
SOFTMAX_PASSES = 20  # an estimate: Vela's int8 softmax graph (not calibrated against Vela here)


def _unit_cycles(name: str, config: NPUConfig, ins, out_elems: int) -> float:
    """Cycles per output element of the elementwise/pooling unit (0 for pure data movement)."""
    if name in ("nn.max_pool2d", "qnn.avg_pool2d", "qnn.mean"):
        window = sum(int(np.prod(t.shape)) for t in ins) / max(1, out_elems)
        return window * config.pool_output_cycles
    if name in ("image.resize2d", "resize_bilinear_taps"):  # the pooling unit, input upscaled
        return config.pool_output_cycles
    if name in DMA_OPS:
        return 0.0  # DMA only: its cost is the memory traffic
    if name in ("qnn.mul", "qnn.squared_difference"):
        return config.mul_output_cycles
    if name == "qnn.batch_matmul":  # the MAC array at full use: depth MACs per output
        return max(config.add_output_cycles, int(ins[0].shape[-1]) / config.macs_per_cycle)
    if name in VELA_PASSES:  # ops Vela runs as several elementwise passes (vela_ops.py)
        return VELA_PASSES[name] * config.add_output_cycles
    if name == "qnn.softmax":  # Vela lowers int8 softmax to a chain of ~20 elementwise ops
        return SOFTMAX_PASSES * config.add_output_cycles
    return config.add_output_cycles


def _mac_query(op: NPUOp, ifm: tuple, ofm: tuple, bits: int = 8) -> tuple[Query, int]:
    """The block model's view of a MAC-array op, and its MAC count."""
    w = op.arrays["weights"]
    if op.kind == "FC":
        oc, k = w.shape
        rows = int(np.prod(ofm[:-1]))
        return Query("fc", (1, rows, k), (1, rows, oc), bits=bits), rows * oc * k
    _, oh, ow, oc = ofm
    kh, kw = w.shape[1], w.shape[2]
    p = op.params
    kind = "conv" if op.kind == "CONV" else "dwconv"
    query = Query(
        kind,
        tuple(ifm[1:]),
        (oh, ow, oc),
        (kh, kw),
        tuple(p["strides"]),
        tuple(p["dilation"]),
        bits,
    )
    depth = w.shape[3] if op.kind == "CONV" else 1
    return query, oh * ow * oc * kh * kw * depth


def _ifm_block_read(config: NPUConfig, q: Query, block, t) -> tuple[float, float]:
    """Bytes a MAC op reads from its input map, off-chip or in SRAM (every output block fetches
    its input block, with the kernel's overlap; a convolution once per block of output channels)
    and the off-chip burst efficiency: an NHWC read returns one input block's depth per burst
    (Vela's ``_estimate_memory_transfer_efficiency``)."""
    (oh, ow, oc), (bh, bw, bd) = q.ofm, block.ofm
    item = np.dtype(t.dtype).itemsize
    ih, iw = min(block.ifm[0], q.ifm[0]), min(block.ifm[1], q.ifm[1])
    fetch = ih * iw * q.ifm[2] * item * ceil(oh / bh) * ceil(ow / bw)
    if q.kind in ("conv", "fc"):
        fetch *= ceil(oc / bd)
    burst = config.offchip_burst_bytes
    return fetch, burst / min(burst, block.ifm[2] * item)


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


def op_cycles(
    op: NPUOp,
    program: Program,
    config: NPUConfig,
    cascaded: set[int] | None = None,
    fused: set[int] | None = None,
    slack: float | None = None,
) -> dict:
    """Cycles, MACs, utilisation and bytes per memory of one operation (``cascaded`` and
    ``fused``: the program's cascaded_offchip and fused_activations, computed here if None;
    ``slack``: the previous operation's cycles, None for the program's first, which decide
    whether Vela stages the weights in SRAM: weight_staging.py)."""
    if cascaded is None:
        cascaded = cascaded_offchip(program, config)
    if fused is None:
        fused = fused_activations(program)
    out = program.tensors[op.output]
    ins = input_descs(op, program)
    # the maps' memories for the per-block minimum: a region's input or output where it lives,
    # any other map in SRAM (Vela keeps or cascades what our plan spills)
    through = writes_through(op, program)  # a reshape regor removes after it (vela_copy.py)
    io = (
        ins[0].memory if op.inputs and op.inputs[0] in program.inputs else "sram",
        out.memory if op.output in program.outputs else "sram",
    )
    if op.kind in MAC_KINDS and through is not None and not lstm_op(op, out):
        io = (io[0], program.tensors[through].memory)
    # Vela keeps an intermediate map in NHCWB16 bricks, a region's input and output in NHWC
    bricked = op.inputs[0] not in program.inputs and op.output not in program.outputs
    staged = _staged(op, ins, out, config, slack)
    macs, compute, block, query = _compute(op, ins, out, config, io, bricked, staged)
    # a region input to a region output: Vela's flat shape (vela_access.flat_shape)
    flat = set(op.inputs) <= {*program.inputs} and op.output in program.outputs
    brick = op.output not in program.outputs
    if is_elementwise(op):
        compute = elementwise_op_cycles(config, op, ins, out, brick, flat)
    if op.params.get("op") == "qnn.prelu" and prelu_as_max(op):  # Vela's MULs and MAXIMUM
        total = int(ceil(prelu_as_vela(config, op, ins[0], out, brick, flat)))
        return _as_vela_decomposes(op, total, ins[0], out, config)
    if reduces_as_vela(op, ins[0]):  # Vela's ReduceMax operations (vela_reduce.py)
        total = int(ceil(reduce_as_vela(config, op, ins[0], out, io)))
        return _as_vela_decomposes(op, total, ins[0], out, config)
    name = op.params.get("op")
    if _standalone_table(op) and flat and len(op.inputs) == 1:  # vela_unary.py
        table = 0 if name in TABLELESS else sum(_constant_bytes(*a) for a in op.arrays.items())
        total = int(ceil(unary_as_vela(config, out, io, table)))
        return _as_vela_decomposes(op, total, ins[0], out, config, {config.weight_memory: table})
    reads_io = bool(op.inputs) and op.inputs[0] in (*program.inputs, *program.outputs)
    writes = op.output in program.outputs
    through = through if name in SLICES else None
    copy = op.kind == "UNIT" and len(op.inputs) == 1
    copy = copy and copies_as_vela(name, reads_io, writes or through is not None)
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
        if op.inputs[i] in cascaded:
            add("sram", t.nbytes * halo)
            continue
        # a region input read from off-chip memory: Vela's burst-inefficient first layer (our
        # spilled maps stream at full bandwidth instead, standing in for Vela's cascading)
        if i == 0 and block is not None and t.memory != "sram" and op.inputs[0] in program.inputs:
            add(t.memory, *_ifm_block_read(config, query, block, t))
        elif i == 0 and block is not None and t.memory == "sram":
            # Vela's element access: an SRAM map is fetched per output block as well (each
            # block with its kernel overlap, a convolution's once per block of output channels)
            add("sram", _ifm_block_read(config, query, block, t)[0])
        else:
            add(t.memory, t.nbytes * halo)
    add("sram" if op.output in cascaded else out.memory, out.nbytes)
    # an elementwise op's scalar parameters are command-stream registers, not memory traffic
    constant_bytes = sum(
        _constant_bytes(name, a)
        for name, a in op.arrays.items()
        if not (op.kind == "UNIT" and (a.size == 1 or op.params["op"] == "resize_bilinear_taps"))
        and not native_activation(op)
        and not (op.kind == "LUT" and is_elementwise(op))  # Vela's native ABS/NEG: no table
    )  # a bilinear resize's tap matrices are ours: Vela's kernels are counted below
    constant_bytes *= lstm_sequences(op, out)
    if block is not None and "weights" in op.arrays and not staged:
        # weights, scales and biases read where they live, once per block of rows and columns
        add(config.weight_memory, constant_bytes * refetches(query, block))
    elif constant_bytes and _standalone_table(op) and bricked:
        # Vela loads the table of an operation between two others while the previous one runs
        # (its per-layer report charges the load to no operation)
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
    # each memory transfers in parallel with the others (Vela's pass cycles: the slowest memory)
    if op.kind == "UNIT" and op.params["op"] == "qnn.mean":
        _, weights, sums = mean_as_vela(config, ins[0].shape, _bits(ins[0]))
        add(config.weight_memory, weights)
        add("sram", sums)
    if op.kind == "UNIT" and op.params["op"] == "resize_bilinear_taps" and len(out.shape) == 4:
        c = ins[0].shape[-1]
        if half_pixel(op.arrays["c0"]):  # four 2x2 kernels and their biases
            add(config.weight_memory, 4 * (4 + BIAS_RECORD_BYTES) * c)
    if op.kind == "UNIT" and op.params["op"] == "argmax":
        _, weights, middle = argmax_as_vela(config, ins[0].shape)
        add(config.weight_memory, weights)
        add("sram", middle)
    # Vela's memory access cycles carry no first-byte latency: for its elementwise operations
    # the latency is in the per-block bound of their compute (elementwise_cycles)
    latency = 0 if is_elementwise(op) else config.dma_latency_cycles
    memory = max(
        n / bandwidth(config, m) + (latency if m != "sram" else 0) for m, n in scaled.items()
    )
    fixed = _fixed_cycles(op, op.output in fused, out, config, bricked)
    total = int(ceil(max(compute, memory))) + fixed
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
    }


def _fixed_cycles(op: NPUOp, fused: bool, out, config: NPUConfig, bricked: bool = False) -> int:
    """The per-operation fixed cost: the configured overhead, except for an LSTM's tiny
    elementwise operations, which Vela's per-layer report charges their output-stage cycles
    only (6-34 cycles for 16-64 values), and a fused activation (none; a standalone one pays
    it: Vela's standalone int16 TANH of 16 values costs 153 cycles on the U55, 625 on the U65);
    an LSTM op of a batch pays it once per sequence."""
    name = op.params.get("op")
    elems = int(np.prod(out.shape))
    if fused or is_elementwise(op) or name in BLOCK_POOLS:
        return 0
    if (op.kind in MAC_KINDS or _standalone_table(op) and bricked) and not lstm_op(op, out):
        return 0  # Vela 5.2: a MAC operation's first block runs unoverlapped (mac_cycles' fill)
    if name in LSTM_UNITS and elems <= TINY_ELEMENTS:
        return 0
    return config.op_overhead_cycles * lstm_sequences(op, out)


def _standalone_table(op: NPUOp) -> bool:
    """A table lookup Vela runs as a pooling operation of its own (not its native elementwise
    ABS/NEG, not a rescaling QUANTIZE, not the int16 sigmoid/tanh activation)."""
    return (
        op.kind == "LUT"
        and not is_elementwise(op)
        and not native_activation(op)
        and op.params.get("op") != "qnn.requantize"
    )


def _bits(t) -> int:
    return 16 if t.dtype == "int16" else 8


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


def _staged(op: NPUOp, ins, out, config: NPUConfig, slack: float | None) -> bool:
    """Whether Vela stages this MAC operation's weights in SRAM (weight_staging.py; True for
    any other operation and for the integer LSTM's, whose figures were matched staged)."""
    if op.kind not in MAC_KINDS or lstm_op(op, out):
        return True
    query, _ = _mac_query(op, ins[0].shape, out.shape, _bits(ins[0]))
    nbytes = op.arrays["weights"].nbytes + BIAS_RECORD_BYTES * query.ofm[2]
    return weights_staged(config, query, find_block(config, query), nbytes, slack)


def _compute(
    op: NPUOp, ins, out, config: NPUConfig, io=("sram", "sram"), bricked=False, staged=True
):
    """(MACs, compute cycles, the MAC array's block or None, its block query or None);
    ``staged``: whether the scales and biases are fetched from SRAM (else the weight memory)."""
    out_elems = int(np.prod(out.shape))
    if op.kind in ("CONV", "DWCONV", "FC"):
        bits = _bits(ins[0])
        query, macs = _mac_query(op, ins[0].shape, out.shape, bits)
        # a fused activation table runs in the output stage at the LUT's rate (Vela's index 0);
        # 40-bit accumulators (16-bit inputs) drain at the multiplier's rate (Vela's index 3)
        lut = config.lut_cycles if "table" in op.arrays else 0.0
        stage = config.mul_output_cycles if bits == 16 else config.conv_output_cycles
        transfer = map_transfer(config, ins[0], out, io)
        latency = None if staged else config.dma_latency_cycles
        compute, block = mac_cycles(
            config, query, max(stage, lut), transfer, fill=True, const_latency=latency
        )
        return macs, compute, block, query
    if is_elementwise(op):
        rate = getattr(config, elementwise_rate_name(op))
        return 0, elementwise_cycles(config, ins, out, rate), None, None
    if op.kind == "LUT" and op.params.get("op") == "qnn.requantize" and len(out.shape) == 4:
        # Vela runs QUANTIZE (8-bit to 8-bit) as a 1x1 average pool that rescales, not a table
        q = Query("pool", tuple(out.shape[1:]), tuple(out.shape[1:]))
        return 0, mac_cycles(config, q, config.conv_output_cycles)[0], None, None
    if native_activation(op):  # the output stage's int16 sigmoid/tanh
        return 0, out_elems * config.lut_cycles, None, None
    if _standalone_table(op) and bricked:  # a table on its own between two operations: Vela
        # 5.2 runs it as a 1x1 pooling operation with the table in its output stage (the block
        # model, its first block unoverlapped); a table fused into a MAC op runs in that op's
        # output stage at lut_cycles instead
        shape = nhwc(out.shape)
        q = Query("pool", shape, shape)
        transfer = map_transfer(config, ins[0], out, io)
        return (
            0,
            mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0],
            None,
            None,
        )
    if op.kind == "LUT":  # on a region's NHWC input or output: one element per cycle per 128
        # MACs of the array (measured on Vela 5.2's per-layer report of EfficientNet)
        return 0, out_elems * STANDALONE_LUT_MACS / config.macs_per_cycle, None, None
    if op.params["op"] in BLOCK_POOLS and len(ins[0].shape) == 4:
        # Vela 5.2 runs MAX_POOL_2D and AVERAGE_POOL_2D in the block model, the first block
        # unoverlapped and no fixed cost; its output stage at the max-pool rate (regor's
        # index 6) or, averaging, the plain output rate (index 7)
        a = op.params["attrs"]
        q = Query(
            "pool",
            tuple(ins[0].shape[1:]),
            tuple(out.shape[1:]),
            tuple(a["pool_size"]),
            tuple(a["strides"]),
            tuple(a.get("dilation", (1, 1))),
            _bits(ins[0]),
        )
        rate = BLOCK_POOLS[op.params["op"]]
        transfer = map_transfer(config, ins[0], out, io)
        compute = mac_cycles(config, q, getattr(config, rate), transfer, fill=True)[0]
        return 0, compute, None, None
    if op.params["op"] == "qnn.mean" and len(ins[0].shape) == 4:
        return 0, mean_as_vela(config, ins[0].shape, _bits(ins[0]))[0], None, None
    if op.params["op"] == "argmax":
        return 0, argmax_as_vela(config, ins[0].shape)[0], None, None
    if op.params["op"] == "resize_bilinear_taps" and len(ins[0].shape) == 4:
        taps = op.arrays["c0"]
        return 0, resize_bilinear_as_vela(config, ins[0].shape, out.shape, taps), None, None
    unit = out_elems * _unit_cycles(op.params["op"], config, ins, out_elems)
    if op.params["op"] in POOL_OPS and ins[0].dtype == "int16":
        unit *= 2  # Vela: 16-bit pooling takes twice the cycles (not on a U55-32)
    return 0, unit, None, None


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
    out, slack = [], None
    for op in program.ops:
        out.append(op_cycles(op, program, config, cascaded, fused, slack))
        slack = out[-1]["cycles"]
    return out
