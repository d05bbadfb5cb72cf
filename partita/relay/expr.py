"""``tvm.relay.expr``: the expression classes, references included (``relay.expr.RefCreate``)."""

from __future__ import annotations

from partita.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    IRModule,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from partita.ir import const as _const
from partita.ir.visitor import substitute

from ._ops import TupleWrapper


def const(value, dtype: str | None = None) -> Constant:
    """``relay.expr.const`` (``relay.const``)."""
    return _const(value, dtype)


def bind(expr: Expr, binds: dict) -> Expr:
    """TVM's ``relay.bind(expr, {var: value})``: ``expr`` with those variables replaced; a
    Function loses the parameters bound."""
    mapping = {k: v if isinstance(v, Expr) else _const(v) for k, v in binds.items()}
    if isinstance(expr, Function):
        params = [p for p in expr.params if p not in mapping]
        body = substitute(expr.body, mapping)
        return Function(params, body, expr.ret_type, expr.attrs, expr.span)
    return substitute(expr, mapping)


__all__ = [
    "IRModule",
    "TupleWrapper",
    "bind",
    "const",
    "Call",
    "Constant",
    "Expr",
    "Function",
    "GlobalVar",
    "If",
    "Let",
    "RefCreate",
    "RefRead",
    "RefWrite",
    "Tuple",
    "TupleGetItem",
    "Var",
]
