"""Helpers TVM's partition tests share, written against partita.relay: the allowed-list
annotator and the attributes and module of an expected partitioned graph."""

from __future__ import annotations

from partita import relay
from partita.relay import transform
from partita.relay.op.annotation import compiler_begin as cb
from partita.relay.op.annotation import compiler_end as ce


class AllowedListAnnotator(relay.ExprMutator):
    """TVM's test helper: every call of a listed op becomes its own region of ``compiler``."""

    def __init__(self, ops, compiler):
        super().__init__()
        self.ops, self.compiler = ops, compiler

    def visit_call(self, call):
        if call.op.name not in self.ops:
            return super().visit_call(call)
        args = [cb(self.visit(a), self.compiler) for a in call.args]
        return ce(relay.Call(call.op, args, call.attrs), self.compiler)


def set_func_attr(fn, compiler, symbol):
    """The attributes TVM's PartitionGraph gives a partition."""
    for key, value in (
        ("Primitive", 1),
        ("Inline", 1),
        ("Compiler", compiler),
        ("global_symbol", symbol),
    ):
        fn = fn.with_attr(key, value)
    return fn


def module(functions: dict):
    """A typed module of ``{"main": fn, name: fn, ...}``."""
    mod = relay.IRModule.from_expr(functions.pop("main"))
    for name, fn in functions.items():
        mod[name] = fn
    return transform.InferType()(mod)
