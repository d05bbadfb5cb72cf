"""Rewriting: TVM's ``DFPatternCallback`` and partita's ``RewriteTable``, on one engine.

    class RemoveRelu(DFPatternCallback):          # TVM's form
        def __init__(self):
            super().__init__()
            self.pattern = is_op("nn.relu")(wildcard())
        def callback(self, pre, post, node_map):
            return post.args[0]

    table = RewriteTable([(is_op("nn.relu")(wildcard("x")), lambda x: x)])   # named captures

    mod = rewrite([RemoveRelu()], mod)   # or rewrite(table, mod), or table(mod)

Each pass groups matches on the current graph (outermost first, see group.py), then rebuilds it
bottom-up, replacing each group's root. ``rewrite`` repeats until nothing fires (bounded). A
callback gets TVM's ``(pre, post, node_map)``: node_map values are post-rewrite nodes. A table
function is called with the *matched* (pre-rewrite, typed) nodes as keyword arguments while
grouping, so returning None lets the next rule of the table try that node; the nodes it returns
are then mapped onto the rewritten graph.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass

from partita.errors import PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.graph import (
    Graph,
    function_bodies,
    map_inner_functions,
    rebuild,
    value_inputs,
    with_inputs,
)
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from partita.ops.registry import Op
from partita.passes.infer_type import infer_new_types
from partita.passes.infra import Pass, module_pass

from .checks import describe
from .group import RuleIndex, group_matches
from .matcher import Match
from .pattern import Pattern, PatternError, capture_names

log = logging.getLogger("partita.patterns")


class RewriteError(PatternError):
    """A rewrite that does not converge, or a rule that returned something unusable."""


class DFPatternCallback:
    """TVM's callback: set ``self.pattern``, implement ``callback(pre, post, node_map)``.

    ``require_type``: type the graph before matching. ``rewrite_once``: run in the first
    iteration only. Return ``post`` (or None) to leave the node unchanged.
    """

    def __init__(self, require_type: bool = False, rewrite_once: bool = False):
        self.require_type = require_type
        self.rewrite_once = rewrite_once
        self.pattern = None

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Expr:
        """The replacement of ``post`` (the match's root with its inputs rewritten)."""
        raise NotImplementedError(f"{type(self).__name__} must implement callback()")

    @property
    def name(self) -> str:
        """The name traces and errors use: the class name."""
        return type(self).__name__

    def rewrite(self, expr_or_mod, **options):
        """``rewrite([self], expr_or_mod)``."""
        return rewrite([self], expr_or_mod, **options)


class NodeMap(dict):
    """TVM's node_map (pattern -> [node]) that also answers capture names (name -> node)."""

    def __init__(self, by_pattern: dict, by_name: dict):
        super().__init__(by_pattern)
        self.captures = by_name

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                return self.captures[key]
            except KeyError:
                raise PatternError(
                    f"no capture named {key!r} in this match (captures: "
                    f"{', '.join(self.captures) or 'none'})"
                ) from None
        try:
            return super().__getitem__(key)
        except KeyError:
            raise PatternError(
                f"{key!r} is not part of this match (an alternative that was not "
                f"taken, or a pattern from another rule)"
            ) from None

    def get(self, key, default=None):
        """TVM's ``node_map.get(pattern, default=...)`` (a keyword, as TVM's Map takes it)."""
        return self[key] if key in self or key in self.captures else default


@dataclass(frozen=True)
class TraceEntry:
    """One firing of a rule: which iteration, which rule, where, and what it became."""

    iteration: int
    rule: str
    where: str
    result: str

    def __str__(self):
        return f"[{self.iteration}] {self.rule}: {self.where} -> {self.result}"


class _TableRule:
    __slots__ = ("pattern", "fn", "name", "params", "var_kw")

    def __init__(self, pattern, fn, name):
        self.pattern, self.fn, self.name = pattern, fn, name
        self.params, self.var_kw = _signature(fn, pattern, name)

    def call(self, bindings: dict, root: Expr):
        if self.var_kw:
            kwargs = {k: v for k, v in bindings.items() if type(k) is str}
        else:
            kwargs = {}
            for pname, has_default in self.params:
                value = bindings.get(pname)
                if value is not None or not has_default:
                    kwargs[pname] = value
        out = user_call(self.name, root, self.fn, **kwargs)
        if out is not None and not isinstance(out, Expr):
            raise RewriteError(
                f"rule {self.name} returned {out!r}; a rule returns an "
                f"expression, or None for no rewrite"
            )
        return out


def user_call(name: str, where: Expr, fn, *args, **kwargs):
    """Run a user's rule; an exception that is not partita's names the rule and the node."""
    try:
        return fn(*args, **kwargs)
    except PartitaError:
        raise
    except Exception as exc:
        raise RewriteError(
            f"rule {name} raised on {describe(where)}: {type(exc).__name__}: {exc}"
        ) from exc


def _signature(fn, pattern: Pattern, name: str):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], True
    params, var_kw = [], False
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            params.append((p.name, p.default is not p.empty))
        elif p.kind is p.POSITIONAL_ONLY and p.default is p.empty:
            raise PatternError(
                f"rule {name}: captures are passed by keyword; {p.name} is positional-only"
            )
    names = set(capture_names(pattern))
    missing = [p for p, has_default in params if not has_default and p not in names]
    if missing:
        raise PatternError(
            f"rule {name} takes {', '.join(missing)}, but its pattern captures "
            f"only {', '.join(sorted(names)) or 'nothing'} (name sub-patterns with "
            f"wildcard('x') or .named('x'))"
        )
    return params, var_kw


class RewriteTable:
    """Rules as data: ``RewriteTable([(pattern, fn), ...])``; fn(**captures) -> expr or None.

    The first rule (in table order) whose pattern matches and whose fn returns an expression
    rewrites a node. Rules are indexed by the op at their pattern's root, so a table of many
    rules costs time linear in the graph.
    """

    def __init__(
        self,
        rules,
        require_type: bool = False,
        rewrite_once: bool = False,
        name: str = "RewriteTable",
    ):
        self.rules = []
        for i, entry in enumerate(rules):
            if not isinstance(entry, tuple) or len(entry) not in (2, 3):
                raise PatternError(
                    f"table entry {i} must be (pattern, fn) or (pattern, fn, name), got {entry!r}"
                )
            pattern, fn = entry[0], entry[1]
            if not isinstance(pattern, Pattern) or not callable(fn):
                raise PatternError(
                    f"table entry {i} must be (pattern, fn), got "
                    f"({type(pattern).__name__}, {type(fn).__name__})"
                )
            rname = entry[2] if len(entry) == 3 else getattr(fn, "__name__", f"rule{i}")
            if rname == "<lambda>":
                rname = f"{name}[{i}]"
            self.rules.append(_TableRule(pattern, fn, rname))
        self.require_type, self.rewrite_once, self.name = require_type, rewrite_once, name
        self.index = RuleIndex(self.rules)

    def __len__(self):
        return len(self.rules)

    def __call__(self, expr_or_mod, **options):
        """``rewrite(self, expr_or_mod, **options)``."""
        return rewrite(self, expr_or_mod, **options)


class _CallbackRule:
    """A DFPatternCallback seen as a one-rule table."""

    __slots__ = ("pattern", "name", "cb")

    def __init__(self, cb: DFPatternCallback):
        pattern = getattr(cb, "pattern", None)
        if not isinstance(pattern, Pattern):
            raise PatternError(
                f"{type(cb).__name__}.pattern must be a pattern (set it in "
                f"__init__), got {pattern!r}"
            )
        self.pattern, self.name, self.cb = pattern, getattr(cb, "name", type(cb).__name__), cb


class _Step:
    """One step of an iteration: a table, or one callback (TVM runs callbacks one by one)."""

    def __init__(self, item):
        if isinstance(item, RewriteTable):
            self.rules, self.table = item.rules, True
        elif isinstance(item, DFPatternCallback) or hasattr(item, "callback"):
            self.rules, self.table = [_CallbackRule(item)], False
        else:
            raise PatternError(
                f"rewrite() takes DFPatternCallbacks or RewriteTables, got {type(item).__name__}"
            )
        self.require_type = bool(getattr(item, "require_type", False))
        self.rewrite_once = bool(getattr(item, "rewrite_once", False))
        self.index = item.index if self.table else RuleIndex(self.rules)

    def accept(self, rule, root, bindings):
        return rule.call(bindings, root) if self.table else True


@gc_paused
def rewrite(
    callbacks, expr_or_mod, mod: IRModule | None = None, max_iterations: int = 100, trace=None
):
    """Apply callbacks / tables to a fixed point; returns the same kind of object it was given.

    ``trace``: True logs each firing on the ``partita.patterns`` logger, a list collects
    TraceEntry objects, a callable receives them.
    """
    items = callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]
    steps = [_Step(item) for item in items]
    if max_iterations < 1:
        raise PatternError(f"max_iterations must be >= 1, got {max_iterations}")
    if isinstance(expr_or_mod, IRModule):
        mod = expr_or_mod
    sink = _trace_sink(trace)
    bodies = {}

    def one(body):  # let-bound functions' bodies too, inner ones first
        return _fixed_point(steps, map_inner_functions(body, one), mod, max_iterations, sink)

    for name, _fn, body in function_bodies(expr_or_mod):
        typed = body.type_or_none is not None
        new = one(body)
        if new is not body:
            _retype(new, mod, name, strict=typed)
        bodies[name] = new
    return rebuild(expr_or_mod, bodies)


def rewrite_pass(callbacks, name: str, opt_level: int = 0, **options) -> Pass:
    """The rewrite as a named pass for ``Sequential``: ``rewrite_pass(table, "FoldQuantize")``;
    ``options`` go to ``rewrite`` (``max_iterations``, ``trace``)."""

    def run(mod: IRModule, ctx) -> IRModule:
        return rewrite(callbacks, mod, **options)

    run.__doc__ = f"Pattern rewrite {name}."
    return module_pass(name, opt_level)(run)()


def _fixed_point(steps, root, mod, max_iterations, sink):
    fired: list = []
    for it in range(max_iterations):
        fired = []
        for step in steps:
            if step.rewrite_once and it > 0:
                continue
            root, step_fired = _one_pass(step, root, mod, it, sink)
            fired.extend(step_fired)
        if not fired:
            return root
    raise RewriteError(_not_converged(fired, max_iterations))


def _not_converged(fired, max_iterations) -> str:
    counts: dict[str, list] = {}
    for rule, where in fired:
        counts.setdefault(rule, []).append(where)
    parts = [f"{rule} ({len(w)} times, e.g. at {w[0]})" for rule, w in counts.items()]
    return (
        f"rewrite did not converge after {max_iterations} iterations; still firing in the "
        f"last one: {'; '.join(parts)} (rules that undo each other, or a rule whose result "
        f"matches its own pattern?)"
    )


def _one_pass(step: _Step, root: Expr, mod, iteration: int, sink):
    if step.require_type:
        _type_for_matching(root, mod)
    graph = Graph(root)
    groups = group_matches(graph, step.index, step.accept)
    if not groups:
        return root, []
    by_root = {id(g.root): g for g in groups}
    memo: dict[int, Expr] = {}
    produced: set[int] = set()
    fired = []
    for node in graph.order:
        post = _rebuild_node(node, memo)
        group = by_root.get(id(node))
        if group is not None:
            out = _apply(step, group, node, post, memo)
            if out is not None and out is not post:
                out = graft(out, memo, produced, node, post)
                if not _same_node(out, post):
                    where = describe(node)
                    fired.append((group.rule.name, where))
                    if sink is not None:
                        sink(TraceEntry(iteration, group.rule.name, where, describe(out)))
                    post = out
        memo[id(node)] = post
        produced.add(id(post))
    return memo[id(root)], fired


def _apply(step: _Step, group, pre: Expr, post: Expr, memo: dict):
    if step.table:
        return group.payload
    node_map, names = {}, {}
    for k, v in Match(pre, group.bindings).node_map.items():
        node_map[k] = [memo.get(id(x), x) for x in v]
    for k, v in group.bindings.items():
        if type(k) is str:
            names[k] = memo.get(id(v), v)
    out = user_call(
        group.rule.name, pre, group.rule.cb.callback, pre, post, NodeMap(node_map, names)
    )
    if out is not None and not isinstance(out, Expr):
        raise RewriteError(f"{group.rule.name}.callback returned {out!r}, not an expression")
    return out


def _rebuild_node(node: Expr, memo: dict) -> Expr:
    """``node`` with its children replaced by their rewritten versions (itself if none changed)."""
    return with_inputs(node, [memo.get(id(k), k) for k in value_inputs(node)])


def graft(out: Expr, memo: dict, produced: set, pre: Expr, post: Expr) -> Expr:
    """Fit a rule's result into the rewritten graph: nodes of the old graph become their
    rewritten versions, ``pre`` becomes ``post``, and new nodes without a span get ``pre``'s."""
    span = pre.span
    done: dict[int, Expr] = {id(pre): post}
    stack = [(out, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in done:
            continue
        if key in memo:
            done[key] = memo[key]
        elif key in produced or isinstance(node, (Var, Constant, GlobalVar, Function, Op)):
            done[key] = node
        elif not expanded:
            stack.append((node, True))
            stack.extend((k, False) for k in _kids(node) if id(k) not in done)
        else:
            done[key] = _respan(node, done, span)
    return done[id(out)]


def _kids(node) -> tuple:
    if type(node) is Call:
        return (node.op, *node.args) if type(node.op) is Function else node.args
    if type(node) is Tuple:
        return node.fields
    if type(node) is TupleGetItem:
        return (node.tuple_value,)
    return ()


def _respan(node, done: dict, span):
    """A new node with its children mapped; it gets ``span`` if it has none."""
    new_span = node.span if node.span is not None else span
    if type(node) is Call:
        args = [done[id(a)] for a in node.args]
        op = done.get(id(node.op), node.op) if type(node.op) is Function else node.op
        if new_span is node.span and op is node.op and all(a is b for a, b in zip(args, node.args)):
            return node
        return Call(op, args, node.attrs if isinstance(op, Op) else None, new_span)
    if type(node) is Tuple:
        fields = [done[id(f)] for f in node.fields]
        if new_span is node.span and all(a is b for a, b in zip(fields, node.fields)):
            return node
        return Tuple(fields, new_span)
    value = done[id(node.tuple_value)]
    if new_span is node.span and value is node.tuple_value:
        return node
    return TupleGetItem(value, node.index, new_span)


def _same_node(a: Expr, b: Expr) -> bool:
    """A rule that rebuilt the very same call did not rewrite anything."""
    if a is b:
        return True
    return (
        type(a) is Call
        and type(b) is Call
        and a.op is b.op
        and a.attrs == b.attrs
        and len(a.args) == len(b.args)
        and all(x is y for x, y in zip(a.args, b.args))
    )


def _type_for_matching(root: Expr, mod) -> None:
    try:
        infer_new_types(root, mod)
    except PartitaError as e:
        raise RewriteError(
            f"a rule requires types, but the graph does not type-check: {e}"
        ) from None


def _retype(root: Expr, mod, name, strict: bool) -> None:
    """Type the result; an untyped input (free vars without annotations) may stay untyped."""
    try:
        infer_new_types(root, mod)
    except PartitaError as e:
        if not strict:
            return
        where = f" in @{name}" if name else ""
        raise RewriteError(
            f"the rewritten graph{where} does not type-check (a rule built an invalid node?): {e}"
        ) from None


def _trace_sink(trace):
    if trace is None or trace is False:
        return None
    if trace is True:
        return lambda entry: log.info("%s", entry)
    if isinstance(trace, list):
        return trace.append
    if callable(trace):
        return trace
    raise PatternError(f"trace must be True, a list or a callable, got {trace!r}")
