"""What a converter sees: one TFLite operator, its tensors, and helpers that build typed nodes.

Every node a converter builds through ``OpContext`` carries the operator's span and is typed as
soon as it is built (its arguments are already typed), so a converter can read the shapes of its
inputs and a type error names the TFLite operator.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from partita.frontends.builder import NodeBuilder
from partita.frontends.errors import TFLiteConversionError, TFLiteFormatError

from partita.ir import Constant, Expr, Span, TupleGetItem
from partita.ops import get_op

from .reader import Operator, Tensor

# ActivationFunctionType: NONE, RELU, RELU_N1_TO_1, RELU6 (TANH and SIGN_BIT are not fused here).
ACTIVATION_RANGES = {1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


class Unsupported(Exception):
    """Raised by a converter for an operator it cannot convert; the reason joins the report."""


class OpContext(NodeBuilder):
    """One operator being converted (see the module docstring)."""

    def __init__(self, graph, op: Operator, options: dict):
        self.graph, self.op, self.options = graph, op, options
        out = graph.model.tensors[op.outputs[0]].name if op.outputs else None
        self.span = Span(index=op.index, op_type=op.name, tensor=out)
        self.semantics = graph.semantics

    # ---- tensors --------------------------------------------------------------------------------

    def tensor(self, i: int) -> Tensor:
        """Input ``i``'s tensor record (fails if the operator does not have it)."""
        if i >= len(self.op.inputs) or self.op.inputs[i] < 0:
            self.fail(f"input {i} is missing")
        return self.graph.model.tensors[self.op.inputs[i]]

    def has_input(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] >= 0

    def out(self, i: int = 0) -> Tensor:
        if i >= len(self.op.outputs):
            self.fail(f"output {i} is missing")
        return self.graph.model.tensors[self.op.outputs[i]]

    def expr(self, i: int) -> Expr:
        """Input ``i`` as an expression (a graph input, a constant or an earlier result)."""
        return self.graph.value(self.tensor(i), self)

    def shape(self, i: int) -> tuple[int, ...]:
        return self.expr(i).checked_type.shape

    def constant(self, i: int, what: str) -> np.ndarray:
        """Input ``i``'s constant data; a non-constant input is unsupported."""
        t = self.tensor(i)
        if t.data is None:
            raise Unsupported(f"{what} ({t.name!r}) must be a constant")
        return t.data

    def opt(self, name: str):
        return self.options[name]

    # ---- building nodes -------------------------------------------------------------------------

    def item(self, tup: Expr, index: int, tensor: Tensor) -> TupleGetItem:
        return super().item(tup, index, dataclasses.replace(self.span, tensor=tensor.name))

    def fail(self, message: str):
        raise TFLiteConversionError(
            f"operator #{self.op.index} {self.op.name} (output {self.span.tensor!r}): {message}"
        )

    # ---- quantization ---------------------------------------------------------------------------

    def quantized(self) -> bool:
        """Whether the operator runs on quantized integers (its first input is quantized)."""
        t = self.tensor(0)
        return t.quantized and t.dtype in INT_RANGES

    def scale(self, t: Tensor, per_channel: bool = False) -> Constant:
        """t's scale as a float32 constant: a scalar, or one per channel if asked."""
        if not t.quantized:
            self.fail(f"{t.describe()} has no quantization parameters")
        if t.per_channel and not per_channel:
            self.fail(f"{t.describe()} is quantized per channel; a single scale is needed")
        s = t.scale if per_channel and t.per_channel else t.scale[0]
        return self.const(np.asarray(s, np.float32))

    def zero_point(self, t: Tensor, per_channel: bool = False) -> Constant:
        if not t.quantized:
            self.fail(f"{t.describe()} has no quantization parameters")
        zp = t.zero_point if per_channel and t.per_channel else t.zero_point[0]
        return self.const(np.asarray(zp, np.int32))

    def qparams(self, t: Tensor) -> tuple[Constant, Constant]:
        """(scale, zero point) of a per-tensor quantized tensor; the scale must be positive."""
        scale = self.scale(t)
        if not float(scale.data) > 0:
            self.fail(f"{t.describe()} has scale {float(scale.data)}; it must be positive")
        return scale, self.zero_point(t)

    def sem(self, op_name: str) -> str:
        """The semantics to give ``op_name``: the frontend's if the op offers it, else "tflite"."""
        choices = _semantics_choices(op_name)
        return self.semantics if self.semantics in choices else "tflite"

    # ---- fused activations ----------------------------------------------------------------------

    def activation(self, x: Expr, out: Tensor, code: int | None = None) -> Expr:
        """Apply the fused activation ``code`` (default: the options') to ``x``, which holds
        ``out``'s values: a clip on the integers with TFLite's CalculateActivationRangeQuantized
        bounds, or the float activation."""
        code = self.options.get("FusedActivationFunction", 0) if code is None else code
        if code == 0:
            return x
        if code not in ACTIVATION_RANGES:
            raise Unsupported(f"fused activation {ACTIVATION_NAMES.get(code, code)}")
        lo, hi = ACTIVATION_RANGES[code]
        dtype = x.checked_type.dtype
        if dtype in INT_RANGES:
            lo, hi = quantized_activation_range(out, lo, hi, dtype)
            return self.call("clip", x, a_min=lo, a_max=hi)
        if code == 1:
            return self.call("nn.relu", x)
        return self.call("clip", x, a_min=lo, a_max=hi)


def quantized_activation_range(out: Tensor, lo: float, hi: float | None, dtype: str):
    """TFLite's CalculateActivationRangeQuantized: zp + round(f / scale) in float32, within the
    dtype's range."""
    qmin, qmax = INT_RANGES[dtype]
    if out.scale is None or out.zero_point is None or not len(out.scale) or not len(
            out.zero_point):
        raise TFLiteFormatError(
            f"{out.describe()} has no quantization parameters, but its operator computes "
            f"{dtype} values with a fused activation, whose bounds TFLite derives from them"
        )
    scale, zp = np.float32(out.scale[0]), int(out.zero_point[0])
    if not (np.isfinite(scale) and scale > 0):
        raise TFLiteFormatError(
            f"{out.describe()} has quantization scale {float(scale)!r}; TFLite requires a "
            f"positive, finite scale (its interpreter refuses the model at setup)"
        )

    def quantize(f: float) -> int:
        with np.errstate(over="ignore"):
            v = float(np.float32(f) / scale)
        v = min(max(v, -(2.0**40)), 2.0**40)  # a tiny scale overflows float32: saturate, as the
        return zp + int(np.sign(v) * np.floor(abs(v) + 0.5))  # clamp to the dtype does next

    return max(qmin, quantize(lo)), (qmax if hi is None else min(qmax, quantize(hi)))


_CHOICES: dict[str, tuple[str, ...]] = {}


def _semantics_choices(op_name: str) -> tuple[str, ...]:
    if op_name not in _CHOICES:
        fields = {f.name: f for f in dataclasses.fields(get_op(op_name).attrs_type)}
        f = fields.get("semantics")
        _CHOICES[op_name] = tuple(f.metadata.get("choices", ())) if f is not None else ()
    return _CHOICES[op_name]
