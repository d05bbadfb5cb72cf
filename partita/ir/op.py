"""Operators: ``Op`` (what a Call calls) and the registry that holds every op's whole truth.

An op declares its name, input names, an attribute schema (a frozen dataclass, validated and
coerced here), a type relation and a numpy reference implementation. The interpreter is nothing but
those references walked over the graph. The op *definitions* live in partita/ops, which registers
them when ``partita`` is imported; this module only knows how to hold and look them up.

    @register_op("nn.relu", inputs=("data",), type_rel=identity_rel, kind="elemwise")
    def relu(data, attrs):
        "max(data, 0)."
        return np.maximum(data, 0)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from partita.errors import OpNotFoundError

from .attrs import NoAttrs
from .nodes import Op

_REGISTRY: dict[str, Op] = Op.table  # one dict: Op.lookup reads it too

# An op's kind as Relay's OpPatternKind (TOpPattern): what fusion and has_attr({"TOpPattern": K})
# see. Relay's kTuple (7) belongs to Tuple nodes, not ops.
TOP_PATTERN = {
    "elemwise": 0,
    "broadcast": 1,
    "injective": 2,
    "reduce": 3,
    "out_elemwise_fusable": 4,
    "opaque": 8,
}


def op_pattern(op: Op) -> int:
    """``op``'s Relay OpPatternKind (8, opaque, for an unknown kind)."""
    return TOP_PATTERN.get(op.kind, 8)


def register_op(
    name: str,
    inputs,
    attrs=NoAttrs,
    type_rel: Callable | None = None,
    commutative: bool = False,
    kind: str = "opaque",
):
    """Decorator registering a numpy reference implementation as op ``name``.

    ``kind`` tells fusion what the op is: "elemwise", "broadcast", "injective", "reduce",
    "out_elemwise_fusable" (conv, dense) or "opaque".
    """

    def wrap(impl):
        if name in _REGISTRY:
            raise ValueError(f"op {name} registered twice")
        if type_rel is None:
            raise ValueError(f"op {name} needs a type relation")
        doc = (impl.__doc__ or "").strip()
        _REGISTRY[name] = Op(name, inputs, attrs, type_rel, impl, commutative, kind, doc)
        return impl

    return wrap


def get_op(name: str) -> Op:
    """The registered op ``name``; an unknown name fails with the closest known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise OpNotFoundError(f"unknown op {name!r}{hint}") from None


def has_op(name: str) -> bool:
    return name in _REGISTRY


def list_ops() -> list[Op]:
    """Every registered op, sorted by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
