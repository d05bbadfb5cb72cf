"""What a converter sees: one graph node (FX or TorchScript), its arguments, and helpers that
build typed nodes carrying the node's span.

Arguments arrive converted: tensors as expressions (quantized TorchScript tensors as ``QValue``),
everything else (ints, floats, lists, dtypes, packed parameters) as Python values.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from partita.frontends.builder import NodeBuilder
from partita.frontends.errors import PyTorchConversionError

from partita.ir import Constant, Expr, Span

INT_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
}


class Unsupported(Exception):
    """Raised by a converter for a node it cannot convert; the reason joins the report."""


@dataclasses.dataclass(frozen=True)
class QValue:
    """A quantized TorchScript tensor: integer ``expr`` and the scale and zero point it carries."""

    expr: Expr
    scale: float
    zero_point: int

    @property
    def dtype(self) -> str:
        return self.expr.checked_type.dtype


class NodeContext(NodeBuilder):
    """One node being converted (see the module docstring)."""

    def __init__(
        self,
        index: int,
        name: str,
        target: str,
        args: list,
        kwargs: dict,
        source: str | None = None,
        options: dict | None = None,
    ):
        self.index, self.name, self.target = index, name, target
        self.args, self.kwargs = args, kwargs
        self.options = options or {}
        self.span = Span(index=index, op_type=target, tensor=name, source=source)

    # ---- arguments ------------------------------------------------------------------------------

    def arg(self, i: int, name: str, default=...):
        """Argument ``i`` (or keyword ``name``); without a default a missing one is an error."""
        if i < len(self.args):
            return self.args[i]
        if name in self.kwargs:
            return self.kwargs[name]
        if default is ...:
            self.fail(f"argument {i} ({name}) is missing")
        return default

    def tensor(self, i: int, name: str, default=...) -> Expr:
        """Argument ``i`` as a tensor expression (a float or integer tensor, not a QValue)."""
        v = self.arg(i, name, default)
        if v is None and default is None:
            return None
        if isinstance(v, QValue):
            raise Unsupported(f"{name} is a quantized tensor; this converter takes float tensors")
        if not isinstance(v, Expr):
            self.fail(f"{name} must be a tensor, got {type(v).__name__} {v!r}")
        return v

    def ints(self, i: int, name: str, n: int | None = None, default=...) -> tuple[int, ...]:
        """An int or list of ints argument as a tuple (a single int repeated ``n`` times)."""
        v = self.arg(i, name, default)
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            v = [int(v)] * (n or 1)
        if not isinstance(v, (list, tuple)) or not all(_is_int(x) for x in v):
            self.fail(f"{name} must be an int or a list of ints, got {v!r}")
        if n is not None and len(v) == 1:
            v = list(v) * n
        if n is not None and len(v) != n:
            self.fail(f"{name} must have {n} entries, got {list(v)}")
        return tuple(int(x) for x in v)

    def number(self, i: int, name: str, default=...) -> float:
        v = self.arg(i, name, default)
        if isinstance(v, Constant) and v.data.size == 1:  # a scalar tensor attribute
            v = v.data.reshape(()).item()
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
            self.fail(f"{name} must be a number, got {v!r}")
        return float(v)

    # ---- building nodes -------------------------------------------------------------------------

    def fail(self, message: str):
        raise PyTorchConversionError(f"node #{self.index} {self.name} = {self.target}: {message}")


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def shape_of(x: Expr) -> tuple[int, ...]:
    return x.checked_type.shape


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)
