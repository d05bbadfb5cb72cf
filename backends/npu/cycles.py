"""The cycle model: per operation, compute cycles from the MAC array's block shape, memory
cycles from bytes moved per memory and its bandwidth, their overlap, and a fixed overhead.

    MAC ops    Vela's block model (blocks.py): the output block chosen to fit the shared buffer,
               per block kernel elements x 32-channel passes x micro-blocks (at least the
               weight-buffer refill), the output stage overlapping the next block
    unit ops   output elements / elementwise rate (pooling and mean: input elements)
    memory     feature maps read and written where they live, weights and tables from the
               weight memory, halo rows re-read by each extra stripe; bytes / bandwidth, plus
               the first-byte latency of off-chip transfers
    total      max(compute, memory) + per-operation overhead (weight DMA double-buffers under
               compute; the NPU reads SRAM directly)
"""

from __future__ import annotations

from math import ceil

import numpy as np

from .blocks import Query, mac_cycles
from .config import NPUConfig
from .program import NPUOp, Program
from .vela_ops import VELA_PASSES

MEMORY_BANDWIDTH = ("sram", "dram", "flash")


def _bandwidth(config: NPUConfig, memory: str) -> float:
    if memory == "sram":
        return config.sram_bandwidth
    if memory == config.weight_memory:
        return config.weight_bandwidth
    return config.spill_bandwidth or config.weight_bandwidth


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
POOL_OPS = ("nn.max_pool2d", "qnn.avg_pool2d", "qnn.mean")
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


def _mac_query(op: NPUOp, ifm: tuple, ofm: tuple) -> tuple[Query, int]:
    """The block model's view of a MAC-array op, and its MAC count."""
    w = op.arrays["weights"]
    if op.kind == "FC":
        oc, k = w.shape
        rows = int(np.prod(ofm[:-1]))
        return Query("fc", (1, rows, k), (1, rows, oc)), rows * oc * k
    _, oh, ow, oc = ofm
    kh, kw = w.shape[1], w.shape[2]
    p = op.params
    kind = "conv" if op.kind == "CONV" else "dwconv"
    query = Query(
        kind, tuple(ifm[1:]), (oh, ow, oc), (kh, kw), tuple(p["strides"]), tuple(p["dilation"])
    )
    depth = w.shape[3] if op.kind == "CONV" else 1
    return query, oh * ow * oc * kh * kw * depth


def _offchip_ifm_read(config: NPUConfig, q: Query, block, t) -> tuple[float, float]:
    """Bytes a MAC op reads from an off-chip input map (every output block fetches its input
    block, with the kernel's overlap; a convolution once per block of output channels) and the
    burst efficiency: an NHWC read returns one input block's depth per burst (Vela's
    ``_estimate_memory_transfer_efficiency``)."""
    (oh, ow, oc), (bh, bw, bd) = q.ofm, block.ofm
    item = np.dtype(t.dtype).itemsize
    ih, iw = min(block.ifm[0], q.ifm[0]), min(block.ifm[1], q.ifm[1])
    fetch = ih * iw * q.ifm[2] * item * ceil(oh / bh) * ceil(ow / bw)
    if q.kind in ("conv", "fc"):
        fetch *= ceil(oc / bd)
    burst = config.offchip_burst_bytes
    return fetch, burst / min(burst, block.ifm[2] * item)


def op_cycles(op: NPUOp, program: Program, config: NPUConfig) -> dict:
    """Cycles, MACs, utilisation and bytes per memory of one operation."""
    out = program.tensors[op.output]
    ins = [program.tensors[t] for t in op.inputs]
    macs, compute, block, query = _compute(op, ins, out, config)
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
        # a region input read from off-chip memory: Vela's burst-inefficient first layer (our
        # spilled maps stream at full bandwidth instead, standing in for Vela's cascading)
        if i == 0 and block is not None and t.memory != "sram" and op.inputs[0] in program.inputs:
            add(t.memory, *_offchip_ifm_read(config, query, block, t))
        else:
            add(t.memory, t.nbytes * halo)
    add(out.memory, out.nbytes)
    constant_bytes = sum(_constant_bytes(name, a) for name, a in op.arrays.items())
    if constant_bytes:
        add(config.weight_memory, constant_bytes)
    memory = sum(n / _bandwidth(config, m) for m, n in scaled.items())
    memory += sum(config.dma_latency_cycles for m in moved if m != "sram")
    total = int(ceil(max(compute, memory))) + config.op_overhead_cycles
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


def _compute(op: NPUOp, ins, out, config: NPUConfig):
    """(MACs, compute cycles, the MAC array's block or None, its block query or None)."""
    out_elems = int(np.prod(out.shape))
    if op.kind in ("CONV", "DWCONV", "FC"):
        query, macs = _mac_query(op, ins[0].shape, out.shape)
        # a fused activation table runs in the output stage at the LUT's rate (Vela's index 0)
        lut = config.lut_cycles if "table" in op.arrays else 0.0
        compute, block = mac_cycles(config, query, max(config.conv_output_cycles, lut))
        if op.kind == "DWCONV" and ins[0].dtype == "int16":
            compute *= 2  # Vela: 16-bit depthwise takes twice the cycles per micro-block
        return macs, compute, block, query
    if op.kind == "LUT":
        return 0, out_elems * config.lut_cycles, None, None
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
    return [op_cycles(op, program, config) for op in program.ops]
