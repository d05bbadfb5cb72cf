"""The reference interpreter: the ops' numpy references walked over the graph.

It is the oracle for every pass, partition and backend. Composite and partitioned functions run
their bodies with the same references, so a module computes the same bits before and after
partitioning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from partita.ir.gc_pause import gc_paused
from partita.ir.graph import dataflow_order
from partita.ir.module import IRModule
from partita.ir.nodes import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Tuple,
    TupleGetItem,
    Var,
)
from partita.ir.refs import RefCreate, RefRead, RefWrite
from partita.ir.types import TensorType
from partita.ir.visitor import children, free_vars
from partita.passes.infer_type import infer_type

from .errors import InterpreterError, PartitaError


@gc_paused
def interpret(mod, inputs=None, **named) -> list[np.ndarray]:
    """Run ``mod`` (an IRModule, Function or expression) and return its outputs as a list.

    Inputs go by name (``{"x": arr}`` or ``x=arr``) or by position (``[arr]``); a tuple result
    gives one array per field.
    """
    if isinstance(mod, IRModule):
        fn = mod["main"]
    elif isinstance(mod, Function):
        fn, mod = mod, IRModule({"main": mod})
    elif isinstance(mod, Expr):
        mod = IRModule.from_expr(mod)
        fn = mod["main"]
    else:
        raise PartitaError(f"interpret takes an IRModule, Function or Expr, not {type(mod)}")
    infer_type(fn, mod)
    args = _bind_inputs(fn, inputs, named)
    try:
        result = _Evaluator(mod).call(fn, args)
    except RecursionError:
        raise InterpreterError(
            "the program recursed deeper than the interpreter's Python stack allows "
            "(a let-bound function calling itself too many times?)"
        ) from None
    return list(_flatten(result))


def _flatten(value):
    if isinstance(value, tuple):
        for v in value:
            yield from _flatten(v)
    else:
        yield value


def _bind_inputs(fn: Function, inputs, named) -> list[np.ndarray]:
    names = [p.name_hint for p in fn.params]
    if inputs is None:
        inputs = {}
    if isinstance(inputs, Mapping):
        given = {**inputs, **named}
        unknown = [k for k in given if k not in names]
        if unknown:
            raise InterpreterError(
                f"unknown input {unknown[0]!r}; the model's inputs are {', '.join(names)}"
            )
        missing = [n for n in names if n not in given]
        if missing:
            raise InterpreterError(
                f"missing input {missing[0]!r}; the model's inputs are {', '.join(names)}"
            )
        values = [given[n] for n in names]
    elif isinstance(inputs, Sequence) or isinstance(inputs, np.ndarray):
        values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
        if named or len(values) != len(names):
            raise InterpreterError(
                f"expected {len(names)} inputs ({', '.join(names)}), got {len(values) + len(named)}"
            )
    else:
        raise InterpreterError(f"inputs must be a dict or a list, got {type(inputs).__name__}")
    return [_check_input(p, v) for p, v in zip(fn.params, values)]


def _check_input(param: Var, value) -> np.ndarray:
    arr = np.asarray(value)
    t = param.type_annotation
    if isinstance(t, TensorType):
        if arr.dtype.name != t.dtype:
            raise InterpreterError(
                f"input {param.name_hint!r} must be {t.dtype}, got {arr.dtype.name}"
            )
        if arr.shape != t.shape:
            raise InterpreterError(
                f"input {param.name_hint!r} must have shape {t.shape}, got {arr.shape}"
            )
    return arr


class _Evaluator:
    def __init__(self, mod: IRModule):
        self.mod = mod

    def call(self, fn: Function, args: list, captured: dict | None = None) -> object:
        if len(args) != len(fn.params):
            raise InterpreterError(f"function takes {len(fn.params)} arguments, got {len(args)}")
        env = dict(captured) if captured else {}
        env.update((id(p), a) for p, a in zip(fn.params, args))
        return self.eval(fn.body, env)

    def eval(self, root: Expr, env: dict) -> object:
        values: dict[int, object] = dict(env)
        self._fill(root, values, env, free=True)
        return values[id(root)]

    def _fill(self, root: Expr, values: dict, env: dict, free: bool) -> None:
        """Evaluate what ``root`` needs into ``values`` (each node once, in Relay's order: inputs
        left to right). ``free``: drop intermediate values after their last user; never with an
        If, whose branch (evaluated when the condition picks it) may read them, nor inside a
        branch, whose values the rest of the scope shares."""
        order = _eval_order(root)
        free = free and not any(type(n) is If for n in order)
        uses: dict[int, int] = {}
        for node in order if free else ():
            if not isinstance(node, Function):
                for kid in children(node):
                    uses[id(kid)] = uses.get(id(kid), 0) + 1
        lets = {id(n.var): n.value for n in order if type(n) is Let}
        for node in order:
            if id(node) in values:
                continue
            if id(node) in lets:  # a let variable: its value was computed just before it
                value = values[id(node)] = values[id(lets[id(node)])]
                if isinstance(value, _Closure):  # a let-bound function may call itself
                    value.env[id(node)] = value
                continue
            values[id(node)] = self._eval_node(node, values)
            if free and not isinstance(node, Function):
                for kid in children(node):
                    k = id(kid)
                    uses[k] -= 1
                    if uses[k] == 0 and k not in env and kid is not root:
                        values.pop(k, None)

    def _eval_node(self, node: Expr, values: dict):
        if isinstance(node, Constant):
            return node.data
        if isinstance(node, Call):
            return self._eval_call(node, values)
        if isinstance(node, Tuple):
            return tuple(values[id(f)] for f in node.fields)
        if isinstance(node, TupleGetItem):
            return values[id(node.tuple_value)][node.index]
        if isinstance(node, Function):  # a closure over the free variables' values
            free = free_vars(node)
            return _Closure(node, {id(v): values[id(v)] for v in free if id(v) in values})
        if isinstance(node, If):  # only the branch the condition picks is evaluated
            cond = np.asarray(values[id(node.cond)])
            if cond.shape != () or cond.dtype != np.bool_:
                raise InterpreterError(f"If condition must be a scalar bool, got {cond!r}")
            branch = node.true_branch if bool(cond) else node.false_branch
            self._fill(branch, values, values, free=False)
            return values[id(branch)]
        if isinstance(node, Let):
            return values[id(node.body)]
        if isinstance(node, RefCreate):
            return _Cell(values[id(node.value)])
        if isinstance(node, RefRead):
            return values[id(node.ref)].value
        if isinstance(node, RefWrite):
            values[id(node.ref)].value = values[id(node.value)]
            return ()
        if isinstance(node, Var):
            raise InterpreterError(f"free variable %{node.name_hint} has no value")
        raise InterpreterError(f"cannot evaluate {node.short()}")

    def _eval_call(self, node: Call, values: dict):
        args = [values[id(a)] for a in node.args]
        op = node.op
        if isinstance(op, (Function, Var)):
            closure = values.get(id(op))
            if not isinstance(closure, _Closure):
                raise InterpreterError(f"{node.short()}: {op.short()} is not a function")
            return self.call(closure.fn, args, closure.env)
        if isinstance(op, GlobalVar):
            return self.call(self.mod[op.name_hint], args)
        return self._run_op(node, args)

    def _run_op(self, call: Call, args: list):
        op = call.op
        try:
            with np.errstate(all="ignore"):
                out = op.impl(*args, call.attrs)
            if isinstance(out, np.generic):
                out = np.asarray(out)
        except PartitaError as e:
            raise InterpreterError(f"{call.short()}: {e}") from None
        except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as e:
            raise InterpreterError(
                f"{call.short()}: reference implementation failed: {e}"
            ) from None
        _check_result(call, out)
        return out


class _Cell:
    """The value of ``ref(v)``: a mutable cell."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Closure:
    """The value of a function expression: the function and the values of its free variables
    (a let-bound function also sees itself)."""

    __slots__ = ("fn", "env")

    def __init__(self, fn: Function, env: dict):
        self.fn, self.env = fn, env


def _eval_inputs(node: Expr) -> tuple:
    """What the interpreter evaluates before ``node``: its children, but of an If only the
    condition (a branch is evaluated when its condition picks it)."""
    return (node.cond,) if type(node) is If else children(node)


def _eval_order(root: Expr) -> list[Expr]:
    """Post-order without entering functions or If branches (the graph API's walk)."""
    return [root] if type(root) is Function else dataflow_order(root, (Function,), _eval_inputs)


def _check_result(call: Call, out) -> None:
    t = call.type_or_none
    if isinstance(t, TensorType):
        if not isinstance(out, np.ndarray) or out.shape != t.shape or out.dtype.name != t.dtype:
            got = f"{out.shape} {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
            raise InterpreterError(
                f"{call.short()}: reference returned {got}, type relation "
                f"says {t} (a bug in the op's registration)"
            )
