"""``pattern.partition``: wrap each match in a function, as Relay's ``partition`` does.

    %2 = nn.relu(nn.conv2d(%x, %w))   ->   %2 = fn (%FunctionVar_0_0, %FunctionVar_0_1,
                                               PartitionedFromPattern="nn.conv2d_nn.relu_") {
                                             nn.relu(nn.conv2d(%FunctionVar_0_0, %FunctionVar_0_1))
                                           }(%x, %w)

The function's parameters are the match's inputs (typed when the graph types); constants matched by
``is_constant()``, or bound by no pattern (fields of an ``is_tuple(None)``), stay inside. Matches
are grouped as for rewrites (group.py): outermost first, never overlapping, never with an interior
value used outside the match. ``check(root)`` can refuse a match, which frees its nodes for other
matches. MergeComposite builds on ``partition_table``,
which applies several patterns in one pass, first entry first.
"""

from __future__ import annotations

from partita.errors import PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.graph import Graph, dataflow_order, function_bodies, rebuild
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from partita.ops.registry import Op
from partita.passes.infer_type import infer_new_types

from .group import Group, RuleIndex, group_matches
from .pattern import ENGINE, Pattern, PatternError
from .rewrite import _rebuild_node

_set = object.__setattr__


class _PartitionRule:
    __slots__ = ("pattern", "attrs", "check", "name")

    def __init__(self, pattern, attrs, check, name):
        if not isinstance(pattern, Pattern):
            raise PatternError(f"partition needs a pattern, got {pattern!r}")
        if check is not None and not callable(check):
            raise PatternError(f"check must be callable, got {check!r}")
        self.pattern, self.attrs, self.check, self.name = pattern, dict(attrs or {}), check, name


def partition(pattern: Pattern, expr_or_mod, attrs: dict | None = None, check=None):
    """Wrap every accepted match of ``pattern`` in a function with ``attrs`` (see module doc)."""
    return partition_table([(pattern, attrs, check)], expr_or_mod)


@gc_paused
def partition_table(entries, expr_or_mod, mod: IRModule | None = None):
    """Partition with several ``(pattern, attrs, check)`` entries in one pass; at each node the
    first entry whose pattern matches and whose check accepts wins."""
    rules = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, tuple) or not 1 <= len(entry) <= 3:
            raise PatternError(
                f"partition entry {i} must be (pattern, attrs, check), got {entry!r}"
            )
        pattern, attrs, check = (tuple(entry) + (None, None))[:3]
        rules.append(_PartitionRule(pattern, attrs, check, f"entry {i}"))
    index = RuleIndex(rules)
    if isinstance(expr_or_mod, IRModule):
        mod = expr_or_mod
    counter = [0]
    bodies = {}
    for name, _fn, body in function_bodies(expr_or_mod):
        bodies[name] = _partition_body(body, index, mod, counter)
    return rebuild(expr_or_mod, bodies)


def _accept(rule, root, bindings):
    if type(root) not in (Call, Tuple, TupleGetItem):
        return None  # a lone variable or constant is not a computation to wrap
    if rule.check is None:
        return True
    try:
        ok = rule.check(root)
    except PartitaError:
        raise
    except Exception as exc:  # a user's check: name it
        name = getattr(rule.check, "__name__", "check")
        raise PatternError(
            f"partition check {name} raised on {root.short()}: {type(exc).__name__}: {exc}"
        ) from exc
    return True if ok else None


def _partition_body(body: Expr, index: RuleIndex, mod, counter: list) -> Expr:
    typed = _try_type(body, mod)
    graph = Graph(body)
    groups = group_matches(graph, index, _accept, dominated_escape=True)
    if not groups:
        return body
    by_root = {id(g.root): g for g in groups}
    memo: dict[int, Expr] = {}
    for node in graph.order:
        group = by_root.get(id(node))
        if group is None:
            memo[id(node)] = _rebuild_node(node, memo)
            continue
        fn, inputs = extract_function(group, counter[0])
        counter[0] += 1
        memo[id(node)] = Call(fn, [memo[id(x)] for x in inputs], span=node.span)
    out = memo[id(body)]
    if typed:
        infer_new_types(out, mod)
    return out


def _try_type(body: Expr, mod) -> bool:
    try:
        infer_new_types(body, mod)
        return True
    except PartitaError:
        return False


def extract_function(group: Group, number: int) -> tuple[Function, list[Expr]]:
    """The group's region as a Function of its inputs, and the inputs in parameter order."""
    rule = group.rule
    interior, embedded = group.interior, group.embedded
    done: dict[int, Expr] = {}
    inputs: list[Expr] = []
    params: list[Var] = []
    names: list[str] = []
    group_inputs = group.inputs

    def leaf(node):
        # an is_constant() weight, a composite called inside, or a constant no leaf pattern
        # bound (a field of an is_tuple(None) tuple) stays inside; anything else is a parameter
        key = id(node)
        if (
            key in embedded
            or type(node) is Function
            or (type(node) is Constant and key not in group_inputs)
        ):
            return node
        param = _new_var(f"FunctionVar_{number}_{len(params)}", node.type_or_none)
        params.append(param)
        inputs.append(node)
        return param

    root = group.root
    if id(root) not in interior:
        done[id(root)] = leaf(root)
    # depth first, operands in order (parameters are numbered as they are first met); only
    # interior nodes go on the stack, each with the iterator of its operands still to see
    stack = [] if id(root) in done else [(root, iter(_kids(root)))]
    push, pop = stack.append, stack.pop
    while stack:
        node, pending = stack[-1]
        for kid in pending:
            k = id(kid)
            if k in done:
                continue
            if k in interior:
                push((kid, iter(_kids(kid))))
                break
            # leaf(kid), its common case inline: an embedded constant stays
            done[k] = kid if k in embedded else leaf(kid)
        else:
            pop()
            key = id(node)
            if key in done:
                continue
            op = node.op if type(node) is Call else None
            if type(op) is Op:
                # the same op, as many arguments, its attributes validated when the original
                # was built: the copy skips Call's checks and keeps the original's type (so
                # typing the new call walks only the call and its function, not the region)
                new = _new(Call)
                _SPAN(new, node.span)
                _TYPE(new, node._type)
                _OP(new, op)
                _ARGS(new, tuple([done[id(a)] for a in node.args]))
                _ATTRS(new, node.attrs)
                done[key] = new
                part = _OP_PARTS.get(op)
                if part is None:
                    part = _OP_PARTS[op] = f"{op.name}_"
                names.append(part)
                continue
            new = done[key] = _copy(node, done)
            if new.type_or_none is None and node.type_or_none is not None:
                new.with_type(node.type_or_none)  # the original's type, as above
            names.append(_name_part(node))
    attrs = {"PartitionedFromPattern": "".join(names), **rule.attrs}
    body = done[id(group.root)]
    if not all(type(k) is str and type(v) in _SCALARS for k, v in attrs.items()):
        return Function(params, body, None, attrs), inputs  # its error names the attribute
    return _new_function(params, body, attrs), inputs


_SCALARS = frozenset((str, int, float, bool))
_new = object.__new__
_SPAN, _TYPE = Expr.span.__set__, Expr._type.__set__
_OP, _ARGS, _ATTRS = Call.op.__set__, Call.args.__set__, Call.attrs.__set__
_OP_PARTS: dict = {}  # op -> its PartitionedFromPattern piece
_ATTRS_TYPE = type(Function((), Tuple(())).attrs)  # the immutable dict Function keeps attrs in


def _new_var(name: str, ty) -> Var:
    """``Var(name, ty)`` without the checks: a parameter named here, typed as the value it
    stands for (extract_function makes one per input of every match)."""
    new = _new(Var)
    _set(new, "span", None)
    _set(new, "_type", ty)
    _set(new, "name_hint", name)
    _set(new, "type_annotation", ty)
    return new


def _new_function(params: list, body: Expr, attrs: dict) -> Function:
    """``Function(params, body, None, attrs)`` without the checks: the params are Vars made by
    ``_new_var``, the body a copy of the match and ``attrs`` map str to scalars (checked by the
    caller)."""
    new = _new(Function)
    _set(new, "span", None)
    _set(new, "_type", None)
    _set(new, "params", tuple(params))
    _set(new, "body", body)
    _set(new, "ret_type", None)
    _set(new, "attrs", _ATTRS_TYPE(attrs))
    return new


def _kids(node) -> tuple:
    if type(node) is Call:
        return (node.op, *node.args) if type(node.op) is Function else node.args
    if type(node) is Tuple:
        return node.fields
    if type(node) is TupleGetItem:
        return (node.tuple_value,)
    return ()


def _copy(node: Expr, done: dict) -> Expr:
    if type(node) is Call:
        op = node.op
        if type(op) is Op:
            # the same op, as many arguments, its attributes validated when the original was
            # built: the copy skips Call's checks and keeps the original's type (extract_function
            # copies every node of every match)
            new = object.__new__(Call)
            _set(new, "span", node.span)
            _set(new, "_type", node.type_or_none)
            _set(new, "op", op)
            _set(new, "args", tuple([done[id(a)] for a in node.args]))
            _set(new, "attrs", node.attrs)
            return new
        op = done.get(id(op), op) if type(op) is Function else op
        args = [done[id(a)] for a in node.args]
        return Call(op, args, node.attrs if isinstance(op, Op) else None, node.span)
    if type(node) is Tuple:
        return Tuple([done[id(f)] for f in node.fields], node.span)
    if type(node) is TupleGetItem:
        return TupleGetItem(done[id(node.tuple_value)], node.index, node.span)
    return node


def _name_part(node: Expr) -> str:
    """Relay's PartitionedFromPattern pieces: ``nn.conv2d_``, ``Tuple_``, ``TupleGetItem0_``; a
    call to a function names the ops of its body, then ``FunctionCall_`` (as Relay, which visits
    the function before the call)."""
    if type(node) is Call:
        if isinstance(node.op, Op):
            return f"{node.op.name}_"
        if type(node.op) is Function:
            body = "".join(_name_part(n) for n in dataflow_order(node.op.body))
            return f"{body}FunctionCall_"
        return "Call_"
    if type(node) is Tuple:
        return "Tuple_"
    if type(node) is TupleGetItem:
        return f"TupleGetItem{node.index}_"
    return ""


ENGINE["partition"] = partition
