"""``tvm.relay.expr_functor``: Relay's ExprVisitor and ExprMutator, with TVM's method names.

A subclass overrides ``visit_call(call)`` (``visit_var``, ``visit_constant``, ``visit_tuple``,
``visit_tuple_getitem``, ``visit_function``, ``visit_global_var``, ``visit_if``, ``visit_let``,
``visit_ref_create``, ``visit_ref_read``, ``visit_ref_write``) and calls ``self.visit(child)``
or ``super().visit_call(call)`` itself; each node is visited once (memoized), as in TVM. The walk
recurses as TVM's Python visitors do, so very deep graphs need partita's own post-order
``partita.ir.ExprMutator`` (``rewrite_call``), which these are not.
"""

from __future__ import annotations

from partita.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)

_METHOD = {
    Call: "visit_call",
    Var: "visit_var",
    Constant: "visit_constant",
    Tuple: "visit_tuple",
    TupleGetItem: "visit_tuple_getitem",
    Function: "visit_function",
    GlobalVar: "visit_global_var",
    If: "visit_if",
    Let: "visit_let",
    RefCreate: "visit_ref_create",
    RefRead: "visit_ref_read",
    RefWrite: "visit_ref_write",
}


class _Functor:
    def __init__(self):
        self.memo_map: dict[int, object] = {}

    def visit(self, expr):
        key = id(expr)
        if key not in self.memo_map:
            method = _METHOD.get(type(expr))
            if method is None:  # an Op: visited as itself
                return expr
            self.memo_map[key] = getattr(self, method)(expr)
        return self.memo_map[key]


class ExprVisitor(_Functor):
    """Visits every node once; override the ``visit_*`` methods you need."""

    def visit_call(self, call: Call):
        self.visit(call.op)
        for a in call.args:
            self.visit(a)

    def visit_tuple(self, tup: Tuple):
        for f in tup.fields:
            self.visit(f)

    def visit_tuple_getitem(self, t: TupleGetItem):
        self.visit(t.tuple_value)

    def visit_function(self, fn: Function):
        for p in fn.params:
            self.visit(p)
        self.visit(fn.body)

    def visit_if(self, node: If):
        self.visit(node.cond)
        self.visit(node.true_branch)
        self.visit(node.false_branch)

    def visit_let(self, node: Let):
        self.visit(node.var)
        self.visit(node.value)
        self.visit(node.body)

    def visit_ref_create(self, node: RefCreate):
        self.visit(node.value)

    def visit_ref_read(self, node: RefRead):
        self.visit(node.ref)

    def visit_ref_write(self, node: RefWrite):
        self.visit(node.ref)
        self.visit(node.value)

    def visit_var(self, var: Var):
        return None

    def visit_constant(self, const: Constant):
        return None

    def visit_global_var(self, gv: GlobalVar):
        return None


class ExprMutator(_Functor):
    """Rebuilds what changed below; override the ``visit_*`` methods to replace nodes."""

    def visit_call(self, call: Call) -> Expr:
        op = self.visit(call.op)
        args = [self.visit(a) for a in call.args]
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        attrs = call.attrs if isinstance(op, Op) else None
        return Call(op, args, attrs, call.span)

    def visit_tuple(self, tup: Tuple) -> Expr:
        fields = [self.visit(f) for f in tup.fields]
        return tup if all(a is b for a, b in zip(fields, tup.fields)) else Tuple(fields, tup.span)

    def visit_tuple_getitem(self, t: TupleGetItem) -> Expr:
        value = self.visit(t.tuple_value)
        return t if value is t.tuple_value else TupleGetItem(value, t.index, t.span)

    def visit_function(self, fn: Function) -> Expr:
        params = [self.visit(p) for p in fn.params]
        body = self.visit(fn.body)
        if body is fn.body and all(a is b for a, b in zip(params, fn.params)):
            return fn
        return Function(params, body, fn.ret_type, fn.attrs, fn.span)

    def visit_if(self, node: If) -> Expr:
        parts = [self.visit(node.cond), self.visit(node.true_branch), self.visit(node.false_branch)]
        if all(a is b for a, b in zip(parts, (node.cond, node.true_branch, node.false_branch))):
            return node
        return If(*parts, node.span)

    def visit_let(self, node: Let) -> Expr:
        var, value, body = self.visit(node.var), self.visit(node.value), self.visit(node.body)
        if var is node.var and value is node.value and body is node.body:
            return node
        return Let(var, value, body, node.span)

    def visit_ref_create(self, node: RefCreate) -> Expr:
        value = self.visit(node.value)
        return node if value is node.value else RefCreate(value, node.span)

    def visit_ref_read(self, node: RefRead) -> Expr:
        ref = self.visit(node.ref)
        return node if ref is node.ref else RefRead(ref, node.span)

    def visit_ref_write(self, node: RefWrite) -> Expr:
        ref, value = self.visit(node.ref), self.visit(node.value)
        if ref is node.ref and value is node.value:
            return node
        return RefWrite(ref, value, node.span)

    def visit_var(self, var: Var) -> Expr:
        return var

    def visit_constant(self, const: Constant) -> Expr:
        return const

    def visit_global_var(self, gv: GlobalVar) -> Expr:
        return gv


__all__ = ["ExprMutator", "ExprVisitor"]
