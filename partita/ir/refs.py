"""Mutable references, Relay's ``ref(v)``, ``ref_read(r)`` and ``ref_write(r, v)``.

    %0 = ref(1f);                      a new cell holding 1f       (RefType(Tensor[(), float32]))
    %1 = ref_read(%0);                 the cell's value
    ref_write(%0, nn.relu(%1))         stores a value; returns ()  (the empty tuple)

They are effects in a dataflow graph: a cell is made each time its ``ref`` is evaluated, and
reads and writes happen in evaluation order (inputs left to right, a value before its users),
as in Relay. partita's If evaluates both branches, so the interpreter refuses a write that only
an If branch reaches. No target claims them: they stay on the host.
"""

from __future__ import annotations

from partita.errors import PartitaError

from .nodes import Expr


def _expr(e, what: str) -> Expr:
    if not isinstance(e, Expr):
        raise PartitaError(f"{what} is not an expression: {e!r}")
    return e


class RefCreate(Expr):
    """``ref(value)``: a new mutable cell holding ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Expr, span=None):
        self._init(span)
        object.__setattr__(self, "value", _expr(value, "RefCreate value"))


class RefRead(Expr):
    """``ref_read(ref)``: the value the cell holds now."""

    __slots__ = ("ref",)

    def __init__(self, ref: Expr, span=None):
        self._init(span)
        object.__setattr__(self, "ref", _expr(ref, "RefRead reference"))


class RefWrite(Expr):
    """``ref_write(ref, value)``: store ``value`` in the cell; the result is ``()``."""

    __slots__ = ("ref", "value")

    def __init__(self, ref: Expr, value: Expr, span=None):
        self._init(span)
        object.__setattr__(self, "ref", _expr(ref, "RefWrite reference"))
        object.__setattr__(self, "value", _expr(value, "RefWrite value"))


REF_NODES = (RefCreate, RefRead, RefWrite)


def ref_inputs(node) -> tuple:
    """The inputs of a reference node, in evaluation order."""
    if type(node) is RefCreate:
        return (node.value,)
    if type(node) is RefRead:
        return (node.ref,)
    return (node.ref, node.value)


def ref_with_inputs(node, inputs) -> Expr:
    """A reference node like ``node`` over ``inputs`` (same span)."""
    return type(node)(*inputs, span=node.span)
