"""The checks behind the matcher's steps, and the messages ``explain`` shows when they fail."""

from __future__ import annotations

from partita.ir.nodes import Call, Constant, Expr, Function, GlobalVar, Var
from partita.ir.types import TensorType
from partita.ops.registry import Op
from partita.passes.infer_type import infer_new_types

from .attrs import normalize_value, op_level_attr
from .pattern import DataTypePattern, OpPattern, TypePattern

_PERMS: dict[str, tuple | None] = {}
_UNKNOWN = object()


def commute_permutation(op: Op) -> tuple | None:
    """How a commutative op's arguments swap: pattern argument i may match argument perm[i].

    The registration tells the groups by input names: each ``lhs*`` input swaps with the
    ``rhs*`` input of the same suffix (qnn.add swaps lhs/lhs_scale/lhs_zero_point with the rhs
    ones and keeps the output parameters); a two-input op swaps its two inputs.
    """
    perm = _PERMS.get(op.name, _UNKNOWN)
    if perm is _UNKNOWN:
        perm = _PERMS[op.name] = _derive_permutation(op) if op.commutative else None
    return perm


def _derive_permutation(op: Op) -> tuple | None:
    names = op.inputs
    index = {n: i for i, n in enumerate(names)}
    perm = list(range(len(names)))
    for i, n in enumerate(names):
        if n.startswith("lhs") and "rhs" + n[3:] in index:
            j = index["rhs" + n[3:]]
            perm[i], perm[j] = j, i
    if perm == list(range(len(names))):
        if len(names) != 2:
            return None  # commutative, but the inputs do not say which ones swap
        perm = [1, 0]
    return tuple(perm)


_MISSING = object()


def attr_mismatch(attrs: dict, e) -> str | None:
    """Why ``e`` lacks the attribute values, or None when it has them all."""
    if type(e) is Call:
        if not isinstance(e.op, Op):
            return (
                f"{describe(e)} is a call to a function, which has no attributes (put "
                f"has_attr on the called function's pattern)"
            )
        source, what = e.attrs, f"{e.op_name}"
        get = lambda k: getattr(source, k, _MISSING)  # noqa: E731
    elif type(e) is Function:
        what, get = "the function", lambda k: e.attrs.get(k, _MISSING)
    elif type(e) is Op:
        what, get = e.name, lambda k: op_level_attr(e, k, _MISSING)
    else:
        return f"{describe(e)} has no attributes"
    for key, want in attrs.items():
        got = get(key)
        if got is _MISSING:
            return f"{what} has no attribute {key!r}"
        got = normalize_value(got)
        if got != want:
            return f"attribute {key} differs: expected {want!r}, got {got!r}"
    return None


def type_of(e) -> object:
    """``e``'s type, inferring it if needed; None when it cannot be typed."""
    if not isinstance(e, Expr):
        return None
    if e.type_or_none is None and not isinstance(e, (Var, GlobalVar, Function)):
        from partita.errors import PartitaError

        try:
            infer_new_types(e)
        except PartitaError:
            return None
    return e.type_or_none


def type_mismatch(p, e) -> str | None:
    """Why ``e``'s type does not satisfy has_dtype / has_shape / has_type, or None."""
    t = type_of(e)
    if t is None:
        return f"{describe(e)} has no type (run InferType, or give its inputs type annotations)"
    if type(p) is TypePattern:
        return None if t == p.type else f"type differs: expected {p.type}, got {t}"
    if not isinstance(t, TensorType):
        return f"not a tensor: {describe(e)} has type {t}"
    if type(p) is DataTypePattern:
        return None if t.dtype == p.dtype else f"dtype differs: expected {p.dtype}, got {t.dtype}"
    return None if t.shape == p.shape else f"shape differs: expected {p.shape}, got {t.shape}"


def op_mismatch(p: OpPattern, e) -> str:
    """Why an ``is_op`` did not match (often: it was used without calling it)."""
    if isinstance(e, Expr):
        args = ", ".join(["wildcard()"] * len(p.op.inputs))
        return (
            f"is_op({p.op.name!r}) matches the op itself, not {describe(e)}; call it with "
            f"argument patterns: is_op({p.op.name!r})({args})"
        )
    return f"op differs: expected {p.op.name}, got {callee(e)}"


def inconsistent(prev) -> str:
    """Why a sub-pattern used twice failed its second use."""
    return (
        f"this sub-pattern already matched {describe(prev)} elsewhere in the match (a "
        f"sub-pattern used twice must match one node)"
    )


def callee(op) -> str:
    """How messages name what a call calls."""
    if isinstance(op, Op):
        return op.name
    if isinstance(op, Function):
        comp = op.attrs.get("Composite")
        return f"a call to composite function {comp!r}" if comp else "a call to a function"
    if isinstance(op, GlobalVar):
        return f"a call to @{op.name_hint}"
    if isinstance(op, Expr):
        return describe(op)
    return repr(op)


def describe(e) -> str:
    """How messages name a node: its op or kind, and its span."""
    if isinstance(e, Call):
        head = e.op.name if isinstance(e.op, Op) else callee(e.op)
        text = f"a call to {head}" if isinstance(e.op, Op) else head
    elif isinstance(e, Expr):
        text = e.short()
        return text if isinstance(e, (Var, Constant)) else f"a {text}"
    else:
        return repr(e)
    return text + (f" ({e.span})" if e.span is not None else "")
