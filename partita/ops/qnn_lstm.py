"""The integer LSTM's elementwise steps as single ops: what the NPU runs of TFLite's
UNIDIRECTIONAL_SEQUENCE_LSTM (lstm_eval's 8x8->16 path) on its elementwise unit, as Vela lowers
it (an ADD per gate, two MULs and an ADD for the cell, a MUL for the hidden state).

The frontend imports the LSTM in plain integer ops (frontends/tflite/ops_lstm.py); the NPU's
pattern table (backends/npu/lstm_ops.py) recognises these chains and runs each as one of the ops
below, which compute the same chain of plain ops, so the bits are the interpreter's:

    lstm_add_sat(a, b)          int32(a) + int32(b) (the unit's output stage saturates it)
    lstm_mul_shift(a, b)        RoundingDivideByPOT(int32(a) * int32(b), shift)
    lstm_mul_requantize(a, b, ...)  qnn.requantize of int32(a) * int32(b)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .qnn import RequantizeAttrs, requantize
from .registry import Attrs, NoAttrs, register_op
from .relations import broadcast_shapes, fail, tensor
from .tensor import divide

_INT = ("int8", "int16", "int32")


def _operands(types) -> tuple:
    a, b = tensor(types[0], "lhs"), tensor(types[1], "rhs")
    if a.dtype not in _INT or b.dtype not in _INT:
        fail(f"LSTM elementwise operands must be int8/int16/int32, got {a.dtype} and {b.dtype}")
    return broadcast_shapes(a.shape, b.shape)


def _int32_rel(types, attrs) -> TensorType:
    return TensorType(_operands(types), "int32")


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int32(a) * int32(b), wrapping as int32 arithmetic does (the frontend's multiply)."""
    return np.multiply(a.astype(np.int32), b.astype(np.int32))


@register_op("lstm_add_sat", inputs=("lhs", "rhs"), attrs=NoAttrs, type_rel=_int32_rel)
def lstm_add_sat(lhs, rhs, attrs):
    """int32(lhs) + int32(rhs) in int32 arithmetic; the NPU unit's clamp saturates the sum to
    its output type (a gate's pre-activation, the new cell state)."""
    return np.add(lhs.astype(np.int32), rhs.astype(np.int32))


@dataclass(frozen=True)
class LstmShiftAttrs(Attrs):
    """gemmlowp's RoundingDivideByPOT exponent."""

    shift: int = 0

    def validate(self):
        if not 0 <= self.shift <= 31:
            raise ValueError(f"shift must be in [0, 31], got {self.shift}")


@register_op("lstm_mul_shift", inputs=("lhs", "rhs"), attrs=LstmShiftAttrs, type_rel=_int32_rel)
def lstm_mul_shift(lhs, rhs, attrs):
    """RoundingDivideByPOT(int32(lhs) * int32(rhs), shift): ties away from zero, the C
    (truncating) division of p + sign(p) * 2**(shift-1) by 2**shift (int32 arithmetic)."""
    p = _product(lhs, rhs)
    if attrs.shift == 0:
        return p
    half = np.int32(1 << (attrs.shift - 1))
    offset = np.where(p < 0, -half, half).astype(np.int32)
    return divide(np.add(p, offset), np.asarray(1 << attrs.shift, np.int32), None)


def _mul_requantize_rel(types, attrs) -> TensorType:
    return TensorType(_operands(types), attrs.out_dtype)


@register_op(
    "lstm_mul_requantize",
    inputs=("lhs", "rhs", "input_scale", "input_zero_point", "output_scale", "output_zero_point"),
    attrs=RequantizeAttrs,
    type_rel=_mul_requantize_rel,
)
def lstm_mul_requantize(lhs, rhs, in_scale, in_zp, out_scale, out_zp, attrs):
    """qnn.requantize(int32(lhs) * int32(rhs), ...): the LSTM's hidden state, o * tanh(c)
    rescaled to int8."""
    return requantize(_product(lhs, rhs), in_scale, in_zp, out_scale, out_zp, attrs)
