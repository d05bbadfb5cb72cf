"""``tvm.relay.dataflow_pattern`` spellings over partita.patterns (one engine, TVM's names)."""

from __future__ import annotations

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
    is_op,
    is_tuple,
    is_tuple_get_item,
    rewrite,
    wildcard,
)
from partita.patterns import partition as _partition

DFPattern = Pattern
AltPattern = AltPattern


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
