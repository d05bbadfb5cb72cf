"""Claim programs: a table pattern compiled into Python source that matches, checks the region
and copies the composite in one go, as a regex engine compiles a regex (MergeComposite's path).

A compiled pattern (compiled.py) is a tree: its siblings bind disjoint keys, so the first match
is each subtree's first match. Such a pattern has a few *shapes*: one per choice of every
alternative (left first) and of every commutative call's operand order (written first), in the
order the closures try them. A shape is a fixed tree of positions; its program, generated with
``exec``, is a straight run of type and op tests on local variables, one ``while`` block per
shape (the first block that gets through is the match the closures find), then the region check
by use counts. What is the same at every match of a shape is worked out once: which positions are
interior, inputs or embedded constants, the bindings' key order, the parameter order, the
``PartitionedFromPattern`` name and the composite's attributes.

``program.match(expr, claimed, shared)`` (``shared``: the ids of the values used more than once,
``shared_values``) returns None (no match), ``GENERIC`` (the general path must decide: the
Solver's reassociation of divide and multiply, an interior node claimed or used more than once
(outside the match, or at two positions of it), a shape this module does not copy),
``NEED_USES`` (find the shared values and ask again) or ``(shape number, interior nodes, node
at each position...)``. The interior nodes are in region_of's order; ``shape.bindings(found)``
is the match's bindings in the closures' order and ``shape.build(found, number, attrs, get)``
the call of the composite function (what ``extract_function`` returns, called with the inputs'
copies). tests/patterns/test_patterns_programs.py compares all of it with
the general path (``Claimer.claim``, ``region_of``, ``extract_function``) at every node of real
graphs.
"""

from __future__ import annotations

import itertools
from itertools import chain
from operator import attrgetter

import numpy as np

from partita.ir.nodes import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from partita.ir.order import value_inputs
from partita.ops.registry import Op, get_op

from .checks import attr_mismatch, commute_permutation, type_mismatch
from .compiled import compiled
from .control import REDIRECTS
from .pattern import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    ExprPattern,
    Pattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
)

GENERIC = object()  # match() cannot decide alone: ask Claimer.claim
NEED_USES = object()  # match() needs the graph's use counts for this shape: count, then ask again
MAX_SHAPES = 64  # more alternatives than this: the closures and the general path

_NONE = object()
# source -> code object: the source names constants by number (K0, K1, ...), so patterns of the
# same structure share it, each run with its own constants (backends build their tables anew
# for every pipeline)
_CODE: dict[str, object] = {}
_CODE_MAX = 512
_ATTRS_TYPE = type(Function((), Tuple(())).attrs)  # the immutable dict of Function attrs
_SCALARS = (str, int, float, bool)
# the types an input position may hold on the fast path (anything else, or a Constant that an
# is_constant() position of the same match also holds, goes to the general path)
_PLAIN_INPUTS = frozenset((Var, Call, Tuple, TupleGetItem, If, Let))
_ARGS = attrgetter("args")


def claim_program(pattern: Pattern):
    """The claim program of ``pattern``, or None when only the closures (compiled.py) or the
    Solver can match it, or it has more than MAX_SHAPES shapes."""
    if REDIRECTS or compiled(pattern) is None:
        return None
    found = getattr(pattern, "_program", _NONE)
    if found is _NONE:
        ex = _Expander()
        try:
            shapes = ex.shapes(pattern)
        except _TooMany:
            shapes = None
        found = None if shapes is None else Program(shapes, ex)
        object.__setattr__(pattern, "_program", found)
    return found


class _TooMany(Exception):
    pass


# ---- shapes ------------------------------------------------------------------------------


class _Pos:
    """One position of a shape: the variable that holds its node, the core pattern kind after
    wrappers and alternatives (``call``, ``tuple``, ``item``, ``wild``, ``const``, ``var``,
    ``expr``, ``tuple?`` for is_tuple(None)), the core pattern and the child positions in
    operand order."""

    __slots__ = ("var", "kind", "core", "kids")

    def __init__(self, var, kind, core, kids=()):
        self.var, self.kind, self.core, self.kids = var, kind, core, list(kids)


class _Option:
    """One way to match a sub-pattern: its tests (statements that ``break`` on failure), its
    bindings ``(key, variable or None for the op)`` in order, and its position."""

    __slots__ = ("tests", "binds", "pos")

    def __init__(self, tests, binds, pos):
        self.tests, self.binds, self.pos = tests, binds, pos


class _Expander:
    def __init__(self):
        self.consts: list = []  # objects the generated code names as K[i]
        self._const_ids: dict[int, int] = {}
        self._vars = itertools.count()

    def k(self, obj) -> str:
        i = self._const_ids.get(id(obj))
        if i is None:
            i = self._const_ids[id(obj)] = len(self.consts)
            self.consts.append(obj)
        return f"K{i}"

    def shapes(self, pattern):
        options = self.expand(pattern, "n0")
        return [_Shape(self, o, i) for i, o in enumerate(options)]

    def var(self) -> str:
        return f"n{next(self._vars) + 1}"

    def bind(self, p, v) -> list:
        return ([(p.name, v)] if p.name is not None else []) + [(p, v)]

    def expand(self, p, v) -> list[_Option]:
        t = type(p)
        bind = self.bind(p, v)
        if t is WildcardPattern:
            return [_Option([], bind, _Pos(v, "wild", p))]
        if t is ConstantPattern:
            return [_Option([f"if type({v}) is not Constant: break"], bind, _Pos(v, "const", p))]
        if t is VarPattern:
            tests = [f"if type({v}) is not Var: break"]
            if p.var_name is not None:
                tests.append(f"if {v}.name_hint != {self.k(p.var_name)}: break")
            return [_Option(tests, bind, _Pos(v, "var", p))]
        if t is ExprPattern:
            test = f"if not same_expr({self.k(p.expr)}, {v}): break"
            return [_Option([test], bind, _Pos(v, "expr", p))]
        if t is AltPattern:
            out = [
                _Option(o.tests, bind + o.binds, o.pos)
                for o in self.expand(p.left, v) + self.expand(p.right, v)
            ]
            return self._capped(out)
        if t is AttrPattern:
            test = f"if attr_mismatch({self.k(p.attrs)}, {v}) is not None: break"
            return [_Option([test, *o.tests], bind + o.binds, o.pos) for o in
                    self.expand(p.pattern, v)]
        if t in (DataTypePattern, ShapePattern, TypePattern):
            test = f"if type_mismatch({self.k(p)}, {v}) is not None: break"
            return [_Option([test, *o.tests], bind + o.binds, o.pos) for o in
                    self.expand(p.pattern, v)]
        if t is CallPattern:
            return self._call(p, v, bind)
        if t is TuplePattern:
            head = [f"if type({v}) is not Tuple: break"]
            if p.fields is None:
                return [_Option(head, bind, _Pos(v, "tuple?", p))]
            kids = [self.var() for _ in p.fields]
            head.append(f"if len({v}.fields) != {len(kids)}: break")
            if kids:
                head.append(f"{', '.join(kids)}, = {v}.fields")
            return self._product(head, bind, p.fields, kids, kids, v, "tuple", p)
        if t is TupleGetItemPattern:
            kid = self.var()
            head = [f"if type({v}) is not TupleGetItem: break"]
            if p.index is not None:
                head.append(f"if {v}.index != {int(p.index)}: break")
            head.append(f"{kid} = {v}.tuple_value")
            return self._product(head, bind, [p.tuple], [kid], [kid], v, "item", p)
        raise _TooMany  # not a kind compiled.py compiles (it said so first)

    def _call(self, p, v, bind) -> list[_Option]:
        opp = p.op
        op = opp.op
        other = {get_op("divide"): get_op("multiply"), get_op("multiply"): get_op("divide")}
        other = other.get(op)
        head = [f"if type({v}) is not Call or {v}.op is not {self.k(op)}:"]
        if other is not None:
            head.append(f"    if type({v}) is Call and {v}.op is {self.k(other)}: return GENERIC")
        head.append("    break")
        n = len(p.args)
        kids = [self.var() for _ in range(n)]
        head.append(f"if len({v}.args) != {n}: break")
        if kids:
            head.append(f"{', '.join(kids)}, = {v}.args")
        bind = bind + [(opp, None)]
        out = self._product(head, bind, p.args, kids, kids, v, "call", p)
        perm = commute_permutation(op)
        if perm is not None:
            swapped = [kids[perm[i]] for i in range(n)]
            out += self._product(head, bind, p.args, swapped, kids, v, "call", p)
        return self._capped(out)

    def _product(self, head, bind, subs, sub_vars, arg_vars, v, kind, core) -> list[_Option]:
        """Options of a node whose sub-pattern i matches ``sub_vars[i]``; the position's
        children are ``arg_vars`` (operand order)."""
        per_sub = [self.expand(s, x) for s, x in zip(subs, sub_vars)]
        total = 1
        for opts in per_sub:
            total *= len(opts)
        if total > MAX_SHAPES:
            raise _TooMany
        out = []
        for combo in itertools.product(*per_sub):
            tests = list(head)
            binds = list(bind)
            by_var = {}
            for o in combo:
                tests += o.tests
                binds += o.binds
                by_var[o.pos.var] = o.pos
            out.append(_Option(tests, binds, _Pos(v, kind, core, [by_var[a] for a in arg_vars])))
        return out

    @staticmethod
    def _capped(options):
        if len(options) > MAX_SHAPES:
            raise _TooMany
        return options


class _Shape:
    """One shape of a pattern: its positions and what every match of it shares."""

    def __init__(self, ex: _Expander, option: _Option, number: int):
        self.number = number
        self.tests = option.tests
        self.root = option.pos
        # positions depth first, operands in order (extract_function's walk)
        self.positions: list[_Pos] = []
        stack = [self.root]
        while stack:
            pos = stack.pop()
            self.positions.append(pos)
            stack.extend(reversed(pos.kids))
        self.slots = [p.var for p in self.positions]
        self.binds = option.binds
        inner = [p for p in self.positions if p.kind in ("call", "tuple", "item", "tuple?")]
        by_var = {p.var: p for p in self.positions}
        # region_of's interior order: the inner positions in binding order (pattern pre-order)
        seen, order = set(), []
        for _key, var in self.binds:
            if var is not None and var not in seen and by_var[var].kind in (
                "call", "tuple", "item", "tuple?"
            ):
                seen.add(var)
                order.append(var)
        self.interior_vars = order
        self.fast = (
            self.root.kind in ("call", "tuple", "item")
            and all(p.kind in ("call", "tuple", "item", "wild", "const", "var")
                    for p in self.positions)
            and not any(p.kind == "item" and p.core.index is None for p in inner)
        )
        self.inner_nonroot = [p.var for p in inner if p is not self.root]
        self.inputs = [p.var for p in self.positions if p.kind in ("wild", "var")]
        self.consts = [p.var for p in self.positions if p.kind == "const"]
        names, stack = [], [(self.root, False)]
        while stack:  # post-order of the inner positions: PartitionedFromPattern
            pos, done = stack.pop()
            if pos.kind not in ("call", "tuple", "item"):
                continue
            if done:
                core = pos.core
                names.append(
                    f"{core.op.op.name}_" if pos.kind == "call"
                    else "Tuple_" if pos.kind == "tuple"
                    else f"TupleGetItem{core.index}_"
                )
            else:
                stack.append((pos, True))
                stack.extend((k, False) for k in reversed(pos.kids))
        self.name = "".join(names)
        self.interior = self.bindings = self.build = None  # set by Program

    # ---- source ------------------------------------------------------------------------

    def match_source(self, ex: _Expander) -> list[str]:
        lines = ["while True:"]
        lines += [f"    {t}" for t in self.tests]
        if not self.fast:
            lines.append("    return GENERIC")
            return lines
        for v in self.inputs:
            if by_kind(self, v) == "var":
                continue
            # an input the fast path copies as a parameter: a plain value, or a constant that
            # no is_constant() position of the match also holds (that one stays embedded)
            same = " or ".join(f"{v} is {c}" for c in self.consts) or "False"
            lines.append(
                f"    if type({v}) not in PLAIN and (type({v}) is not Constant or {same}): "
                "return GENERIC"
            )
        if self.inner_nonroot:
            lines.append("    if shared is None: return NEED_USES")
            for v in self.inner_nonroot:
                lines.append(f"    if id({v}) in claimed or id({v}) in shared: return GENERIC")
        interior = _tuple(", ".join(self.interior_vars))
        lines.append(f"    return ({self.number}, {interior}, {', '.join(self.slots)})")
        return lines

    def unpack(self) -> str:
        return f"_, _, {', '.join(self.slots)}, = found"

    def helpers_source(self, ex: _Expander) -> list[str]:
        n = self.number
        lines = [f"def interior_{n}(found):", "    return found[1]"]
        pairs = ", ".join(
            f"{ex.k(key) if not isinstance(key, str) else repr(key)}: "
            f"{var if var is not None else ex.k(key.op)}"
            for key, var in self.binds
        )
        lines += [f"def bindings_{n}(found):", f"    {self.unpack()}", f"    return {{{pairs}}}"]
        if self.fast:
            lines += self._build_source(ex)
        return lines

    def _build_source(self, ex: _Expander) -> list[str]:
        """``build_<n>(found, number, attrs, get)``: the call of the composite function
        (``extract_function``'s function, called with ``get(id(input), input)`` for each
        input), typed as the root when the root has a type. ``attrs``: a Function attrs dict,
        shared by the composites of one rule and shape (it is immutable)."""
        n = self.number
        lines = [f"def build_{n}(found, number, attrs, get):", f"    {self.unpack()}"]
        new = {}  # position var -> the expression standing for it in the body
        for p in self.positions:
            if p.kind == "const":
                new[p.var] = p.var

        def param(v, index):
            return [
                f"p_{v} = NEW(Var)",
                f"SPAN(p_{v}, None)",
                f"TYPE(p_{v}, {v}._type)",
                f"VNAME(p_{v}, f'FunctionVar_{{number}}_{{{index}}}')",
                f"VANN(p_{v}, {v}._type)",
            ]

        if len(self.inputs) == 1:
            (v,) = self.inputs
            lines += [f"    {x}" for x in param(v, 0)]
            new[v] = f"p_{v}"
            params, args = f"(p_{v},)", f"(get(id({v}), {v}),)"
        elif self.inputs:
            first = self.inputs[0]
            lines += [f"    {x}" for x in param(first, 0)]
            lines += [f"    ins = [{first}]", f"    params = [p_{first}]"]
            new[first] = f"p_{first}"
            for i, v in enumerate(self.inputs[1:], 1):
                cond = " or ".join(f"{v} is {e}" for e in self.inputs[:i])
                lines.append(f"    if {cond}:")
                lines.append(f"        p_{v} = params[[x is {v} for x in ins].index(True)]")
                lines.append("    else:")
                lines += [f"        {x}" for x in param(v, "len(ins)")]
                lines += [f"        ins.append({v})", f"        params.append(p_{v})"]
                new[v] = f"p_{v}"
            params, args = "tuple(params)", "tuple([get(id(x), x) for x in ins])"
        else:
            params, args = "()", "()"
        for p in reversed(self.positions):  # children before parents
            if p.kind not in ("call", "tuple", "item"):
                continue
            kids = ", ".join(new[k.var] for k in p.kids)
            c = f"c_{p.var}"
            if p.kind == "call":
                lines += [
                    f"    {c} = NEW(Call)",
                    f"    SPAN({c}, {p.var}.span)",
                    f"    TYPE({c}, {p.var}._type)",
                    f"    OP({c}, {ex.k(p.core.op.op)})",
                    f"    ARGS({c}, {_tuple(kids)})",
                    f"    ATTRS({c}, {p.var}.attrs)",
                ]
            else:
                made = (
                    f"Tuple({_tuple(kids)}, {p.var}.span)" if p.kind == "tuple"
                    else f"TupleGetItem({kids}, {p.var}.index, {p.var}.span)"
                )
                lines += [
                    f"    {c} = {made}",
                    f"    if {c}._type is None and {p.var}._type is not None:",
                    f"        {c}.with_type({p.var}._type)",
                ]
            new[p.var] = c
        body = new[self.root.var]
        lines += [
            f"    result = {body}._type",
            "    fn = NEW(Function)",
            "    SPAN(fn, None)",
            "    TYPE(fn, result)",
            f"    FPARAMS(fn, {params})",
            f"    FBODY(fn, {body})",
            "    FRET(fn, None)",
            "    FATTRS(fn, attrs)",
            "    call = NEW(Call)",
            f"    SPAN(call, {self.root.var}.span)",
            "    TYPE(call, result)",
            "    OP(call, fn)",
            f"    ARGS(call, {args})",
            "    ATTRS(call, None)",
            "    return call",
        ]
        return lines


def _tuple(items: str) -> str:
    return f"({items},)" if items else "()"


def by_kind(shape: _Shape, var: str) -> str:
    for p in shape.positions:
        if p.var == var:
            return p.kind
    raise KeyError(var)


# ---- the program --------------------------------------------------------------------------


class Program:
    """A pattern's generated matcher and, per shape, the helpers (see the module docstring)."""

    def __init__(self, shapes: list[_Shape], ex: _Expander):
        self.shapes = shapes
        lines = ["def match(n0, claimed, shared):"]
        for s in shapes:
            lines += [f"    {line}" for line in s.match_source(ex)]
        lines.append("    return None")
        for s in shapes:
            lines += s.helpers_source(ex)
        self.source = "\n".join(lines)
        space = dict(_GLOBALS)
        space.update((f"K{i}", c) for i, c in enumerate(ex.consts))
        code = _CODE.get(self.source)
        if code is None:  # compiling is most of the cost; a table rebuilt per call repeats it
            if len(_CODE) >= _CODE_MAX:
                _CODE.clear()
            code = _CODE[self.source] = compile(
                self.source, f"<claim program {len(shapes)} shapes>", "exec"
            )
        exec(code, space)
        self.match = space["match"]
        for s in shapes:
            s.interior = space[f"interior_{s.number}"]
            s.bindings = space[f"bindings_{s.number}"]
            s.build = space.get(f"build_{s.number}")
        self.needs_uses = any(s.inner_nonroot for s in shapes)

    def attrs(self, shape: _Shape, extra: dict):
        """The composite attributes of ``shape`` (``{"PartitionedFromPattern": ..., **extra}``)
        as a Function keeps them (immutable: the composites of one rule and shape share them);
        a value that is not a str -> scalar raises Function's error, which names it."""
        attrs = {"PartitionedFromPattern": shape.name, **extra}
        if not all(type(k) is str and type(v) in _SCALARS for k, v in attrs.items()):
            Function((), Tuple(()), None, attrs)  # raises, naming the attribute
        return _ATTRS_TYPE(attrs)


def shared_values(units: list) -> set[int]:
    """The ids of the values that ``units`` (a graph's calls, tuples, ...: the nodes that use
    values) use more than once. A node interior to a match is used by its parent in the match;
    when it is not in this set, that is its only use (what ``Claimer._self_contained`` asks with
    counts, found here by sorting the ids with numpy instead of counting them in a dict: a few
    times cheaper at 100k nodes)."""
    calls = [u for u in units if type(u) is Call]
    others = [u for u in units if type(u) is not Call]
    called = [u.op for u in calls if type(u.op) is Function]  # a composite call uses its fn
    ids = np.fromiter(
        map(id, chain(chain.from_iterable(map(_ARGS, calls)), called,
                      chain.from_iterable(map(value_inputs, others)))),
        np.int64,
    )
    if len(ids) < 2:
        return set()
    ids.sort()
    later = ids[1:]
    return set(later[later == ids[:-1]].tolist())


def _same_expr(a, b):
    from .matcher import same_expr

    return same_expr(a, b)


_GLOBALS = {
    "GENERIC": GENERIC,
    "NEED_USES": NEED_USES,
    "PLAIN": _PLAIN_INPUTS,
    "Call": Call,
    "Constant": Constant,
    "Var": Var,
    "Tuple": Tuple,
    "TupleGetItem": TupleGetItem,
    "Op": Op,
    "attr_mismatch": attr_mismatch,
    "type_mismatch": type_mismatch,
    "same_expr": _same_expr,
    "NEW": object.__new__,
    "SPAN": Expr.span.__set__,
    "TYPE": Expr._type.__set__,
    "OP": Call.op.__set__,
    "ARGS": Call.args.__set__,
    "ATTRS": Call.attrs.__set__,
    "Function": Function,
    "VNAME": Var.name_hint.__set__,
    "VANN": Var.type_annotation.__set__,
    "FPARAMS": Function.params.__set__,
    "FBODY": Function.body.__set__,
    "FRET": Function.ret_type.__set__,
    "FATTRS": Function.attrs.__set__,
}
