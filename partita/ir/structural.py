"""Structural equality of expressions and modules, with a readable first difference.

Equality is sharing-aware: a node of the left graph must always pair with the same node of the
right graph, so a graph where CSE merged two calls differs from one where it did not. Function
parameters pair by position; free variables pair by name.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np

from partita.errors import PartitaError

from .module import IRModule
from .nodes import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from .refs import REF_NODES, ref_inputs
from .visitor import children, post_order


class StructuralMismatch(PartitaError, AssertionError):
    """Raised by assert_structural_equal: the path to the first difference and both sides."""


def structural_equal(lhs, rhs, float_atol: float = 0.0) -> bool:
    """True when two expressions or modules have the same structure, attributes and constants
    (float attributes within ``float_atol`` of each other count as equal: TVM's 1e-9)."""
    return _first_difference(lhs, rhs, float_atol) is None


def assert_structural_equal(lhs, rhs, float_atol: float = 0.0) -> None:
    """Raise StructuralMismatch describing the first difference, if any."""
    diff = _first_difference(lhs, rhs, float_atol)
    if diff is not None:
        raise StructuralMismatch(diff)


def _first_difference(lhs, rhs, float_atol: float = 0.0) -> str | None:
    if isinstance(lhs, IRModule) or isinstance(rhs, IRModule):
        if not (isinstance(lhs, IRModule) and isinstance(rhs, IRModule)):
            return f"cannot compare {type(lhs).__name__} with {type(rhs).__name__}"
        if sorted(lhs.functions) != sorted(rhs.functions):
            return f"functions differ: {sorted(lhs.functions)} vs {sorted(rhs.functions)}"
        for name in sorted(lhs.functions):
            diff = _Comparer(float_atol).run(lhs[name], rhs[name], f"@{name}")
            if diff:
                return diff
        return None
    return _Comparer(float_atol).run(lhs, rhs, "expr")


class _Comparer:
    def __init__(self, float_atol: float = 0.0):
        self.float_atol = float_atol
        self.lmap: dict[int, Expr] = {}
        self.rmap: dict[int, Expr] = {}
        self.free: dict[str, str] = {}

    def run(self, a, b, root: str) -> str | None:
        # Each entry: (left, right, index of parent entry, label of the edge from the parent).
        entries: list[tuple] = [(a, b, -1, root)]
        stack = [0]
        while stack:
            i = stack.pop()
            x, y, _, _ = entries[i]
            if type(x) is GlobalVar and type(y) is GlobalVar and x == y:
                continue  # a global is a name: sharing one GlobalVar object or not is irrelevant
            if id(x) in self.lmap or id(y) in self.rmap:
                if self.lmap.get(id(x)) is not y or self.rmap.get(id(y)) is not x:
                    return self._report(
                        entries,
                        i,
                        "sharing differs (one side reuses a node the"
                        " other side computes separately)",
                    )
                continue
            self.lmap[id(x)], self.rmap[id(y)] = y, x
            why = self._local(x, y)
            if why:
                return self._report(entries, i, why)
            for label, cx, cy in _paired_children(x, y):
                entries.append((cx, cy, i, label))
                stack.append(len(entries) - 1)
        return None

    def _local(self, x, y) -> str | None:
        if type(x) is not type(y):
            return f"node kind differs: {type(x).__name__} vs {type(y).__name__}"
        if isinstance(x, Var):
            return self._var(x, y)
        if isinstance(x, Constant):
            return _constant_diff(x.data, y.data)
        if isinstance(x, Call):
            return _call_diff(x, y, self.float_atol)
        if isinstance(x, Tuple) and len(x.fields) != len(y.fields):
            return f"tuple size differs: {len(x.fields)} vs {len(y.fields)}"
        if isinstance(x, TupleGetItem) and x.index != y.index:
            return f"tuple index differs: {x.index} vs {y.index}"
        if isinstance(x, Function):
            return _function_diff(x, y, self)
        if isinstance(x, Let):
            return _bind_params([x.var], [y.var], self, "let variable")
        if isinstance(x, GlobalVar) and x.name_hint != y.name_hint:
            return f"global differs: @{x.name_hint} vs @{y.name_hint}"
        return None

    def _var(self, x: Var, y: Var) -> str | None:
        if x.type_annotation != y.type_annotation:
            return f"type of %{x.name_hint} differs: {x.type_annotation} vs {y.type_annotation}"
        # Vars not bound by a compared function's params pair by name.
        if self.free.setdefault(x.name_hint, y.name_hint) != y.name_hint:
            return f"free variable %{x.name_hint} pairs with %{y.name_hint}"
        return None

    def _report(self, entries, i, why) -> str:
        path, j = [], i
        while j >= 0:
            path.append(entries[j][3])
            j = entries[j][2]
        x, y = entries[i][0], entries[i][1]
        where = "".join(reversed(path))
        return f"structural mismatch at {where}: {why}\n  lhs: {_excerpt(x)}\n  rhs: {_excerpt(y)}"


def _paired_children(x, y):
    if isinstance(x, Call):
        if isinstance(x.op, (Function, GlobalVar, Var)):
            yield ".op", x.op, y.op
        for k, (a, b) in enumerate(zip(x.args, y.args)):
            yield f".args[{k}]", a, b
    elif isinstance(x, Tuple):
        for k, (a, b) in enumerate(zip(x.fields, y.fields)):
            yield f".fields[{k}]", a, b
    elif isinstance(x, TupleGetItem):
        yield ".tuple_value", x.tuple_value, y.tuple_value
    elif isinstance(x, Function):
        yield ".body", x.body, y.body
    elif isinstance(x, If):
        yield ".cond", x.cond, y.cond
        yield ".true_branch", x.true_branch, y.true_branch
        yield ".false_branch", x.false_branch, y.false_branch
    elif isinstance(x, Let):
        yield ".value", x.value, y.value
        yield ".body", x.body, y.body
    elif type(x) in REF_NODES:
        for k, (a, b) in enumerate(zip(ref_inputs(x), ref_inputs(y))):
            yield f".inputs[{k}]", a, b


def _call_diff(x: Call, y: Call, float_atol: float = 0.0) -> str | None:
    callees = (Function, GlobalVar, Var)
    if isinstance(x.op, callees) or isinstance(y.op, callees):
        if type(x.op) is not type(y.op):
            return f"callee differs: {x.op_name} vs {y.op_name}"
    elif x.op is not y.op:
        return f"op differs: {x.op_name} vs {y.op_name}"
    if len(x.args) != len(y.args):
        return f"{x.op_name}: number of arguments differs: {len(x.args)} vs {len(y.args)}"
    if x.attrs != y.attrs and not (float_atol and _close_attrs(x.attrs, y.attrs, float_atol)):
        return f"{x.op_name}: attributes differ: {_attrs_delta(x.attrs, y.attrs)}"
    return None


def _close_attrs(a, b, atol: float) -> bool:
    """Same attributes but floats that differ by at most ``atol``."""
    if type(a) is not type(b) or not dataclasses.is_dataclass(a):
        return False
    for f in dataclasses.fields(a):
        u, v = getattr(a, f.name), getattr(b, f.name)
        if u != v and not (isinstance(u, float) and isinstance(v, float) and abs(u - v) <= atol):
            return False
    return True


def _attrs_delta(a, b) -> str:
    da, db = getattr(a, "__dict__", {}) or {}, getattr(b, "__dict__", {}) or {}
    keys = [k for k in da if da.get(k) != db.get(k)]
    return ", ".join(f"{k}={da.get(k)!r} vs {db.get(k)!r}" for k in keys) or f"{a} vs {b}"


def _function_diff(x: Function, y: Function, comparer: _Comparer) -> str | None:
    if dict(x.attrs) != dict(y.attrs):
        return f"function attributes differ: {dict(x.attrs)} vs {dict(y.attrs)}"
    if len(x.params) != len(y.params):
        return f"number of parameters differs: {len(x.params)} vs {len(y.params)}"
    if x.ret_type is not None and y.ret_type is not None and x.ret_type != y.ret_type:
        return f"return type differs: {x.ret_type} vs {y.ret_type}"
    return _bind_params(x.params, y.params, comparer, "parameter")


def _bind_params(xs, ys, comparer: _Comparer, what: str) -> str | None:
    """Pair the variables a function or a let binds, by position."""
    for p, q in zip(xs, ys):
        if p.type_annotation != q.type_annotation:
            return (
                f"type of {what} %{p.name_hint} differs: {p.type_annotation} vs {q.type_annotation}"
            )
        if id(p) in comparer.lmap or id(q) in comparer.rmap:
            if comparer.lmap.get(id(p)) is not q:
                return f"{what} %{p.name_hint} pairs with %{q.name_hint} inconsistently"
        comparer.lmap[id(p)], comparer.rmap[id(q)] = q, p
    return None


def _constant_diff(a: np.ndarray, b: np.ndarray) -> str | None:
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"constant type differs: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
        idx = np.argwhere(a != b)
        first = tuple(int(i) for i in idx[0]) if idx.size else ()
        return f"constant values differ (first at index {first}: {a[first]} vs {b[first]})"
    return None


def _excerpt(node) -> str:
    if isinstance(node, Call):
        args = ", ".join(a.short() for a in node.args)
        return f"{node.op_name}({args}) {_attrs_text(node.attrs)}".rstrip()
    if isinstance(node, Constant):
        return f"Constant {node.data.shape} {node.data.dtype}"
    return node.short()


def _attrs_text(attrs) -> str:
    d = getattr(attrs, "__dict__", None)
    return ", ".join(f"{k}={v!r}" for k, v in d.items()) if d else ""


def fingerprint(expr: Expr, names: bool = True) -> bytes:
    """A SHA-256 digest of everything that defines ``expr``: its graph (sharing included), ops,
    attributes, types, constants bit for bit and, when ``names``, spans and variable names.

    Equal fingerprints mean structurally equal expressions (the converse fails only where
    structural_equal is looser: -0.0 against 0.0, NaN payloads, and the names it ignores), so a
    fingerprint can key a cache of what is compiled from an expression. Raises TypeError for an
    attribute value it cannot encode exactly, rather than guess.
    """
    records, blobs = _records(expr, names)
    h = hashlib.sha256(b"partita.fingerprint.v1\0")
    h.update(repr(records).encode())
    for data in blobs:  # their sizes are in the records
        h.update(data.tobytes())
    return h.digest()


def _records(expr: Expr, names: bool) -> tuple[list, list]:
    """One record per node (post-order; inputs as positions) and the constants' arrays."""
    order = post_order(expr)
    index = {id(n): i for i, n in enumerate(order)}
    records, blobs = [], []
    for node in order:
        kind = type(node)
        if kind is Call:
            op = node.op
            callee = op.name if isinstance(op, Op) else getattr(op, "name_hint", None)
            local = (type(op).__name__, callee, _encode(node.attrs))
        elif kind is Constant:
            data = np.ascontiguousarray(node.data)
            blobs.append(data)
            local = (data.dtype.str, data.shape, data.nbytes)
        elif kind is Var:
            local = (node.name_hint if names else None, repr(node.type_annotation))
        elif kind is Function:
            # the annotated result type matters only until the function is typed
            ret = repr(node.ret_type) if node.type_or_none is None else None
            local = (_encode(dict(node.attrs or {})), ret, len(node.params))
        elif kind is TupleGetItem:
            local = (node.index,)
        elif kind is GlobalVar:
            local = (node.name_hint,)
        elif kind in (Tuple, If, Let) or kind in REF_NODES:
            local = ()
        else:
            raise TypeError(f"fingerprint: unknown node kind {kind.__name__}")
        records.append(
            (
                kind.__name__,
                tuple(index[id(k)] for k in children(node)),
                local,
                _encode(node.span) if names else None,
                repr(node.type_or_none) if node.type_or_none is not None else None,
            )
        )
    return records, blobs


_PLAIN = (type(None), bool, int, float, str)


def _encode(value):
    """``value`` as nested tuples of Python scalars whose repr tells any two values apart."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        if all(type(v) in _PLAIN for v in value):
            return value  # repr tells a tuple from a list
        return (kind.__name__, *(_encode(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *sorted((repr(_encode(k)), _encode(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return ("ndarray", data.dtype.str, data.shape, hashlib.sha256(data.tobytes()).hexdigest())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes().hex())
    if isinstance(value, Op):
        return ("op", value.name)
    names = _field_names(kind)
    if names is None:
        raise TypeError(f"fingerprint: cannot encode a {kind.__name__} attribute exactly")
    return (kind.__qualname__, *((n, _encode(getattr(value, n))) for n in names))


@functools.cache
def _field_names(kind: type) -> tuple | None:
    """A dataclass's field names (attribute schemas, spans), else None."""
    if not dataclasses.is_dataclass(kind):
        return None
    return tuple(f.name for f in dataclasses.fields(kind))
