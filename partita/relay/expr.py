"""``tvm.relay.expr``: the expression classes, references included (``relay.expr.RefCreate``)."""

from __future__ import annotations

from partita.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)

__all__ = [
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
