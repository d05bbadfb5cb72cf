"""One NPU operation's compute cycles (cycles.py's ``op_cycles`` adds its memory traffic and
fixed costs): a MAC operation in the block model (``mac_query``, blocks.mac_cycles, the stripe
Vela cascades it in), an elementwise one at its output stage's rate or memory bound, a
standalone table or QUANTIZE as a 1x1 pool, pools in the block model, MEAN / ARG_MAX / bilinear
resizes as Vela's decompositions (vela_decompose.py), the rest at the elementwise or pooling
unit's rate per output element (``unit_cycles``); and whether Vela stages a MAC operation's
weights in SRAM (``staged_weights``, weight_staging.py)."""

from __future__ import annotations

import numpy as np

from .blocks import Query, find_block, mac_cycles
from .config import NPUConfig
from .lstm_cycles import lstm_op, native_activation
from .program import NPUOp
from .vela_access import (
    elementwise_cycles,
    elementwise_rate_name,
    is_elementwise,
    map_transfer,
    nhwc,
)
from .vela_cascade import input_rows
from .vela_decompose import (
    STANDALONE_LUT_MACS,
    argmax_as_vela,
    mean_op_as_vela,
    mean_staged,
    resize_bilinear_as_vela,
)
from .vela_ops import VELA_PASSES
from .vela_weights import weight_stream_bytes
from .weight_staging import weights_staged

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


def unit_cycles(name: str, config: NPUConfig, ins, out_elems: int) -> float:
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


def requantizes16(op: NPUOp, ins, out) -> bool:
    """A 16-bit to 16-bit requantize on an NHWC map (QUANTIZE in 16x8, npu.requantize16)."""
    rq = op.kind == "UNIT" and op.params.get("op") == "qnn.requantize" and len(ins) == 1
    return rq and ins[0].dtype == out.dtype == "int16" and len(out.shape) == 4


def activates16(op: NPUOp, ins=None, out=None) -> bool:
    """A 16x8 LOGISTIC or TANH (an int16 table of TFLite's function here): Vela 5.2 runs it as
    its native int16 sigmoid / tanh, a 1x1 pool with 16-bit input and no table (its debug
    database, the one-op 4x4x8 models: 'Sigmoid', mac and ao cycles 160, cmd 40, no weight
    memory read; 360 op cycles on u55-256, 1,258 on u65-256)."""
    name = op.params.get("op")
    if op.kind != "LUT" or name not in ("qnn.sigmoid", "qnn.tanh") or len(op.inputs) != 1:
        return False
    table = op.arrays.get("table")
    return table is not None and table.dtype == np.int16


def resizes16(op: NPUOp, ins, out) -> bool:
    """A 16-bit nearest resize of an NHWC map to twice its rows and columns."""
    if op.params.get("op") != "image.resize2d" or len(out.shape) != 4 or len(ins) != 1:
        return False
    (_, h, w, _), (_, oh, ow, _) = ins[0].shape, out.shape
    return ins[0].dtype == out.dtype == "int16" and (oh, ow) == (2 * h, 2 * w)


def mac_query(
    op: NPUOp, ifm: tuple, ofm: tuple, bits: int = 8, upscale: int = 1
) -> tuple[Query, int]:
    """The block model's view of a MAC-array op, and its MAC count (``upscale``: the input is
    read upscaled, vela_resample.py)."""
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
        upscale,
    )
    depth = w.shape[3] if op.kind == "CONV" else 1
    return query, oh * ow * oc * kh * kw * depth


def standalone_table(op: NPUOp) -> bool:
    """A table lookup Vela runs as a pooling operation of its own (not its native elementwise
    ABS/NEG, not a rescaling QUANTIZE, not the int16 sigmoid/tanh activation)."""
    return (
        op.kind == "LUT"
        and not is_elementwise(op)
        and not native_activation(op)
        and not activates16(op)
        and op.params.get("op") != "qnn.requantize"
    )


def map_bits(t) -> int:
    return 16 if t.dtype == "int16" else 8


def constant_record_bytes(op: NPUOp, query, config: NPUConfig, block_depth: int) -> int:
    """The bytes Vela moves to stage a MAC operation's weights: its encoded weight stream and
    each output channel's bias and scale record (vela_weights.py)."""
    return weight_stream_bytes(op, config, block_depth, query.bits)


def staged_weights(op: NPUOp, ins, out, config: NPUConfig, slack: float | None, upscale=1) -> bool:
    """Whether Vela stages this MAC operation's weights in SRAM (weight_staging.py; True for
    any other operation and for the integer LSTM's, whose figures were matched staged)."""
    if op.kind == "UNIT" and op.params.get("op") == "qnn.mean" and len(ins[0].shape) <= 4:
        return mean_staged(config, op, ins[0], out, slack)
    if op.kind not in MAC_KINDS or lstm_op(op, out):
        return True
    query, _ = mac_query(op, ins[0].shape, out.shape, map_bits(ins[0]), upscale)
    block = find_block(config, query)
    nbytes = constant_record_bytes(op, query, config, block.ofm[2])
    return weights_staged(config, query, block, nbytes, slack)


def compute_cycles(
    op: NPUOp,
    ins,
    out,
    config: NPUConfig,
    io=("sram", "sram"),
    bricked=False,
    staged=True,
    stripe: int | None = None,
    upscale: int = 1,
    bricks: tuple[bool, bool] = (False, False),
):
    """(MACs, compute cycles, the MAC array's block or None, its block query or None);
    ``staged``: whether the scales and biases are fetched from SRAM (else the weight memory);
    ``stripe``: the output rows per stripe Vela cascades the operation in (vela_cascade.py:
    its block is chosen for the stripe, its cycles counted over the whole map); ``upscale``:
    the input ``ins[0]`` is read upscaled (vela_resample.py); ``bricks``: whether a MAC
    operation's input and output are in Vela's NHCWB16 bricks (vela_access.map_transfer)."""
    out_elems = int(np.prod(out.shape))
    if op.kind in ("CONV", "DWCONV", "FC"):
        bits = map_bits(ins[0])
        query, macs = mac_query(op, ins[0].shape, out.shape, bits, upscale)
        # a fused activation table runs in the output stage at the LUT's rate (Vela's index 0);
        # 40-bit accumulators (16-bit inputs) drain at the multiplier's rate (Vela's index 3)
        # (not a fused QUANTIZE's: Vela runs it as an operation of its own, vela_quantize.py)
        fused = "table" in op.arrays and op.params.get("table_op") != "qnn.requantize"
        lut = config.lut_cycles if fused else 0.0
        stage = config.mul_output_cycles if bits == 16 else config.conv_output_cycles
        transfer = map_transfer(config, ins[0], out, io, bricks)
        latency = None if staged else config.dma_latency_cycles
        block = None
        if stripe is not None and op.kind != "FC" and stripe < query.ofm[0]:
            rows = input_rows(op, stripe, query.ifm[0])
            striped = query._replace(ifm=(rows, *query.ifm[1:]), ofm=(stripe, *query.ofm[1:]))
            block = find_block(config, striped)
        compute, block = mac_cycles(
            config,
            query,
            max(stage, lut),
            transfer,
            fill=True,
            const_latency=latency,
            block=block,
        )
        return macs, compute, block, query
    if is_elementwise(op):
        rate = getattr(config, elementwise_rate_name(op))
        return 0, elementwise_cycles(config, ins, out, rate), None, None
    if op.kind == "LUT" and op.params.get("op") == "qnn.requantize" and len(out.shape) == 4:
        # Vela runs QUANTIZE (8-bit to 8-bit) as a 1x1 average pool that rescales, not a table
        q = Query("pool", tuple(out.shape[1:]), tuple(out.shape[1:]))
        return 0, mac_cycles(config, q, config.conv_output_cycles)[0], None, None
    if requantizes16(op, ins, out) or activates16(op):
        # a 16x8 QUANTIZE: Vela 5.2's 1x1 average pool that rescales (its debug database,
        # maximum's Quantize: mac and ao cycles 160 for 4x4x8 int16 maps), 16-bit input, in the
        # block model, its first block unoverlapped and no fixed cost
        shape = nhwc(out.shape)
        q = Query("pool", shape, shape, bits=16)
        transfer = map_transfer(config, ins[0], out, io, bricks)
        return (
            0,
            mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0],
            None,
            None,
        )
    if resizes16(op, ins, out):
        # a 16x8 nearest 2x resize: Vela 5.2's AvgPool reading the input upscaled (its debug
        # database, resize_nearest 4x4x8 -> 8x8x8: ofm block 6x6x8, ifm block 4x4x8, 894 op
        # cycles on u55-256, 1,915 on u65-256), in the block model, no fixed cost
        q = Query("pool", nhwc(ins[0].shape), nhwc(out.shape), bits=16, upscale=2, rounding=1)
        transfer = map_transfer(config, ins[0], out, io, bricks)
        return (
            0,
            mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0],
            None,
            None,
        )
    if native_activation(op):  # the output stage's int16 sigmoid/tanh
        return 0, out_elems * config.lut_cycles, None, None
    if standalone_table(op) and bricked:  # a table on its own between two operations: Vela
        # 5.2 runs it as a 1x1 pooling operation with the table in its output stage (the block
        # model, its first block unoverlapped); a table fused into a MAC op runs in that op's
        # output stage at lut_cycles instead
        shape = nhwc(out.shape)
        q = Query("pool", shape, shape)
        transfer = map_transfer(config, ins[0], out, io, bricks)
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
            map_bits(ins[0]),
        )
        rate = BLOCK_POOLS[op.params["op"]]
        transfer = map_transfer(config, ins[0], out, io, bricks)
        compute = mac_cycles(config, q, getattr(config, rate), transfer, fill=True)[0]
        return 0, compute, None, None
    if op.params["op"] == "qnn.mean" and len(ins[0].shape) <= 4:
        dst = (io[1], bricks[1])
        cycles = mean_op_as_vela(config, op, ins[0], out, io[0], bricked, staged, dst)[0]
        return 0, cycles, None, None
    if op.params["op"] == "argmax":
        return 0, argmax_as_vela(config, ins[0].shape, io)[0], None, None
    if op.params["op"] == "resize_bilinear_taps" and len(ins[0].shape) == 4:
        taps = op.arrays["c0"]
        compute = resize_bilinear_as_vela(config, ins[0].shape, out.shape, taps, io)
        return 0, compute, None, None
    unit = out_elems * unit_cycles(op.params["op"], config, ins, out_elems)
    if op.params["op"] in POOL_OPS and ins[0].dtype == "int16":
        unit *= 2  # Vela: 16-bit pooling takes twice the cycles (not on a U55-32)
    return 0, unit, None, None
