"""partita.relay: TVM Relay's spellings over partita, so Relay BYOC code ports by its imports.

    from partita import relay                    # was: from tvm import relay
    from partita.relay import IRModule           # was: tvm.IRModule
    from partita.relay.dataflow_pattern import is_op, wildcard
    x = relay.var("x", shape=(1, 8), dtype="int8")
    mod = IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    mod = relay.transform.Sequential([relay.transform.InferType(),
                                      relay.transform.MergeComposite(table), ...])(mod)

A top layer (like the CLI): it imports anything, nothing imports it. The differences from TVM
that remain, and why, are in docs/migrating-from-tvm.md.
"""

from __future__ import annotations

from partita.errors import TypeInferenceError
from partita.interpreter import interpret
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
    RefType,
    RefWrite,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
)
from partita.ir import assert_structural_equal as _assert_structural_equal
from partita.ir import const as _const
from partita.ir import structural_equal as _structural_equal
from partita.text import astext
from partita.text import parse as _parse

from . import (
    _ops,
    analysis,
    build_module,
    dataflow_pattern,
    expr,
    expr_functor,
    frontend,
    op,
    transform,
)
from ._ops import TupleWrapper
from .expr_functor import ExprMutator, ExprVisitor
from .op_attr import register_op_attr, register_pattern_table, target_name
from .registry import get_global_func, register_func

nn = op.nn  # relay.nn.conv2d is relay.op.nn.conv2d
bind = expr.bind
image = op.image
qnn = _ops.namespace("qnn", "partita.relay.qnn")
qnn.op = qnn  # relay.qnn.op.requantize
annotation = op.annotation  # relay.annotation.compiler_begin
globals().update(_ops.top_level_ops())


def var(name_hint: str, type_annotation=None, shape=None, dtype: str = "float32") -> Var:
    """``relay.var("x", shape=(1, 8), dtype="int8")`` or ``relay.var("x", TensorType(...))``;
    with neither a shape nor a type the variable is untyped."""
    if type_annotation is None and shape is not None:
        type_annotation = TensorType(tuple(shape), dtype)
    elif isinstance(type_annotation, str):
        type_annotation = TensorType((), type_annotation)
    return Var(name_hint, type_annotation)


def const(value, dtype: str | None = None) -> Constant:
    """``relay.const(1.0)``, ``relay.const(np_array)``, ``relay.const(3, "int32")``."""
    return _const(value, dtype)


# TVM's structural equality takes float attributes within 1e-9 as equal (SEqualReducer)
_FLOAT_ATOL = 1e-9


def _is_node(x) -> bool:
    return isinstance(x, (Expr, IRModule))


def _values_equal(lhs, rhs) -> bool:
    """TVM compares shapes, arrays of values and scalars (non-nodes) by value."""
    if isinstance(lhs, (list, tuple)) and isinstance(rhs, (list, tuple)):
        return len(lhs) == len(rhs) and all(map(structural_equal, lhs, rhs))
    if isinstance(lhs, float) or isinstance(rhs, float):
        return abs(lhs - rhs) <= _FLOAT_ATOL
    return lhs == rhs


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """TVM's ``tvm.ir.structural_equal``; partita always maps free variables by position, so
    ``map_free_vars`` is accepted for compatibility only. Shapes and other plain values compare
    by value; float attributes within 1e-9, as in TVM."""
    if not (_is_node(lhs) and _is_node(rhs)):
        return _values_equal(lhs, rhs)
    return _structural_equal(lhs, rhs, _FLOAT_ATOL)


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """TVM's ``tvm.ir.assert_structural_equal`` (free variables mapped, as above)."""
    if not (_is_node(lhs) and _is_node(rhs)):
        if not _values_equal(lhs, rhs):
            raise AssertionError(f"{lhs!r} != {rhs!r}")
        return
    _assert_structural_equal(lhs, rhs, _FLOAT_ATOL)


def parse(text: str, *args, **kwargs) -> IRModule:
    """Parse Relay text (``tvm.relay.parse`` / ``tvm.parser.parse``) and type it, as TVM's
    parser does (function literals' unannotated parameters get their types, see
    ``relay.transform.InferType``). A module whose free inputs carry no types stays untyped."""
    mod = _parse(text, *args, **kwargs)
    try:
        return transform.InferType()(mod)
    except TypeInferenceError:
        return mod


def from_text(text: str) -> IRModule:
    """Parse Relay text (``tvm.relay.fromtext`` / ``tvm.parser.parse``)."""
    return parse(text)


__all__ = [
    "TupleWrapper",
    "analysis",
    "annotation",
    "bind",
    "Call",
    "Constant",
    "Expr",
    "ExprMutator",
    "ExprVisitor",
    "Function",
    "GlobalVar",
    "If",
    "Let",
    "IRModule",
    "RefCreate",
    "RefRead",
    "RefType",
    "RefWrite",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleType",
    "Var",
    "assert_structural_equal",
    "astext",
    "build_module",
    "const",
    "dataflow_pattern",
    "expr",
    "expr_functor",
    "from_text",
    "frontend",
    "image",
    "interpret",
    "nn",
    "op",
    "parse",
    "qnn",
    "get_global_func",
    "register_func",
    "register_op_attr",
    "register_pattern_table",
    "target_name",
    "structural_equal",
    "transform",
    "var",
]
