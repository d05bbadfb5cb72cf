"""``explain(pattern, expr)``: why a pattern does (not) match at a node.

    >>> print(explain(conv_pattern, node))
    no match at a call to nn.conv2d (CONV_2D #3)
      deepest partial match (2 sub-patterns matched):
        is_op("qnn.conv2d")(...) ... failed before binding
      failed: is_op("qnn.conv2d")(wildcard(), is_constant())
          on: a call to nn.conv2d (CONV_2D #3)
         why: op differs: expected qnn.conv2d, got nn.conv2d

The matcher records the failure reached with the most sub-patterns bound: that is the deepest
partial match, and its failing sub-pattern, node and reason are what the user needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from partita.ir.graph import Graph
from partita.ir.module import IRModule
from partita.ir.nodes import Expr, Function

from .checks import describe
from .control import IfPattern, LetPattern
from .matcher import Solver
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
)


@dataclass
class Explanation:
    """The verdict of ``explain``: truthy when the pattern matched."""

    matched: bool
    pattern: Pattern
    expr: Expr
    captures: dict = field(default_factory=dict)
    partial: list = field(default_factory=list)  # [(sub-pattern, node)] of the deepest attempt
    failed_pattern: Pattern | None = None
    failed_node: object = None
    reason: str | None = None
    refused: str | None = None  # matched, but rewrite/partition would refuse the region

    def __bool__(self):
        return self.matched

    def __str__(self):
        head = describe(self.expr)
        if self.matched:
            caps = ", ".join(f"{k}={describe(v)}" for k, v in self.captures.items())
            text = f"matches at {head}" + (f" with {caps}" if caps else "")
            if self.refused:
                text += f"\n  but rewrite and partition refuse the match: {self.refused}"
            return text
        lines = [f"no match at {head}"]
        if self.partial:
            lines.append(f"  deepest partial match ({len(self.partial)} sub-patterns matched):")
            for p, node in self.partial:
                lines.append(f"    {short_text(p, depth=2)}  =  {describe(node)}")
        lines.append(f"  failed: {short_text(self.failed_pattern, depth=4, limit=160)}")
        lines.append(f"      on: {describe(self.failed_node)}")
        lines.append(f"     why: {self.reason}")
        return "\n".join(lines)


def explain(pattern: Pattern, expr, within=None) -> Explanation:
    """Why ``pattern`` does or does not match with ``expr`` as its root.

    ``within`` (the enclosing expression, Function or IRModule) lets it also report when a match
    would be refused by rewrite/partition because an interior value is used outside the match.
    """
    if not isinstance(pattern, Pattern):
        raise PatternError(f"explain() takes a pattern, got {pattern!r}")
    if isinstance(expr, IRModule):
        expr = expr["main"].body
    elif isinstance(expr, Function):
        expr = expr.body
    if not isinstance(expr, Expr):
        raise PatternError(f"explain() takes an expression, got {type(expr).__name__}")
    graph = _graph_for(expr, within)
    solver = Solver(lambda: graph, record=True)
    if solver.run(pattern, expr):
        captures = {k: v for k, v in solver.binds.items() if type(k) is str}
        return Explanation(
            True,
            pattern,
            expr,
            captures,
            refused=_refusal(solver.binds, expr, graph) if within else None,
        )
    _depth, failed_p, failed_e, reason, binds = solver.best
    partial = [
        (p, e)
        for p, e in binds.items()
        if isinstance(p, Pattern) and isinstance(e, Expr) and _shown(p)
    ]
    return Explanation(False, pattern, expr, {}, partial, failed_p, failed_e, reason)


def _graph_for(expr: Expr, within) -> Graph:
    if within is None:
        return Graph(expr)
    if isinstance(within, IRModule):
        within = within["main"]
    return Graph(within.body if isinstance(within, Function) else within)


def _refusal(binds: dict, root: Expr, graph: Graph) -> str | None:
    from .group import region_of, region_problem

    interior, _inputs, _embedded = region_of(binds, root)
    return region_problem(root, interior, graph, set())


def _shown(p: Pattern) -> bool:
    """Partial-match lines show structure; wrappers repeat their inner pattern's node."""
    return not isinstance(p, (AltPattern, OpPattern))


# ---- pattern text ------------------------------------------------------------------------------


def short_text(p: Pattern | None, depth: int = 3, limit: int = 100) -> str:
    """``pattern_text`` to ``depth`` levels, cut to ``limit`` characters."""
    if p is None:
        return "?"
    text = pattern_text(p, depth=depth)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def pattern_text(p: Pattern, depth: int = 12) -> str:
    """The constructor expression of a pattern (``is_op("add")(wildcard("x"), is_constant())``);
    sub-patterns deeper than ``depth`` print as ``...``."""
    text = _text(p, depth - 1) if depth > 0 or _is_leaf(p) else _stub(p)
    if p.name is not None and not isinstance(p, WildcardPattern):
        text += f".named({p.name!r})"
    return text


def _is_leaf(p: Pattern) -> bool:
    return isinstance(p, (WildcardPattern, OpPattern, VarPattern, ConstantPattern))


def _stub(p: Pattern) -> str:
    """A pattern past the depth limit: a call keeps its op, everything else is ``...``."""
    if isinstance(p, CallPattern) and isinstance(p.op, OpPattern):
        return f"is_op({p.op.op.name!r})(...)"
    return "..."


def _text(p: Pattern, d: int) -> str:
    sub = lambda q: pattern_text(q, d)  # noqa: E731
    if isinstance(p, WildcardPattern):
        return f"wildcard({p.name!r})" if p.name else "wildcard()"
    if isinstance(p, OpPattern):
        return f"is_op({p.op.name!r})"
    if isinstance(p, VarPattern):
        return f"is_var({p.var_name!r})" if p.var_name else "is_var()"
    if isinstance(p, ConstantPattern):
        return "is_constant()"
    if isinstance(p, ExprPattern):
        return f"is_expr({describe(p.expr)})"
    if isinstance(p, CallPattern):
        head = pattern_text(p.op, max(d, 1))
        if isinstance(p.op, AltPattern):
            head = f"({head})"
        if p.args is None:
            return f"{head}(None)"
        return f"{head}({', '.join(sub(a) for a in p.args)})"
    if isinstance(p, TuplePattern):
        return (
            "is_tuple()"
            if p.fields is None
            else f"is_tuple([{', '.join(sub(f) for f in p.fields)}])"
        )
    if isinstance(p, TupleGetItemPattern):
        return f"is_tuple_get_item({sub(p.tuple)}, {p.index})"
    if isinstance(p, FunctionPattern):
        params = "None" if p.params is None else f"[{', '.join(sub(q) for q in p.params)}]"
        return f"FunctionPattern({params}, {sub(p.body)})"
    if isinstance(p, (IfPattern, LetPattern)):
        name = "is_if" if isinstance(p, IfPattern) else "is_let"
        return f"{name}({', '.join(sub(q) for q in p.children())})"
    if isinstance(p, AltPattern):
        return f"{sub(p.left)} | {sub(p.right)}"
    return _wrapper_text(p, sub)


def _wrapper_text(p: Pattern, sub) -> str:
    if isinstance(p, AttrPattern):
        return f"{sub(p.pattern)}.has_attr({p.attrs!r})"
    if isinstance(p, DataTypePattern):
        return f"{sub(p.pattern)}.has_dtype({p.dtype!r})"
    if isinstance(p, ShapePattern):
        return f"{sub(p.pattern)}.has_shape({p.shape!r})"
    if isinstance(p, TypePattern):
        return f"{sub(p.pattern)}.has_type({p.type})"
    if isinstance(p, PredicatePattern):
        return f"{sub(p.pattern)}.where({p.doc})"
    if isinstance(p, DominatorPattern):
        return f"dominates({sub(p.parent)}, {sub(p.path)}, {sub(p.child)})"
    return type(p).__name__


ENGINE["pattern_text"] = pattern_text
