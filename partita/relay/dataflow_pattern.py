"""``tvm.relay.dataflow_pattern`` spellings over partita.patterns (one engine, TVM's names)."""

from __future__ import annotations

import logging

from partita.ir.nodes import Op
from partita.ops import NoAttrs, get_op, has_op
from partita.patterns import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    DFPatternCallback,
    DominatorPattern,
    ExprPattern,
    FunctionPattern,
    IfPattern,
    LetPattern,
    OpPattern,
    Pattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
    dominates,
    is_constant,
    is_expr,
    is_if,
    is_let,
    is_tuple,
    is_tuple_get_item,
    rewrite,
    wildcard,
)
from partita.patterns import partition as _partition

log = logging.getLogger(__name__)

DFPattern = Pattern
AltPattern = AltPattern


def is_op(op_name) -> OpPattern:
    """``is_op("nn.conv2d")`` as TVM builds it: a pattern that does not fit the op (a call
    with another number of arguments, an attribute the op lacks) or an op partita does not
    have is built and never matches, so one such row does not stop a whole pattern table.
    (partita's own ``partita.patterns.is_op`` refuses them when built.)"""
    if isinstance(op_name, Op):
        return OpPattern(op_name, checked=False)
    op = get_op(op_name) if has_op(op_name) else _unknown_op(op_name)
    return OpPattern(op, checked=False)


_UNKNOWN: dict = {}


def _unknown_op(name: str) -> Op:
    """An op no graph holds (partita has none by that name), so its patterns never match."""
    if name not in _UNKNOWN:
        _UNKNOWN[name] = Op(name, (), NoAttrs, None, None, False, "opaque", "unknown to partita")
        log.info("is_op(%r): partita has no such op; patterns with it never match", name)
    return _UNKNOWN[name]


def is_var(name: str = "") -> VarPattern:
    """``is_var("x")``: a Var named ``x`` (any Var without a name); ``.name`` is ``"x"``, as in
    TVM (partita's own ``is_var`` keeps ``.name`` for capture names and says ``.var_name``)."""
    pattern = VarPattern(name or None)
    return pattern.named(name) if name else pattern


def has_attr(attrs: dict, pattern: Pattern | None = None) -> AttrPattern:
    """``has_attr({"axis": 1})`` (any expression) or ``has_attr(attrs, pattern)``."""
    return (pattern if pattern is not None else wildcard()).has_attr(attrs)


def has_dtype(dtype, pattern: Pattern | None = None) -> DataTypePattern:
    """An expression of ``dtype``."""
    return (pattern if pattern is not None else wildcard()).has_dtype(dtype)


def has_shape(shape, pattern: Pattern | None = None) -> ShapePattern:
    """An expression of ``shape``."""
    return (pattern if pattern is not None else wildcard()).has_shape(shape)


def has_type(ttype, pattern: Pattern | None = None) -> TypePattern:
    """An expression of type ``ttype``."""
    return (pattern if pattern is not None else wildcard()).has_type(ttype)


def partition(pattern: Pattern, expr, attrs: dict | None = None, check=None):
    """``pattern.partition(expr, attrs, check)`` as a function."""
    return _partition(pattern, expr, attrs, check)


__all__ = [
    "AltPattern",
    "AttrPattern",
    "CallPattern",
    "ConstantPattern",
    "DFPattern",
    "DFPatternCallback",
    "DataTypePattern",
    "DominatorPattern",
    "ExprPattern",
    "ShapePattern",
    "TupleGetItemPattern",
    "FunctionPattern",
    "IfPattern",
    "LetPattern",
    "OpPattern",
    "TuplePattern",
    "TypePattern",
    "VarPattern",
    "WildcardPattern",
    "dominates",
    "has_attr",
    "has_dtype",
    "has_shape",
    "has_type",
    "is_constant",
    "is_expr",
    "is_if",
    "is_let",
    "is_op",
    "is_tuple",
    "is_tuple_get_item",
    "is_var",
    "partition",
    "rewrite",
    "wildcard",
]
