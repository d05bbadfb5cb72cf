"""Attribute values in patterns: normalisation, and the names an op's attributes have."""

from __future__ import annotations

import dataclasses
import difflib

from partita.errors import AttrError
from partita.ir.op import op_pattern
from partita.ops.registry import Op

# What has_attr can ask of an op itself (``wildcard().has_attr({"kind": "elemwise"})(x)``);
# "TOpPattern" is TVM's spelling of the kind, as its OpPatternKind integers.
OP_LEVEL_ATTRS = ("kind", "commutative", "TOpPattern")


def op_level_attr(op: Op, key: str, missing):
    """An op-level attribute's value (``missing`` when ``key`` is not one)."""
    if key == "TOpPattern":
        return op_pattern(op)
    return getattr(op, key, missing) if key in OP_LEVEL_ATTRS else missing


def normalize_value(v):
    """Attribute values compare as tuples (lists and numpy arrays become tuples)."""
    if isinstance(v, (list, tuple)):
        return tuple(normalize_value(x) for x in v)
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        return normalize_value(v.tolist())
    return v


def check_attr_names(ops: list[Op], attrs: dict, op_level: bool) -> None:
    """Fail with a did-you-mean when no op of ``ops`` has one of the attribute names."""
    if not ops:
        return  # the pattern does not pin the op: nothing to check against
    if op_level:
        known = set(OP_LEVEL_ATTRS)
    else:
        known = set()
        for op in ops:
            known.update(f.name for f in dataclasses.fields(op.attrs_type))
    names = " | ".join(op.name for op in ops)
    for key in attrs:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=2)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            what = "ops" if op_level else "attributes of"
            allowed = ", ".join(sorted(known)) or "none"
            raise AttrError(
                f"has_attr(): {names} has no attribute {key!r}{hint}; {what} {names}: {allowed}"
            )
