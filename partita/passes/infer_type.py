"""InferType: fill every node's type from its op's type relation.

%1 = nn.relu(%x)          ->   %1 = nn.relu(%x) /* ty=Tensor[(1, 8), float32] */
"""

from __future__ import annotations

from operator import attrgetter

from partita.errors import PartitaError, TypeInferenceError
from partita.ir.attrs import NoAttrs
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
from partita.ir.order import dataflow_order
from partita.ir.refs import RefCreate, RefRead, RefWrite
from partita.ir.types import RefType, TensorType, TupleType, Type
from partita.ir.visitor import children, post_order
from partita.limits import MemoryBudgetError, check_shape
from partita.ops.registry import Op

from .infra import module_pass


@gc_paused
def infer_type(expr: Expr, mod: IRModule | None = None) -> Type:
    """Type ``expr`` and everything under it (in place: types are write-once caches); return its
    type. Calls to global functions need ``mod``."""
    order = _dataflow_nodes(expr)
    if order is None or not _infer_ops(order, mod, {}, True):
        order = post_order(expr)
        _infer_ops(order, mod, {}, False)
    return expr.type_or_none


_ENTERED = (Function, Let)  # where post_order's walk and the dataflow walk part
_TYPE_OF = attrgetter("_type")
_SET_TYPE = Expr._type.__set__


def _dataflow_nodes(expr: Expr) -> list | None:
    """The nodes ``post_order(expr)`` gives, in another valid order, taken from the dataflow
    walk that the passes after InferType share (``dataflow_order``, remembered per graph), when
    the graph holds no function or let (where the two walks differ); else None. A Function's
    params come first, as in post_order."""
    if type(expr) is Function:
        body = dataflow_order(expr.body)
        kinds = set(map(type, body))
        order = [*expr.params, *body, expr]
    else:
        order = dataflow_order(expr)
        kinds = set(map(type, order))
    return None if any(k in kinds for k in _ENTERED) else order


def _infer_ops(order: list, mod, memo: dict, dataflow: bool) -> bool:
    """Type the untyped nodes of ``order``; ``memo``: (op, attrs, *argument types) -> result
    type (relations are pure). ``dataflow``: ``order`` is ``_dataflow_nodes``', which skips the
    callee of a call of a variable: False (nothing typed past that call) when one is met."""
    lets = _let_values(order) if not dataflow else {}
    known = memo.get
    # ``plain``: the memo keyed by the identities of the argument types, hashed at C speed (a
    # TensorType hashes in Python); a node the memo typed shares its result type object, so a
    # chain of such ops hits here, and constants' types are interned. The types live as long as
    # the nodes do, so an id is not reused during the walk.
    plain: dict = {}
    seen = plain.get
    for node in order:
        if node._type is not None and type(node) is not Function:
            continue
        if type(node) is Call:
            op = node.op
            if isinstance(op, Op):
                # the common case first: an op call whose relation has run on the same
                # attributes and argument types (a result is kept only for arguments with no
                # pending type)
                attrs = node.attrs
                if type(attrs) is NoAttrs:
                    args = node.args  # the key of one or two arguments built directly
                    if len(args) == 1:
                        same = (op, id(args[0]._type))
                    elif len(args) == 2:
                        same = (op, id(args[0]._type), id(args[1]._type))
                    else:
                        same = (op, *map(id, map(_TYPE_OF, args)))
                    found = seen(same)
                    if found is not None:
                        _SET_TYPE(node, found)
                        continue
                types = tuple(map(_TYPE_OF, node.args))
                try:
                    # by the types' identities first (constants' types are interned), then
                    # by their values
                    mine = (op, attrs, *map(id, types))
                    found = seen(mine)
                    if found is None:
                        found = known((op, attrs, *types))
                        if found is not None:
                            plain[mine] = found
                except TypeError:  # an attribute that does not hash
                    found = None
                if found is not None:
                    if type(attrs) is NoAttrs:
                        plain[same] = found
                    _SET_TYPE(node, found)
                    continue
            elif dataflow and type(op) is Var:
                return False
        infer_node_type(node, mod, lets, memo)
    return True


def _let_values(nodes) -> dict:
    """id(let variable) -> the value it names, for the Lets among ``nodes``."""
    return {id(n.var): n.value for n in nodes if type(n) is Let}


def infer_new_types(root: Expr, mod: IRModule | None = None) -> None:
    """Type the nodes under ``root`` that have no type yet, without walking the typed part.

    A typed node's inputs are all typed (types are inferred bottom-up), so after a rewrite only
    the rebuilt nodes need inferring; ``infer_type`` would walk the whole graph again.
    """
    pending = dataflow_order(root, inputs=lambda n: [k for k in children(n)
                                                     if k.type_or_none is None])
    lets = _let_values(pending)
    for node in pending:
        if node.type_or_none is None or type(node) is Function:
            infer_node_type(node, mod, lets)


def infer_node_type(
    node: Expr, mod: IRModule | None = None, lets: dict | None = None, memo: dict | None = None
) -> None:
    """Type one node whose children are already typed (the per-node step of InferType, for
    rewrites that re-type only the nodes they built); ``lets``: id(let variable) -> value, for
    let variables without an annotation; ``memo``: a dict in which to keep the results of type
    relations across the nodes of one walk."""
    pending = _pending_input(node)
    if pending is not None:  # an input waits for a recursive function's type
        node.with_type(pending)
    elif type(node) is Call:
        node.with_type(_call_type(node, mod, lets, memo))
    elif isinstance(node, Tuple):
        node.with_type(TupleType([f.type_or_none for f in node.fields]))
    elif isinstance(node, TupleGetItem):
        t = node.tuple_value.type_or_none
        if not isinstance(t, TupleType):
            raise TypeInferenceError(f"{_where(node)}: indexing .{node.index} of a non-tuple {t}")
        if not 0 <= node.index < len(t.fields):
            raise TypeInferenceError(
                f"{_where(node)}: index {node.index} out of range for a tuple of {len(t.fields)}"
            )
        node.with_type(t.fields[node.index])
    elif isinstance(node, Var) and lets and id(node) in lets:
        node.with_type(lets[id(node)].type_or_none)
    elif isinstance(node, If):
        node.with_type(_if_type(node))
    elif isinstance(node, Let):
        node.with_type(node.body.type_or_none)
    elif isinstance(node, Var):
        raise TypeInferenceError(
            f"variable %{node.name_hint} has no type annotation; give it "
            f"one, e.g. %{node.name_hint}: Tensor[(1, 224, 224, 3), int8]"
        )
    elif isinstance(node, Function):
        body_t = node.body.type_or_none
        if node.ret_type is not None and node.ret_type != body_t:
            name = node.attrs.get("global_symbol") or node.attrs.get("Composite") or "function"
            raise TypeInferenceError(
                f"{name}: declared return type {node.ret_type} but the body has type {body_t}"
            )
        # A Function's own type is its result type; the params are read off the node.
        if node.type_or_none is None:
            node.with_type(body_t)
            _resolve_recursive_calls(node, mod, lets)
    elif isinstance(node, GlobalVar):
        if mod is None:
            raise TypeInferenceError(f"@{node.name_hint} used outside a module")
        fn = mod[node.name_hint]
        node.with_type(infer_type(fn, mod))
    elif isinstance(node, Constant):
        pass  # typed at construction
    elif isinstance(node, (RefCreate, RefRead, RefWrite)):
        node.with_type(_ref_type(node))


def _ref_type(node) -> Type:
    if type(node) is RefCreate:
        return RefType(node.value.type_or_none)
    ref = node.ref.type_or_none
    if not isinstance(ref, RefType):
        raise TypeInferenceError(f"{_where(node)}: {ref} is not a reference (make one with ref())")
    if type(node) is RefRead:
        return ref.value
    if node.value.type_or_none != ref.value:
        raise TypeInferenceError(
            f"{_where(node)}: writes {node.value.type_or_none} to a reference of {ref.value}"
        )
    return TupleType([])


class _Pending(Type):
    """The result type of a call to a let-bound function that is still being typed (a
    recursive call); an If with one such branch takes the other branch's type."""

    __slots__ = ("var_id",)

    def __init__(self, var_id: int):
        object.__setattr__(self, "var_id", var_id)


def _pending_input(node) -> _Pending | None:
    kind = type(node)
    if kind is Call:
        kids = node.args
    elif kind in (If, Let, Function) or isinstance(node, Var):
        return None
    else:
        kids = children(node)
    for kid in kids:
        t = kid.type_or_none
        if type(t) is TensorType:
            continue
        if isinstance(t, _Pending) or (
            isinstance(t, TupleType) and any(isinstance(f, _Pending) for f in t.fields)
        ):
            return t if isinstance(t, _Pending) else next(
                f for f in t.fields if isinstance(f, _Pending)
            )
    return None


def _var_call_type(call: Call, lets) -> Type:
    """A call to a let-bound function: its result type, or _Pending while it is typed."""
    fn = (lets or {}).get(id(call.op))
    if not isinstance(fn, Function):
        raise TypeInferenceError(
            f"{_where(call)}: %{call.op.name_hint} is not a function bound by a let"
        )
    _check_args(call, fn)
    if fn.ret_type is not None:
        return fn.ret_type
    return fn.type_or_none if fn.type_or_none is not None else _Pending(id(call.op))


def _resolve_recursive_calls(fn: Function, mod, lets) -> None:
    """``fn`` (bound by a let) is typed: its recursive calls take its result type, and what
    waited on them is typed again."""
    var_id = next((k for k, v in (lets or {}).items() if v is fn), None)
    if var_id is None:
        return
    result, order = fn.type_or_none, post_order(fn.body)
    if isinstance(result, _Pending):
        name = next(n.name_hint for n in order if isinstance(n, Var) and id(n) == var_id)
        raise TypeInferenceError(
            f"cannot infer the result type of the recursive function %{name}: every path "
            "through its body calls itself; give it a return type (fn (...) -> Tensor[...])"
        )
    for node in order:
        t = node.type_or_none
        if isinstance(node, Var) and id(node) == var_id:
            node.with_type(result)
        elif isinstance(t, _Pending) and t.var_id == var_id or _has_pending(t, var_id):
            object.__setattr__(node, "_type", None)
            infer_node_type(node, mod, lets)
        elif type(node) is If:
            _if_type(node)  # the branches must agree now that the recursive call is typed


def _has_pending(t, var_id: int) -> bool:
    return isinstance(t, TupleType) and any(
        isinstance(f, _Pending) and f.var_id == var_id for f in t.fields
    )


def _if_type(node: If) -> Type:
    cond = node.cond.type_or_none
    if not (isinstance(cond, TensorType) and cond.shape == () and cond.dtype == "bool"):
        raise TypeInferenceError(f"{_where(node)}: the condition must be a scalar bool, got {cond}")
    t, f = node.true_branch.type_or_none, node.false_branch.type_or_none
    if isinstance(t, _Pending) or isinstance(f, _Pending):
        return f if isinstance(t, _Pending) else t
    if t != f:
        raise TypeInferenceError(f"{_where(node)}: the branches differ in type: {t} vs {f}")
    return t


def _call_type(call: Call, mod, lets=None, memo: dict | None = None) -> Type:
    arg_types = [a.type_or_none for a in call.args]
    op = call.op
    if isinstance(op, Var):
        return _var_call_type(call, lets)
    if isinstance(op, Op):
        key = None
        if memo is not None:
            try:
                key = (op, call.attrs, *arg_types)
                found = memo.get(key)
            except TypeError:  # an attribute that does not hash: no memo for this call
                key = found = None
            if found is not None:
                return found
        op.check_arity(len(call.args), call.span)
        try:
            out = op.type_rel(arg_types, call.attrs)
            _check_budget(out)
            if key is not None:
                memo[key] = out
            return out
        except MemoryBudgetError as e:
            raise MemoryBudgetError(f"{_where(call)}: {e}") from None
        except PartitaError as e:
            raise TypeInferenceError(
                f"{_where(call)}: {e}\n  {_describe_args(op, arg_types)}"
            ) from None
        except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
            raise TypeInferenceError(
                f"{_where(call)}: type relation failed ({e})\n  {_describe_args(op, arg_types)}"
            ) from None
    fn = op if isinstance(op, Function) else mod[op.name_hint] if mod is not None else None
    if fn is None:
        raise TypeInferenceError(f"{_where(call)}: call to @{op.name_hint} outside a module")
    _check_args(call, fn)
    return fn.type_or_none if fn.type_or_none is not None else infer_type(fn, mod)


def _check_args(call: Call, fn: Function) -> None:
    if len(fn.params) != len(call.args):
        raise TypeInferenceError(
            f"{_where(call)}: takes {len(fn.params)} arguments, got {len(call.args)}"
        )
    for p, a in zip(fn.params, call.args):
        t = a.type_or_none
        if p.type_annotation is not None and p.type_annotation != t:
            raise TypeInferenceError(
                f"{_where(call)}: argument for %{p.name_hint} has type {t}, "
                f"expected {p.type_annotation}"
            )


def _check_budget(ty) -> None:
    """Every op's result must fit the memory budget (partita.limits)."""
    if isinstance(ty, TupleType):
        for field in ty.fields:
            _check_budget(field)
    elif isinstance(ty, TensorType):
        check_shape(ty.shape, 8, lambda: f"its result {ty}")  # the references compute in 64 bits


def _where(node: Expr) -> str:
    if isinstance(node, Call):
        return node.op_name + (f" ({node.span})" if node.span is not None else "")
    return node.short()


def _describe_args(op: Op, types) -> str:
    names = list(op.inputs) + [f"arg{i}" for i in range(len(op.inputs), len(types))]
    return "arguments: " + ", ".join(f"{n}: {t}" for n, t in zip(names, types))


@module_pass("InferType", opt_level=0)
def InferType(mod: IRModule, ctx) -> IRModule:
    """Type every function of the module (types are cached on the nodes; the module is returned)."""
    for fn in mod.functions.values():
        infer_type(fn, mod)
    return mod


def tensor_type(expr: Expr) -> TensorType:
    """The inferred TensorType of ``expr`` (inferring it if needed)."""
    t = expr.type_or_none if expr.type_or_none is not None else infer_type(expr)
    if not isinstance(t, TensorType):
        raise PartitaError(f"{expr.short()} is a tuple, not a tensor")
    return t
