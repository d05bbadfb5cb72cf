"""The reference interpreter: the ops' numpy references walked over the graph.

It is the oracle for every pass, partition and backend. Composite and partitioned functions run
their bodies with the same references, so a module computes the same bits before and after
partitioning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from partita.ir.gc_pause import gc_paused
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
from partita.ir.visitor import children, post_order
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
    result = _Evaluator(mod).call(fn, args)
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

    def call(self, fn: Function, args: list) -> object:
        if len(args) != len(fn.params):
            raise InterpreterError(f"function takes {len(fn.params)} arguments, got {len(args)}")
        env = {id(p): a for p, a in zip(fn.params, args)}
        return self.eval(fn.body, env)

    def eval(self, root: Expr, env: dict) -> object:
        order = post_order(root, enter_functions=False)
        # Count consumers so intermediate values are freed as soon as their last user ran.
        uses: dict[int, int] = {}
        for node in order:
            if not isinstance(node, Function):
                for kid in children(node):
                    uses[id(kid)] = uses.get(id(kid), 0) + 1
        values: dict[int, object] = dict(env)
        lets = {id(n.var): n.value for n in order if type(n) is Let}
        _check_effects(root, order)
        for node in order:
            if id(node) in values:
                continue
            if id(node) in lets:  # a let variable: its value was computed just before it
                values[id(node)] = values[id(lets[id(node)])]
                continue
            values[id(node)] = self._eval_node(node, values)
            if not isinstance(node, Function):
                for kid in children(node):
                    k = id(kid)
                    uses[k] -= 1
                    if uses[k] == 0 and k not in env and kid is not root:
                        values.pop(k, None)
        return values[id(root)]

    def _eval_node(self, node: Expr, values: dict):
        if isinstance(node, Constant):
            return node.data
        if isinstance(node, Call):
            args = [values[id(a)] for a in node.args]
            op = node.op
            if isinstance(op, Function):
                return self.call(op, args)
            if isinstance(op, GlobalVar):
                return self.call(self.mod[op.name_hint], args)
            return self._run_op(node, args)
        if isinstance(node, Tuple):
            return tuple(values[id(f)] for f in node.fields)
        if isinstance(node, TupleGetItem):
            return values[id(node.tuple_value)][node.index]
        if isinstance(node, Function):
            return node
        if isinstance(node, If):  # both branches are graph values (dataflow); cond picks one
            cond = np.asarray(values[id(node.cond)])
            if cond.shape != () or cond.dtype != np.bool_:
                raise InterpreterError(f"If condition must be a scalar bool, got {cond!r}")
            return values[id(node.true_branch if bool(cond) else node.false_branch)]
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


def _check_effects(root: Expr, order: list) -> None:
    """partita evaluates both branches of an If: a ref_write only a branch reaches would run
    whatever the condition says, so it is refused."""
    writes = [n for n in order if type(n) is RefWrite]
    if not writes or not any(type(n) is If for n in order):
        return
    reached, stack = set(), [root]
    while stack:  # what runs whatever the conditions: the graph without the If branches
        node = stack.pop()
        if id(node) in reached or isinstance(node, Function):
            continue
        reached.add(id(node))
        stack.extend((node.cond,) if type(node) is If else children(node))
    for w in writes:
        if id(w) not in reached:
            raise InterpreterError(
                f"{w.short()} is only reached through an If branch: partita's If computes both "
                "branches (dataflow), so a write there would happen either way"
            )


def _check_result(call: Call, out) -> None:
    t = call.type_or_none
    if isinstance(t, TensorType):
        if not isinstance(out, np.ndarray) or out.shape != t.shape or out.dtype.name != t.dtype:
            got = f"{out.shape} {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
            raise InterpreterError(
                f"{call.short()}: reference returned {got}, type relation "
                f"says {t} (a bug in the op's registration)"
            )
