"""Vela 5.2's program for TFLite's integer LSTM, as partita NPU operations, costed in partita's
cycle model: the comparison of the cycle model with Vela on the same program (docs/npu.md,
the UNIDIRECTIONAL_SEQUENCE_LSTM section, session 22). partita never runs this program; its own
lowering is lstm_ops.py's (one input FC for all steps, exact with TFLite).

Vela 5.2 (regor) lowers UNIDIRECTIONAL_SEQUENCE_LSTM per batch row (all rows at once when time
major), step and gate; read off its per-layer report (``vela --verbose-performance``), in its
order:

    per batch row (not time major): MemoryCopy of the initial hidden state (int8)
    per step, per gate in (output, input, cell, forget):
        FullyConnected of the hidden state (int8 -> int16), FullyConnected of the step's input
        (read at an offset; int8 -> int16), Add (int16) with the gate's fused Sigmoid or Tanh
        (a 0-cycle row), then a Clamp (int16) after a Sigmoid, a Mul (i * c~, int16) after the
        cell gate's Tanh
    (first step of a batch row) MemoryCopy of the initial cell state (int16)
    Mul (c * f, int16), Add (the new cell state, int16), Clamp (the cell state), Tanh
    (standalone, int16), Mul (o * tanh(c): the int8 hidden state), MemoryCopy of the hidden
    state into the output sequence

Each becomes the partita operation that any other model would have for it, costed by the
existing functions: FullyConnected an int8 FC writing int16 (``cycles.op_cycles``), Add and Mul
the native elementwise ``qnn.add`` / ``qnn.mul``, the standalone Tanh a 16-bit ``qnn.tanh``
table (Vela's native int16 tanh, ``op_compute.activates16``), Clamp and MemoryCopy regor's
1x1-pool copy (``vela_pad.copy_cycles``: Vela charges its Clamp what it charges a MemoryCopy of
the same map, 153 and 153 cycles for 16 int16 values on u55-256, 851 and 851 from DRAM to DRAM
on u65-256). The LSTM's state (TFLite's variable tensors) and the region's maps
live in the preset's input/output memory (DRAM on the U65: Vela places variable tensors with the
graph's inputs and outputs); the other maps in SRAM.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

import numpy as np

from .config import NPUConfig
from .program import NPUOp, Program, TensorDesc
from .vela_copy import copy_shape
from .vela_pad import copy_cycles
from .weight_staging import next_slack

GATES = ("output", "input", "cell", "forget")  # Vela's order
GATE_INDEX = {"input": 0, "forget": 1, "cell": 2, "output": 3}  # TFLite's operand order
COPY, FC, ADD, MUL, CLAMP = "MemoryCopy", "FullyConnected", "Add", "Mul", "Clamp"
SIGMOID, TANH = "Sigmoid", "Tanh"
KINDS = (COPY, FC, ADD, SIGMOID, TANH, CLAMP, MUL)


@dataclass(frozen=True)
class LSTMShape:
    """An UNIDIRECTIONAL_SEQUENCE_LSTM's dimensions and weights, as Vela lowers it."""

    batch: int
    time: int
    features: int
    units: int
    time_major: bool
    graph_input: bool  # the input sequence is the graph's input (else an intermediate map)
    graph_output: bool  # the output sequence is the graph's output
    input_weights: tuple[np.ndarray, ...]  # per gate (input, forget, cell, output): units x F
    recurrent_weights: tuple[np.ndarray, ...]  # per gate: units x units

    @classmethod
    def from_tflite(cls, model, op) -> LSTMShape:
        """The shape of ``op``, an UNIDIRECTIONAL_SEQUENCE_LSTM of ``model`` (a
        frontends.tflite.reader Model)."""
        t = model.tensors
        x = t[op.inputs[0]].shape
        major = bool(op.options.get("TimeMajor", False))
        time, batch = (x[0], x[1]) if major else (x[1], x[0])
        weights = [t[op.inputs[i]].data for i in range(1, 9)]
        return cls(
            batch=int(batch),
            time=int(time),
            features=int(x[-1]),
            units=int(weights[0].shape[0]),
            time_major=major,
            graph_input=op.inputs[0] in model.inputs,
            graph_output=op.outputs[0] in model.outputs,
            input_weights=tuple(weights[:4]),
            recurrent_weights=tuple(weights[4:]),
        )


@dataclass
class VelaOp:
    """One row of Vela's per-layer report: its kind, the partita operation costed for it (None
    for a fused activation, 0 cycles) and how it is costed."""

    kind: str
    op: NPUOp | None = None
    cost: str = "op_cycles"  # or "clamp", "copy", "fused"
    source: int | None = None  # the tensor a copy or clamp reads


class _Builder:
    def __init__(self, config: NPUConfig):
        self.config = config
        self.tensors: list[TensorDesc] = []
        self.ops: list[VelaOp] = []
        self.outputs: list[int] = []

    def tensor(self, shape, dtype, memory="sram", state=False) -> int:
        self.tensors.append(TensorDesc(tuple(shape), dtype, memory))
        if state:
            self.outputs.append(len(self.tensors) - 1)
        return len(self.tensors) - 1

    def state(self, shape, dtype) -> int:
        return self.tensor(shape, dtype, self.config.io_memory, state=True)

    def add(self, kind, op=None, cost="op_cycles", source=None) -> None:
        self.ops.append(VelaOp(kind, op, cost, source))

    def fc(self, name, src, weights, rows, units, view=None) -> int:
        out = self.tensor((rows, units), "int16")
        arrays = {
            "weights": np.asarray(weights, np.int8),
            "bias": np.zeros(units, np.int32),
            "multiplier": np.full(units, 1 << 30, np.int32),
            "shift": np.zeros(units, np.int32),
            "out_zp": np.zeros(1, np.int32),
            "rq_zp": np.zeros(1, np.int32),
            "w_zp": np.zeros(1, np.int32),
        }
        params = {
            "rounding": "tflite",
            "act_min": -32768,
            "act_max": 32767,
            "out_dtype": "int16",
            "in_zp": 0,
        }
        if view is not None:
            params["views"] = [view]
        self.add(FC, NPUOp("FC", name, [src], out, params, arrays))
        return out

    def elementwise(self, kind, name, a, b, out) -> int:
        op = "qnn.add" if kind == ADD else "qnn.mul"
        lo, hi = (-128, 127) if self.tensors[out].dtype == "int8" else (-32768, 32767)
        arrays = {f"c{i}": np.zeros(1, np.float32 if i % 2 == 0 else np.int32) for i in range(6)}
        params = {
            "op": op,
            "operands": ["t0", "t1", *arrays],
            "act_min": lo,
            "act_max": hi,
            "out_dtype": self.tensors[out].dtype,
        }
        self.add(kind, NPUOp("UNIT", name, [a, b], out, params, arrays))
        return out

    def copy(self, name, src, dst) -> int:
        self.add(COPY, NPUOp("UNIT", name, [src], dst, {"op": "reshape"}), "copy", src)
        return dst

    def clamp(self, name, src, dst) -> int:
        self.add(CLAMP, NPUOp("UNIT", name, [src], dst, {"op": "clip"}), "clamp", src)
        return dst

    def tanh(self, name, src) -> int:
        out = self.tensor(self.tensors[src].shape, "int16")
        table = np.zeros(65536, np.int16)
        params = {"op": "qnn.tanh", "in_dtype": "int16", "out_dtype": "int16"}
        self.add(TANH, NPUOp("LUT", name, [src], out, params, {"table": table}))
        return out


def vela_program(shape: LSTMShape, config: NPUConfig) -> tuple[Program, list[VelaOp]]:
    """Vela's operations for one LSTM (the module docstring), as a partita Program (the LSTM's
    input and output sequences its region input and output) and the report rows in order."""
    b = _Builder(config)
    rows = shape.batch if shape.time_major else 1
    u, f = shape.units, shape.features
    xs = (shape.time, shape.batch, f) if shape.time_major else (shape.batch, shape.time, f)
    x = b.tensor(xs, "int8", config.io_memory if shape.graph_input else "sram")
    ys = (shape.time, shape.batch, u) if shape.time_major else (shape.batch, shape.time, u)
    y = b.tensor(ys, "int8", config.io_memory if shape.graph_output else "sram", state=True)
    const = config.io_memory  # the initial state: a variable tensor's value, where the state is
    for batch in [0] if shape.time_major else range(shape.batch):
        h = b.state((rows, u), "int8")
        c = b.state((rows, u), "int16")
        if not shape.time_major:
            b.copy(f"h0#{batch}", b.tensor((rows, u), "int8", const), h)
        for t in range(shape.time):
            gates = {}
            for gate in GATES:
                g = GATE_INDEX[gate]
                name = f"{gate}_gate#{batch}.{t}"
                rec = b.fc(f"{name}_recurrent_fc", h, shape.recurrent_weights[g], rows, u)
                lo, hi = (
                    ((t, 0, 0), (t + 1, shape.batch, f))
                    if shape.time_major
                    else (
                        (batch, t, 0),
                        (batch + 1, t + 1, f),
                    )
                )
                feat = b.fc(f"{name}_feature_fc", x, shape.input_weights[g], rows, u, [lo, hi])
                act = b.elementwise(ADD, f"{name}_add", feat, rec, b.tensor((rows, u), "int16"))
                b.ops[-1].op.params["activation"] = "tanh" if gate == "cell" else "sigmoid"
                b.add(TANH if gate == "cell" else SIGMOID, cost="fused")
                if gate == "cell":
                    gates[gate] = b.elementwise(
                        MUL, f"{name}_mul", act, gates["input"], b.tensor((rows, u), "int16")
                    )
                else:
                    gates[gate] = b.clamp(f"{name}_clamp", act, b.tensor((rows, u), "int16"))
            cell = f"cell_state#{batch}.{t}"
            if t == 0 and not shape.time_major:
                b.copy(f"c0#{batch}", b.tensor((rows, u), "int16", const), c)
            cf = b.elementwise(
                MUL, f"{cell}_cf_mul", c, gates["forget"], b.tensor((rows, u), "int16")
            )
            s = b.elementwise(ADD, f"{cell}_add", cf, gates["cell"], b.state((rows, u), "int16"))
            c = b.clamp(f"{cell}_clamp", s, b.state((rows, u), "int16"))
            th = b.tanh(f"{cell}_tanh", c)
            h = b.elementwise(
                MUL,
                f"output_state#{batch}.{t}_mul",
                th,
                gates["output"],
                b.state((rows, u), "int8"),
            )
            b.copy(f"output#{batch}.{t}", h, y)
    ops = [v.op for v in b.ops if v.op is not None]
    # the state tensors are TFLite's variable tensors: the graph reads and writes them
    states = [t for t in b.outputs if t != y]
    program = Program(config.name, b.tensors, ops, [x, *states], b.outputs)
    return program, b.ops


def vela_cycles(shape: LSTMShape, config: NPUConfig) -> list[tuple[str, int]]:
    """(Vela's operation kind, partita's cycles) per row of Vela's per-layer report, in order:
    ``vela_program`` costed as cycles.program_cycles does (each operation's slack and exposed
    weight transfer the previous one's: ``next_slack``), Clamps and MemoryCopies as regor's
    copy."""
    from .cycles import op_cycles  # cycles.py imports what this module imports
    from .lstm_cycles import fused_activations
    from .vela_cascade import cascade_stripes, cascaded_offchip

    program, rows = vela_program(shape, config)
    cascaded, fused = cascaded_offchip(program, config), fused_activations(program)
    stripes = cascade_stripes(program, config)
    out, slack, exposed = [], None, None
    for row in rows:
        if row.cost == "fused":
            out.append((row.kind, 0))
            continue
        op = row.op
        src, dst = (
            program.tensors[row.source] if row.source is not None else None,
            program.tensors[op.output],
        )
        if row.cost == "copy":
            shape3 = copy_shape("reshape", src)
            cycles = int(ceil(copy_cycles(config, shape3, src.memory, dst.memory, src.dtype)))
            exposed = None
        elif row.cost == "clamp":  # regor's 1x1 pool NOP with the clamp: its copy
            shape3 = copy_shape("reshape", src)
            cycles = int(ceil(copy_cycles(config, shape3, src.memory, dst.memory, src.dtype)))
            exposed = None
        else:
            cost = op_cycles(op, program, config, cascaded, fused, slack, stripes, exposed)
            cycles = cost["cycles"]
            exposed = next_slack(op, cost)
        out.append((row.kind, cycles))
        slack = cycles
    return out
