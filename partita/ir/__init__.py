"""The IR: immutable nodes, types, spans, modules, traversal and structural equality."""

from .attrs import Attrs, NoAttrs
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
    const,
    var,
)
from .op import get_op, list_ops, register_op
from .refs import RefCreate, RefRead, RefWrite
from .span import Span
from .structural import (
    StructuralMismatch,
    assert_structural_equal,
    fingerprint,
    structural_equal,
)
from .types import DTYPES, RefType, TensorType, TupleType, Type
from .visitor import (
    ExprMutator,
    ExprVisitor,
    children,
    free_vars,
    iter_calls,
    post_order,
    substitute,
    walk,
)

__all__ = [
    "Attrs",
    "NoAttrs",
    "Op",
    "get_op",
    "list_ops",
    "register_op",
    "Call",
    "Constant",
    "DTYPES",
    "Expr",
    "ExprMutator",
    "ExprVisitor",
    "Function",
    "If",
    "Let",
    "GlobalVar",
    "IRModule",
    "RefCreate",
    "RefRead",
    "RefType",
    "RefWrite",
    "Span",
    "StructuralMismatch",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleType",
    "Type",
    "Var",
    "assert_structural_equal",
    "fingerprint",
    "children",
    "const",
    "free_vars",
    "iter_calls",
    "post_order",
    "structural_equal",
    "substitute",
    "var",
    "walk",
]
