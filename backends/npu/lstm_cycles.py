"""The integer LSTM's operations as Vela runs them (docs/npu.md, the LSTM subsection): which
operations belong to the lowering (lstm_ops.py), how many times Vela runs one of a batch, and
which native int16 activations Vela fuses into the elementwise operation producing their
input. cycles.py charges them; moved out of it in session 19 to keep one concept per module."""

from __future__ import annotations

from .program import NPUOp, Program

LSTM_UNITS = ("lstm_add_sat", "lstm_mul_shift", "lstm_mul_requantize")
TINY_ELEMENTS = 256  # an elementwise op of at most this many outputs pays no fixed cost
FUSING_PRODUCERS = ("lstm_add_sat", "lstm_mul_shift")


def native_activation(op: NPUOp) -> bool:
    """An int16 table of gemmlowp's sigmoid/tanh (npu.lstm_table): the hardware's int16
    sigmoid/tanh activation, computed in the output stage, no table transferred."""
    return op.kind == "LUT" and op.params.get("op") == "lstm_table"


def lstm_op(op: NPUOp, out) -> bool:
    """An operation of the integer LSTM's lowering (lstm_ops.py), which keeps the fixed cost
    per operation and sequence its Vela figures were matched with (test_npu_lstm.py)."""
    name = op.params.get("op")
    return name in LSTM_UNITS or name == "lstm_table" or (op.kind == "FC" and out.dtype == "int32")


def lstm_sequences(op: NPUOp, out) -> int:
    """How many times Vela runs an LSTM operation of a batch: once per sequence (ethosu's
    lstm.py lowers each batch row to its own operations); 1 for any other operation."""
    return int(out.shape[0]) if lstm_op(op, out) and len(out.shape) == 2 else 1


def fused_activations(program: Program) -> set[int]:
    """The outputs of the native activations Vela fuses into the elementwise op producing
    their input: the value one reads has no other reader (or, read at an offset, every reader
    reads a box of it, as the gates do; slices are walked through), so the producer can write
    the activated value; otherwise (the cell state, also read by the next step) Vela runs it as
    an operation of its own. One pass over the program builds
    its producer and reader maps (a 64-step LSTM: ~1,000 operations, ~300 activations)."""
    producers = {o.output: o for o in program.ops}
    readers: dict[int, list[NPUOp]] = {}
    for o in program.ops:
        for t in set(o.inputs):
            readers.setdefault(t, []).append(o)
    outputs = set(program.outputs)

    def viewed(o: NPUOp, t: int) -> bool:  # o reads t only at offsets
        views = o.params.get("views") or [None] * len(o.inputs)
        return all(v is not None for s, v in zip(o.inputs, views) if s == t)

    def fused(op: NPUOp) -> bool:
        t = op.inputs[0]
        if viewed(op, t):
            alone = all(viewed(r, t) for r in readers[t])
        else:
            alone = readers.get(t) == [op]
        if not alone or t in outputs:
            return False
        producer = producers.get(t)
        while producer is not None and producer.params.get("op") == "strided_slice":
            t = producer.inputs[0]
            if t in outputs or any(
                r.params.get("op") != "strided_slice" for r in readers.get(t, [])
            ):
                return False
            producer = producers.get(t)
        return producer is not None and producer.params.get("op") in FUSING_PRODUCERS

    return {op.output for op in program.ops if native_activation(op) and fused(op)}
