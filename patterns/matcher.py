"""The matcher: a backtracking search for a consistent assignment of pattern nodes to expressions.

A match binds every pattern node it uses to one expression (a sub-pattern used twice must match the
same node twice) and every capture name to one expression. Unlike TVM's matcher, which commits to
the first alternative that matches, this one backtracks: ``p | q`` inside a call, or the two
operand orders of a commutative op, are retried when a later sibling fails, so a pattern matches
whenever some consistent assignment exists. The first assignment in a fixed order wins (left
alternative first, written operand order before the swapped one).

The search runs on an explicit goal list and choice stack, never on Python's call stack.
"""

from __future__ import annotations

from partita.ir.gc_pause import gc_paused
from partita.ir.graph import Graph, function_bodies, node_key
from partita.ir.nodes import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from partita.ir.structural import structural_equal
from partita.ir.visitor import free_vars
from partita.ops.registry import Op, get_op

from .checks import (
    attr_mismatch,
    callee,
    commute_permutation,
    describe,
    inconsistent,
    op_mismatch,
    type_mismatch,
)
from .control import REDIRECTS, IfPattern, LetPattern, Recursion
from .dominator import check_dominator
from .pattern import (
    ENGINE,
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    DominatorPattern,
    ExprPattern,
    FunctionPattern,
    OpPattern,
    Pattern,
    PatternError,
    PredicatePattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
    _PostCheck,
)

_FAIL = object()
_LEAF_TYPES = (WildcardPattern, VarPattern, ConstantPattern, ExprPattern, OpPattern)


class Match:
    """One match: its ``root``, its ``captures`` by name and ``node_map`` by pattern (TVM's)."""

    __slots__ = ("root", "bindings", "function")

    def __init__(self, root: Expr, bindings: dict, function: str | None = None):
        self.root, self.bindings, self.function = root, bindings, function

    @property
    def captures(self) -> dict[str, Expr]:
        """name -> matched node, for every named sub-pattern the match bound."""
        return {k: v for k, v in self.bindings.items() if type(k) is str}

    def __getitem__(self, name: str) -> Expr:
        try:
            return self.bindings[name]
        except KeyError:
            raise PatternError(
                f"the match has no capture {name!r} (it has: {', '.join(self.captures) or 'none'})"
            ) from None

    def get(self, name: str, default=None):
        """The capture ``name``, or ``default`` when an untaken alternative held it."""
        return self.bindings.get(name, default)

    @property
    def node_map(self) -> dict:
        """pattern -> [matched expressions] (TVM's node_map; dominator paths list every node)."""
        out = {}
        for k, v in self.bindings.items():
            if isinstance(k, Pattern):
                out[k] = [v]
            elif type(k) is _PostCheck:
                out[k.owner.path] = list(v[1])
        return out

    def __repr__(self):
        caps = ", ".join(
            f"{k}={v.short() if isinstance(v, Expr) else v}" for k, v in self.captures.items()
        )
        return f"<Match at {self.root.short()}{': ' + caps if caps else ''}>"


def match(pattern: Pattern, expr: Expr) -> Match | None:
    """The first match of ``pattern`` rooted at ``expr``, or None."""
    if not isinstance(pattern, Pattern):
        raise PatternError(f"match() takes a pattern, got {pattern!r}")
    if not isinstance(expr, (Expr, Op)):  # an op matches is_op (TVM: ops are expressions)
        raise PatternError(f"match() takes an expression or an op, got {type(expr).__name__}")
    graph: list[Graph] = []

    def lazy_graph():
        if not graph:
            graph.append(Graph(expr))
        return graph[0]

    solver = Solver(lazy_graph)
    return Match(expr, solver.binds) if solver.run(pattern, expr) else None


@gc_paused
def find(pattern: Pattern, expr_or_mod) -> list[Match]:
    """Every node where ``pattern`` matches, in post-order (function by function for a module)."""
    if not isinstance(pattern, Pattern):
        raise PatternError(f"find() takes a pattern, got {pattern!r}")
    keys = pattern.root_keys()
    out = []
    for name, _fn, body in function_bodies(expr_or_mod):
        graph = Graph(body)
        solver = Solver(lambda graph=graph: graph)
        for node in graph.order:
            if type(node) is Function or (keys is not None and node_key(node) not in keys):
                continue
            if solver.run(pattern, node):
                out.append(Match(node, solver.binds, name))
    return out


class Solver:
    """Depth-first search over goals ``(pattern, expr, rest)`` with a trail for undoing bindings.

    ``record=True`` keeps the failure reached with the most bindings (for ``explain``).
    """

    def __init__(self, graph_fn=None, record: bool = False):
        self.graph_fn = graph_fn
        self.record = record
        self.best = None
        self.binds: dict = {}
        self.trail: list = []
        self.choices: list = []

    def graph(self) -> Graph:
        if self.graph_fn is None:
            raise PatternError("dominates() needs the surrounding graph")
        return self.graph_fn()

    def run(self, pattern: Pattern, expr: Expr, seed: dict | None = None) -> bool:
        """Search for a match; on success ``self.binds`` holds it (a fresh dict per run)."""
        self.binds = dict(seed) if seed else {}
        self.trail, self.choices = [], []
        return self._search((pattern, expr, None))

    def _search(self, goals) -> bool:
        binds, trail, choices = self.binds, self.trail, self.choices
        while True:
            if goals is None:
                return True
            p, e, rest = goals
            if type(p) is _PostCheck:
                goals = _POST[type(p.owner)](self, p.owner, e, rest)
            else:
                prev = binds.get(p)
                if prev is None:
                    goals = _STEP[type(p)](self, p, e, rest)
                elif prev is e:
                    goals = rest
                else:
                    goals = self.fail(p, e, lambda prev=prev: inconsistent(prev))
            if goals is _FAIL:
                if not choices:
                    return False
                goals, mark = choices.pop()
                while len(trail) > mark:
                    del binds[trail.pop()]

    def bind(self, p: Pattern, e) -> bool:
        """Bind ``p`` (and its capture name) to ``e``; False if the name is bound elsewhere."""
        name = p.name
        if name is not None:
            prev = self.binds.get(name)
            if prev is None:
                self.binds[name] = e
                self.trail.append(name)
            elif prev is not e:
                return False
        self.binds[p] = e
        self.trail.append(p)
        return True

    def bind_or_fail(self, p, e, rest):
        if self.bind(p, e):
            return rest
        return self.fail(
            p, e, lambda: f"capture {p.name!r} is already bound to {describe(self.binds[p.name])}"
        )

    def choice(self, goals) -> None:
        self.choices.append((goals, len(self.trail)))

    def fail(self, p, e, reason):
        """Record why ``p`` did not match ``e`` (``reason`` is a thunk: built only when asked)."""
        if self.record:
            depth = sum(1 for k in self.binds if isinstance(k, Pattern))
            if self.best is None or depth > self.best[0]:
                self.best = (depth, p, e, reason(), dict(self.binds))
        return _FAIL


# ---- steps: one per pattern class -------------------------------------------------------------


def _wildcard(s: Solver, p, e, rest):
    target = REDIRECTS.get(p)
    if target is None:
        return s.bind_or_fail(p, e, rest)
    # recursion: the target matched on its own; its nodes kept so grouping takes them in
    sub = type(s)(s.graph_fn)
    if not sub.run(target, e):
        return s.fail(p, e, lambda: f"the redirected pattern does not match {describe(e)}")
    inner = []
    for k, v in sub.binds.items():
        if type(k) is Recursion:
            inner.extend(v[1])
        elif isinstance(k, Pattern) and isinstance(v, Expr) and not isinstance(k, _LEAF_TYPES):
            inner.append(v)
    goals = s.bind_or_fail(p, e, rest)
    if goals is not _FAIL:
        key = Recursion(p)
        s.binds[key] = (e, tuple(inner))
        s.trail.append(key)
    return goals


def _op(s: Solver, p: OpPattern, e, rest):
    if e is not p.op:
        return s.fail(p, e, lambda: op_mismatch(p, e))
    return s.bind_or_fail(p, e, rest)


def _var(s: Solver, p: VarPattern, e, rest):
    if type(e) is not Var:
        return s.fail(p, e, lambda: f"not a variable: got {describe(e)}")
    if p.var_name is not None and e.name_hint != p.var_name:
        return s.fail(
            p, e, lambda: f"variable name differs: expected %{p.var_name}, got %{e.name_hint}"
        )
    return s.bind_or_fail(p, e, rest)


def _constant(s: Solver, p, e, rest):
    if type(e) is not Constant:
        return s.fail(p, e, lambda: f"not a constant: got {describe(e)}")
    return s.bind_or_fail(p, e, rest)


def same_expr(a: Expr, b) -> bool:
    """is_expr's test: structurally equal, reading the same variables (by identity)."""
    if a is b:
        return True
    if type(a) is Var or not isinstance(b, Expr) or not structural_equal(a, b):
        return False
    return all(u is v for u, v in zip(free_vars(a), free_vars(b)))


def _expr(s: Solver, p: ExprPattern, e, rest):
    same = same_expr(p.expr, e)
    if not same:
        return s.fail(
            p,
            e,
            lambda: f"not structurally equal to {describe(p.expr)}: got {describe(e)}",
        )
    return s.bind_or_fail(p, e, rest)


def _call(s: Solver, p: CallPattern, e, rest):
    if type(e) is not Call:
        return s.fail(p, e, lambda: f"not a call: got {describe(e)}")
    opp = p.op
    direct = type(opp) is OpPattern
    if direct and e.op is not opp.op:
        goals = _reassociated(s, p, e, rest)
        if goals is not None:
            return goals
        return s.fail(p, e, lambda: f"op differs: expected {opp.op.name}, got {callee(e.op)}")
    args, eargs = p.args, e.args
    if args is None:  # any arguments
        if not s.bind(p, e) or (direct and opp not in s.binds and not s.bind(opp, e.op)):
            return s.fail(p, e, lambda: f"capture {p.name or opp.name!r} is bound elsewhere")
        return rest if direct else (opp, e.op, rest)
    if len(args) != len(eargs):
        return s.fail(
            p,
            e,
            lambda: (
                f"arity differs: the pattern has {len(args)} arguments, "
                f"{e.op_name} has {len(eargs)}"
            ),
        )
    if not s.bind(p, e) or (direct and opp not in s.binds and not s.bind(opp, e.op)):
        return s.fail(p, e, lambda: f"capture {p.name or opp.name!r} is already bound elsewhere")
    perm = commute_permutation(e.op) if type(e.op) is Op else None
    if perm is not None:
        swapped = rest
        for i in range(len(args) - 1, -1, -1):
            swapped = (args[i], eargs[perm[i]], swapped)
        s.choice(swapped if direct else (opp, e.op, swapped))
    goals = rest
    for i in range(len(args) - 1, -1, -1):
        goals = (args[i], eargs[i], goals)
    return goals if direct else (opp, e.op, goals)


def _op_call(p, op: Op) -> bool:
    return (
        type(p) is CallPattern and type(p.op) is OpPattern and p.op.op is op and p.args is not None
    )


def _reassociated(s: Solver, p: CallPattern, e: Call, rest):
    """TVM's matcher takes ``(a * b) / c``, ``a * (b / c)`` and ``(a / c) * b`` for one another
    (batch-norm patterns rely on it): a divide pattern tried on a multiply whose argument is a
    divide, and a multiply pattern holding a divide tried on a divide of a multiply, are retried
    in the other association. Goals for the regrouped pattern, or None."""
    div, mul = get_op("divide"), get_op("multiply")
    op = p.op.op
    if p.args is None:
        return None
    alternatives = []
    if op is div and e.op is mul and _op_call(p.args[0], mul):
        if any(type(a) is Call and a.op is div for a in e.args):
            m = p.args[0]
            for k in (0, 1):
                inner = CallPattern(p.op, [m.args[k], p.args[1]])
                alternatives.append(CallPattern(m.op, [m.args[1 - k], inner]))
    elif op is mul and e.op is div and any(type(a) is Call and a.op is mul for a in e.args):
        for i in (0, 1):
            d = p.args[i]
            if _op_call(d, div):
                inner = CallPattern(p.op, [d.args[0], p.args[1 - i]])
                alternatives.append(CallPattern(d.op, [inner, d.args[1]]))
                break
    if not alternatives or not s.bind(p, e):
        return None
    for alt in alternatives[1:]:
        s.choice((alt, e, rest))
    return (alternatives[0], e, rest)


def _tuple(s: Solver, p: TuplePattern, e, rest):
    if type(e) is not Tuple:
        return s.fail(p, e, lambda: f"not a tuple: got {describe(e)}")
    if p.fields is None:
        return s.bind_or_fail(p, e, rest)
    if len(p.fields) != len(e.fields):
        return s.fail(
            p,
            e,
            lambda: f"tuple size differs: expected {len(p.fields)} fields, got {len(e.fields)}",
        )
    goals = s.bind_or_fail(p, e, rest)
    if goals is _FAIL:
        return goals
    for f, x in zip(reversed(p.fields), reversed(e.fields)):
        goals = (f, x, goals)
    return goals


def _function(s: Solver, p: FunctionPattern, e, rest):
    if type(e) is not Function:
        return s.fail(p, e, lambda: f"not a function: got {describe(e)}")
    if p.params is not None and len(p.params) != len(e.params):
        return s.fail(
            p,
            e,
            lambda: f"parameter count differs: expected {len(p.params)}, got {len(e.params)}",
        )
    goals = s.bind_or_fail(p, e, rest)
    if goals is _FAIL:
        return goals
    goals = (p.body, e.body, goals)
    for q, x in zip(reversed(p.params or ()), reversed(e.params)):
        goals = (q, x, goals)
    return goals


def _tuple_get_item(s: Solver, p: TupleGetItemPattern, e, rest):
    if type(e) is not TupleGetItem:
        return s.fail(p, e, lambda: f"not a tuple item: got {describe(e)}")
    if p.index is not None and p.index != e.index:
        return s.fail(p, e, lambda: f"tuple index differs: expected .{p.index}, got .{e.index}")
    goals = s.bind_or_fail(p, e, rest)
    return goals if goals is _FAIL else (p.tuple, e.tuple_value, goals)


def _alt(s: Solver, p: AltPattern, e, rest):
    goals = s.bind_or_fail(p, e, rest)
    if goals is _FAIL:
        return goals
    s.choice((p.right, e, rest))
    return (p.left, e, rest)


def _attr(s: Solver, p: AttrPattern, e, rest):
    why = attr_mismatch(p.attrs, e)
    if why is not None:
        return s.fail(p, e, lambda: why)
    goals = s.bind_or_fail(p, e, rest)
    return goals if goals is _FAIL else (p.pattern, e, goals)


def _typed(s: Solver, p, e, rest):
    why = type_mismatch(p, e)
    if why is not None:
        return s.fail(p, e, lambda: why)
    goals = s.bind_or_fail(p, e, rest)
    return goals if goals is _FAIL else (p.pattern, e, goals)


def _predicate(s: Solver, p: PredicatePattern, e, rest):
    goals = s.bind_or_fail(p, e, rest)
    return goals if goals is _FAIL else (p.pattern, e, (p.post, e, goals))


def _predicate_post(s: Solver, p: PredicatePattern, e, rest):
    try:
        ok = p.predicate(e)
    except Exception as exc:  # a user's predicate: say which one failed and where
        raise PatternError(
            f"where({p.doc}) raised on {describe(e)}: {type(exc).__name__}: {exc}"
        ) from exc
    return rest if ok else s.fail(p, e, lambda: f"where({p.doc}) returned {ok!r}")


def _dominator(s: Solver, p: DominatorPattern, e, rest):
    goals = s.bind_or_fail(p, e, rest)
    return goals if goals is _FAIL else (p.child, e, (p.post, e, goals))


def _dominator_post(s: Solver, p: DominatorPattern, e, rest):
    found = check_dominator(s, p, e)
    if isinstance(found, str):
        return s.fail(p, e, lambda: found)
    s.binds[p.post] = found
    s.trail.append(p.post)
    return rest


def _if(s: Solver, p: IfPattern, e, rest):
    if type(e) is not If:
        return s.fail(p, e, lambda: f"not an If: got {describe(e)}")
    goals = s.bind_or_fail(p, e, rest)
    if goals is _FAIL:
        return goals
    return (p.cond, e.cond, (p.true_branch, e.true_branch, (p.false_branch, e.false_branch, goals)))


def _let(s: Solver, p: LetPattern, e, rest):
    if type(e) is not Let:
        return s.fail(p, e, lambda: f"not a Let: got {describe(e)}")
    goals = s.bind_or_fail(p, e, rest)
    return goals if goals is _FAIL else (p.var, e.var, (p.value, e.value, (p.body, e.body, goals)))


_STEP = {
    IfPattern: _if,
    LetPattern: _let,
    WildcardPattern: _wildcard,
    OpPattern: _op,
    VarPattern: _var,
    ConstantPattern: _constant,
    ExprPattern: _expr,
    CallPattern: _call,
    TuplePattern: _tuple,
    FunctionPattern: _function,
    TupleGetItemPattern: _tuple_get_item,
    AltPattern: _alt,
    AttrPattern: _attr,
    DataTypePattern: _typed,
    ShapePattern: _typed,
    TypePattern: _typed,
    PredicatePattern: _predicate,
    DominatorPattern: _dominator,
}
_POST = {PredicatePattern: _predicate_post, DominatorPattern: _dominator_post}


ENGINE.update(match=match, find=find)
