"""Relay's op spellings (``relay.add``, ``relay.nn.conv2d``, ``relay.qnn.op.requantize``) built
from partita's op registry: each is ``fn(*inputs, **attrs) -> Call``.

A list or tuple of expressions passed as an input becomes a ``Tuple`` (``relay.concatenate((a,
b), axis=1)``); Python numbers become constants. Attributes are partita's schema (validated),
by keyword or, after the inputs, positionally in the schema's order (``relay.reshape(x, [20, 5])``,
``relay.clip(x, 0, 6)``), which follows Relay's Python API.
"""

from __future__ import annotations

import dataclasses
import types

from partita.errors import ArityError
from partita.ir import Call, Expr, Tuple, TupleGetItem, const
from partita.ops import get_op, list_ops


class TupleWrapper:
    """What Relay's builders of a multi-output op return (``relay.nn.batch_norm``,
    ``relay.split``): not an expression itself, but ``tw[i]`` is ``TupleGetItem(call, i)``,
    ``a, b, c = tw`` unpacks, and ``tw.astuple()`` is the call."""

    def __init__(self, call: Call, size: int):
        self.tuple_value, self.size = call, size

    def astuple(self) -> Call:
        return self.tuple_value

    def astext(self) -> str:
        return str(self.tuple_value)

    def __getitem__(self, index: int) -> TupleGetItem:
        if not -self.size <= index < self.size:
            raise IndexError(f"{self.tuple_value.op_name} has {self.size} outputs, not {index}")
        return TupleGetItem(self.tuple_value, index % self.size)

    def __len__(self) -> int:
        return self.size

    def __repr__(self):
        return f"TupleWrapper({self.tuple_value.op_name}, {self.size})"


def _split_size(call: Call) -> int:
    ios = call.attrs.indices_or_sections
    return ios if isinstance(ios, int) else len(ios) + 1


# ops whose Relay builder returns a TupleWrapper: op -> number of outputs
TUPLE_RESULTS = {"nn.batch_norm": lambda call: 3, "split": _split_size}


def _arg(a):
    if isinstance(a, Expr):
        return a
    if isinstance(a, TupleWrapper):  # relay.concatenate(tw, 0): TVM lists its items
        return Tuple([a[i] for i in range(len(a))])
    if isinstance(a, (list, tuple)) and all(isinstance(x, Expr) for x in a):
        return Tuple(list(a))
    return const(a)


# Ops whose leading attributes Relay's Python API also takes positionally, in the same order
# (checked against TVM's signatures); every other attribute is keyword-only, so a Relay call
# that orders them differently (qnn.conv2d's kernel_size, take's batch_dims) fails loudly.
POSITIONAL_ATTRS = {
    "reshape": 1,
    "concatenate": 1,
    "clip": 2,
    "einsum": 1,
    "nn.leaky_relu": 1,
    "cast": 1,
    "split": 2,
    "transpose": 1,
    "squeeze": 1,
    "expand_dims": 2,
    "mean": 3,
    "sum": 3,
    "max": 3,
    "min": 3,
    "nn.softmax": 1,
    "zeros": 2,
    "ones": 2,
    "strided_slice": 5,
}


def make_op_fn(name: str):
    """The Relay-style builder for op ``name``: the inputs, then (as Relay's Python API allows)
    attributes positionally in the schema's order, or by keyword."""
    op = get_op(name)
    fields = [f.name for f in dataclasses.fields(op.attrs_type)][: POSITIONAL_ATTRS.get(name, 0)]
    size = TUPLE_RESULTS.get(name)

    def build(*args, **attrs) -> Call:
        named = [attrs.pop(n) for n in op.inputs[len(args) :] if n in attrs]
        if named:  # inputs by keyword, as Relay's builders take them (``data=x, weight=w``)
            args = (*args, *named)
            if len(args) != op.num_inputs:
                raise ArityError(f"{name} takes the inputs {', '.join(op.inputs)}, in order")
        extra = args[op.num_inputs :]
        if len(extra) > len(fields):
            after = f" then the attributes ({', '.join(fields)})" if fields else ""
            raise ArityError(
                f"{name} takes its inputs ({', '.join(op.inputs) or 'none'}){after} "
                f"positionally, got {len(args)} positional arguments; give attributes by keyword"
            )
        for field, value in zip(fields, extra):
            if isinstance(value, Expr):
                raise ArityError(f"{name}: attribute {field} got an expression, {value.short()}")
            if field in attrs:
                raise ArityError(f"{name}: attribute {field} given twice")
            attrs[field] = value
        inputs = args[: op.num_inputs]
        call = Call(op, [_arg(a) for a in inputs], attrs or None)
        return TupleWrapper(call, size(call)) if size is not None else call

    build.__name__ = name.rsplit(".", 1)[-1]
    build.__qualname__ = name
    build.__doc__ = f"``{name}({', '.join(op.inputs)}, **attrs)`` (partita's {name})."
    return build


def _names() -> list[str]:
    return sorted(o if isinstance(o, str) else o.name for o in list_ops())


def namespace(prefix: str, module_name: str) -> types.ModuleType:
    """A module holding a builder for every registered op ``<prefix>.<name>`` (``""``: the ops
    without a namespace)."""
    mod = types.ModuleType(module_name)
    for name in _names():
        head, _, tail = name.rpartition(".")
        if head == prefix:
            setattr(mod, tail, make_op_fn(name))
    return mod


def top_level_ops() -> dict:
    """Builders for the ops without a namespace (``add``, ``clip``, ``concatenate``, ...)."""
    return {n: make_op_fn(n) for n in _names() if "." not in n}


def relay_pad(build):
    """``nn.pad`` as Relay's Python API takes it: ``pad(data, pad_width, pad_value=0.0,
    pad_mode="constant")`` (partita's op has ``pad_value`` as its second input, which
    ``pad(data, pad_value_expr, pad_width=...)`` still spells)."""

    def pad(data, *args, **attrs):
        if args and isinstance(args[0], Expr):  # partita's order: (data, pad_value, pad_width=)
            return build(data, *args, **attrs)
        names = ("pad_width", "pad_value", "pad_mode")
        if len(args) > len(names):
            raise ArityError("nn.pad takes (data, pad_width, pad_value, pad_mode)")
        given = {**dict(zip(names, args)), **attrs}
        if "pad_width" not in given:
            raise ArityError("nn.pad needs pad_width")
        value = _arg(given.pop("pad_value", 0.0))
        return build(data, value, **given)

    pad.__name__, pad.__qualname__, pad.__doc__ = "pad", "nn.pad", relay_pad.__doc__
    return pad
