"""from_tflite: a TFLite flatbuffer to an IRModule, one converter per operator (table.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from partita.frontends.errors import (
    TFLiteConversionError,
    TFLiteError,
    TFLiteFormatError,
)
from partita.frontends.errors import (
    TFLiteUnsupportedOperatorError as UnsupportedOperatorError,
)

from partita.ir import Constant, Expr, Function, IRModule, Span, TensorType, Tuple, Var
from partita.passes.infer_type import infer_type

from .context import OpContext, Unsupported
from .reader import Model, Operator, Tensor, read_model, read_options
from .table import CONVERTERS

SEMANTICS = ("tflite", "tflite_builtin")
MAX_FILE_BYTES = 2**31  # the flatbuffer format's own limit


def from_tflite(
    path_or_bytes, input_shapes: Mapping[str, tuple] | None = None, semantics: str = "tflite"
) -> IRModule:
    """Convert a TFLite model (a path or the file's bytes) into an IRModule whose ``main`` takes
    the model's inputs, named after their tensors, and returns its outputs.

    Quantized operators become qnn ops bit-exact with TFLite's reference kernels
    (``semantics="tflite"``, the BUILTIN_REF op resolver) or, where partita models them, with
    its optimized builtin kernels (``"tflite_builtin"``). ``input_shapes`` maps input tensor
    names to static shapes for inputs with dynamic dimensions. Every node carries a Span
    (operator index, builtin name, output tensor name); ``mod.attrs["input_names"]`` and
    ``["output_names"]`` give the model's tensor names in order.
    """
    if semantics not in SEMANTICS:
        raise TFLiteError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    model = read_model(_load(path_or_bytes))
    return _Graph(model, semantics, dict(input_shapes or {})).convert()


def _load(path_or_bytes) -> bytes:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    if not isinstance(path_or_bytes, (str, os.PathLike)):
        raise TFLiteError(f"from_tflite takes a path or bytes, not {type(path_or_bytes).__name__}")
    try:
        size = os.path.getsize(path_or_bytes)
        if size > MAX_FILE_BYTES:
            raise TFLiteFormatError(
                f"{os.fspath(path_or_bytes)!r} is {size} bytes, larger than any TFLite model"
            )
        with open(path_or_bytes, "rb") as f:
            return f.read()
    except OSError as e:
        raise TFLiteError(
            f"cannot read the TFLite model {os.fspath(path_or_bytes)!r}: {e.strerror or e}"
        ) from None


class _Graph:
    """Tensor index -> expression while the operators are converted in order."""

    def __init__(self, model: Model, semantics: str, input_shapes: dict):
        self.model, self.semantics = model, semantics
        self.values: dict[int, Expr] = {}
        self.poisoned: set[int] = set()
        self.unsupported: list = []
        self.params = [self._input(model.tensors[i], input_shapes) for i in model.inputs]
        unknown = set(input_shapes) - {model.tensors[i].name for i in model.inputs}
        if unknown:
            names = ", ".join(repr(model.tensors[i].name) for i in model.inputs)
            raise TFLiteError(
                f"input_shapes names {sorted(unknown)}, which are not inputs of "
                f"the model (its inputs: {names})"
            )
        self.reshaped = any(
            p.type_annotation.shape != model.tensors[i].shape
            for p, i in zip(self.params, model.inputs)
        )

    def _input(self, t: Tensor, input_shapes: dict) -> Var:
        if t.index in self.values:
            raise TFLiteFormatError(f"{t.describe()} is listed twice as a model input")
        if t.dtype is None or t.data is not None:
            raise TFLiteFormatError(f"model input {t.describe()} is not a tensor partita can feed")
        shape = t.shape
        if t.name in input_shapes:
            shape = tuple(int(d) for d in input_shapes[t.name])
            if len(shape) != len(t.shape) or min(shape, default=1) < 0:
                raise TFLiteError(
                    f"input_shapes[{t.name!r}] = {list(shape)} does not fit the "
                    f"input's rank-{len(t.shape)} shape {list(t.signature)}"
                )
            fixed = [(a, b) for a, b in zip(shape, t.signature) if b >= 0 and a != b]
            if fixed:
                raise TFLiteError(
                    f"input_shapes[{t.name!r}] = {list(shape)} changes a static "
                    f"dimension of {list(t.signature)}"
                )
        taken = {p.name_hint for p in self.values.values() if isinstance(p, Var)}
        name = t.name if t.name not in taken else f"{t.name}_{t.index}"
        v = Var(name, TensorType(shape, t.dtype), span=Span(tensor=t.name))
        self.values[t.index] = v
        return v

    def value(self, t: Tensor, ctx: OpContext) -> Expr:
        """The expression holding tensor ``t`` (constants are bound on first use)."""
        if t.index in self.values:
            return self.values[t.index]
        if t.data is None:
            ctx.fail(
                f"reads {t.describe()}, which is neither a model input, a constant nor "
                f"the output of an earlier operator"
            )
        c = Constant(t.data, span=Span(index=ctx.op.index, op_type=ctx.op.name, tensor=t.name))
        self.values[t.index] = c
        return c

    def convert(self) -> IRModule:
        for op in self.model.operators:
            self._convert_op(op)
        if self.unsupported:
            raise UnsupportedOperatorError(self.unsupported)
        outputs = []
        for i in self.model.outputs:
            t = self.model.tensors[i]
            if i not in self.values and t.data is not None:
                self.values[i] = Constant(t.data, span=Span(tensor=t.name))
            if i not in self.values:
                raise TFLiteFormatError(f"model output {t.describe()} is never computed")
            outputs.append(self.values[i])
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        fn = Function(self.params, body)
        infer_type(fn)
        names = tuple(self.model.tensors[i].name for i in self.model.inputs)
        attrs = {
            "input_names": names,
            "output_names": tuple(self.model.tensors[i].name for i in self.model.outputs),
        }
        return IRModule({"main": fn}, attrs=attrs)

    def _convert_op(self, op: Operator) -> None:
        entry = CONVERTERS.get(op.name)
        if any(i in self.poisoned for i in op.inputs):
            if entry is None:  # report every unsupported operator, not only the first in a chain
                return self._unsupported(op, "no converter for this operator")
            self.poisoned.update(op.outputs)  # downstream of an unsupported operator
            return
        if entry is None:
            return self._unsupported(op, "no converter for this operator")
        fn, options_type = entry
        ctx = OpContext(self, op, self._options(op, options_type))
        try:
            results = fn(ctx)
        except Unsupported as e:
            return self._unsupported(op, str(e))
        except KeyError as e:
            ctx.fail(f"missing option {e}")
        results = results if isinstance(results, list) else [results]
        if len(results) != len(op.outputs):
            ctx.fail(f"has {len(op.outputs)} outputs, expected {len(results)}")
        for expr, i in zip(results, op.outputs):
            self._bind(ctx, expr, self.model.tensors[i])

    def _options(self, op: Operator, expected: str | None) -> dict:
        if op.options_type == "NONE":
            return read_options(expected) if expected else {}
        if expected is not None and op.options_type != expected:
            raise TFLiteFormatError(
                f"operator #{op.index} {op.name} has options of type "
                f"{op.options_type}, expected {expected}"
            )
        return op.options

    def _bind(self, ctx: OpContext, expr: Expr, t: Tensor) -> None:
        if t.index in self.values:
            ctx.fail(f"writes {t.describe()}, which already has a value")
        got = expr.checked_type
        if got.dtype != t.dtype or (not self.reshaped and got.shape != t.shape):
            raise TFLiteConversionError(
                f"operator #{ctx.op.index} {ctx.op.name}: the model declares {t.describe()} but "
                f"the operator computes {list(got.shape)} {got.dtype}"
            )
        self.values[t.index] = expr

    def _unsupported(self, op: Operator, reason: str) -> None:
        names = tuple(self.model.tensors[i].name if i >= 0 else "-" for i in op.inputs)
        outs = tuple(self.model.tensors[i].name for i in op.outputs)
        self.unsupported.append((op.index, op.name, reason, names, outs))
        self.poisoned.update(op.outputs)
