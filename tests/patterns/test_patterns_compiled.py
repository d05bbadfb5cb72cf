"""Compiled patterns (patterns/compiled.py) find the Solver's match, with the same bindings in
the same order, on every node of real graphs; MergeComposite's matching work grows linearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.backends.registry import get_pattern_table, list_backends
from partita.patterns import (
    constants,
    dominates,
    is_constant,
    is_expr,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    wildcard,
)
from partita.patterns.claims import Claimer
from partita.patterns.compiled import Fallback, compiled, run_compiled
from partita.patterns.matcher import Solver
from pattern_graphs import conv_block, int8_input, module, qparams

import partita as P
from partita.ir.graph import Graph
from partita.ops import get_op

MODELS = Path(__file__).resolve().parents[1] / "models" / "tflite" / "nets"


def _hand_patterns():
    """Every compiled kind, with alternatives, captures and commutative operands."""
    x = wildcard()
    conv = is_op("qnn.conv2d")(wildcard("data"), is_constant().named("weights"), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    req = is_op("qnn.requantize")(conv, *constants(4)).optional(lambda r: is_op("clip")(r))
    # the clip first: a left alternative that fails inside a call, so the right one is retried
    relu_or_clip = is_op("clip")(wildcard()) | is_op("qnn.requantize")(wildcard(), *constants(4))
    add_of_req = is_op("qnn.add")(
        is_op("qnn.requantize")(wildcard(), *constants(4)), wildcard("other"), *constants(6)
    )
    return [
        req,
        relu_or_clip,
        add_of_req,  # commutative: the requantize may be either operand
        is_op("qnn.add")(wildcard(), wildcard(), *constants(6)),
        is_op("clip")(x).has_attr({"a_min": -128.0}),
        is_op("clip")(wildcard()).has_attr({"a_min": 0.0}),
        is_op("qnn.requantize")(wildcard(), *constants(4)).has_dtype("int8"),
        is_op("qnn.requantize")(wildcard(), *constants(4)).has_dtype("int32"),
        is_var("x"),
        is_var("y"),
        is_constant() | is_var(),
        is_tuple([wildcard(), wildcard()]),
        is_tuple_get_item(wildcard(), 0),
        is_op("add")(wildcard("a"), wildcard("b")),
    ]


def _graphs():
    x = int8_input()
    y = conv_block(x, 4, 4, 0)
    z = conv_block(y, 4, 4, 1, clip_after=False, bias=False)
    w = get_op("qnn.add")(z, y, *qparams(0.05, 0), *qparams(0.05, 0), *qparams(0.05, 0))
    w = get_op("qnn.add")(x, w, *qparams(0.05, 0), *qparams(0.05, 0), *qparams(0.05, 0))
    yield module(w)["main"].body
    a, b = P.var("x", (2,)), P.var("y", (2,))
    t = P.Tuple([get_op("add")(a, b), get_op("add")(b, a)])
    yield P.Tuple([P.TupleGetItem(t, 0), P.TupleGetItem(t, 1), P.const(np.float32(1))])
    path = MODELS / "mobilenet_v2_035_96.tflite"
    if path.exists():
        from partita.frontends import from_tflite

        yield from_tflite(str(path))["main"].body


def _patterns():
    out = _hand_patterns()
    for name in list_backends():
        out.extend(entry.pattern for entry in get_pattern_table(name))
    return out


def test_compiled_patterns_find_the_solvers_match_with_the_same_bindings():
    patterns = _patterns()
    fast = [(p, compiled(p)) for p in patterns]
    assert sum(f is not None for _, f in fast) >= len(_hand_patterns())
    matched = fallbacks = 0
    for body in _graphs():
        graph = Graph(body)
        solver = Solver(lambda graph=graph: graph)
        for node in graph.order:
            for pattern, fn in fast:
                if fn is None:
                    continue
                want = solver.binds if solver.run(pattern, node) else None
                try:
                    got = run_compiled(fn, node)
                except Fallback:
                    fallbacks += 1
                    continue
                if want is None:
                    assert got is None, (pattern, node.short())
                    continue
                matched += 1
                assert got is not None, (pattern, node.short())
                assert list(got) == list(want), (pattern, node.short())
                assert all(got[k] is v for k, v in want.items())
    assert matched > 50


def test_the_backends_tables_are_compiled():
    """The npu table's patterns are trees, MergeComposite takes the compiled path for them; all
    but resize_bilinear, whose two branches share one ``cast(wildcard())``, and lstm_mul, whose
    product feeds both the rounding offset and the sum (DAGs: the Solver)."""
    table = get_pattern_table("npu")
    assert len(table) > 10
    solver = sorted(e.name for e in table if compiled(e.pattern) is None)
    assert solver == ["npu.lstm_mul", "npu.resize_bilinear"]


def test_shared_or_unsupported_patterns_go_to_the_solver():
    x = wildcard()
    assert compiled(is_op("add")(x, x)) is None  # the same sub-pattern twice: not a tree
    assert compiled(is_op("add")(wildcard("a"), wildcard("a"))) is None  # one name twice
    assert compiled(wildcard().where(lambda e: True)) is None  # predicate call counts
    assert compiled(dominates(is_op("nn.relu")(wildcard()), wildcard(), wildcard())) is None
    assert compiled(is_expr(P.const(np.float32(1)))) is not None


def test_a_shared_pattern_still_matches_through_the_solver():
    a = P.var("a", (2,))
    x = wildcard()
    claimer = Claimer(Graph(get_op("add")(a, a)))
    assert claimer.match(is_op("add")(x, x), get_op("add")(a, a)) is not None
    b = P.var("b", (2,))
    call = get_op("add")(a, b)
    assert Claimer(Graph(call)).match(is_op("add")(x, x), call) is None


@pytest.mark.parametrize("stages", [(50, 200)])
def test_merge_composite_matching_work_is_linear(stages, monkeypatch):
    """Counting, not timing: the claim programs' calls and the positions they match per node
    stay the same from a graph to one four times its size (a quadratic would quadruple them)."""
    from partita.partition import MergeComposite
    from partita.partition import merge_composite as mc

    calls, bound = [0], [0]
    real = mc.claim_program

    class Counting:  # a claim program whose match calls and matched positions are counted
        def __init__(self, program):
            self.program, self.shapes, self.attrs = program, program.shapes, program.attrs

        def match(self, node, claimed, uses):
            calls[0] += 1
            out = self.program.match(node, claimed, uses)
            bound[0] += len(out) - 1 if type(out) is tuple else 0
            return out

    def counting(pattern):
        program = real(pattern)
        return None if program is None else Counting(program)

    monkeypatch.setattr(mc, "claim_program", counting)
    conv = is_op("qnn.conv2d")(wildcard(), is_constant(), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    conv = is_op("qnn.requantize")(conv, *constants(4)).optional(lambda r: is_op("clip")(r))
    add = is_op("qnn.add")(wildcard(), wildcard(), *constants(6))
    table = [("conv2d", conv), ("add", add)]
    per_node = []
    for n in stages:
        x = int8_input((1, 4, 4, 4))
        y = x
        for i in range(n):
            z = conv_block(y, 4, 4, i)
            y = get_op("qnn.add")(y, z, *qparams(0.05, 0), *qparams(0.05, 0), *qparams(0.05, 0))
        mod = module(y)
        nodes = len(Graph(mod["main"].body).order)
        calls[0] = bound[0] = 0
        out = MergeComposite(table)(mod)
        composites = [
            c
            for c in Graph(out["main"].body).order
            if type(c) is P.ir.nodes.Call and type(c.op) is P.ir.nodes.Function
        ]
        assert len(composites) == 2 * n  # every conv block and every add
        per_node.append((calls[0] / nodes, bound[0] / nodes))
    (c1, b1), (c4, b4) = per_node
    assert 0 < c4 <= c1 * 1.1 and 0 < b4 <= b1 * 1.1, per_node


def test_a_reassociated_divide_goes_to_the_solver():
    """``(a * b) / c`` matches ``a * (b / c)`` (TVM's reassociation): the compiled matcher hands
    that node to the Solver, and Claimer finds the same match as ``match``."""
    from partita.patterns import match

    a, b, c = (P.var(n, (2,)) for n in "abc")
    mul, div = get_op("multiply"), get_op("divide")
    pattern = is_op("divide")(is_op("multiply")(wildcard(), wildcard()), wildcard())
    assert compiled(pattern) is not None
    expr = mul(a, div(b, c))
    with pytest.raises(Fallback):
        run_compiled(compiled(pattern), expr)
    found = Claimer(Graph(expr)).match(pattern, expr)
    want = match(pattern, expr)
    assert want is not None and found is not None
    # the regrouped patterns are built afresh by each search: compare them by their text
    assert [repr(k) for k in found.bindings] == [repr(k) for k in want.bindings]
    assert all(u is v for u, v in zip(found.bindings.values(), want.bindings.values()))
    plain = div(mul(a, b), c)
    assert run_compiled(compiled(pattern), plain) is not None


def test_a_pattern_and_its_compiled_matcher_and_program_are_freed_together():
    """The compiled matcher and the claim program refer back to their pattern; kept in a
    WeakKeyDictionary keyed by it they kept every pattern alive (a long-running process that
    builds many models grew by ~300 objects a build). Kept on the pattern, they go with it."""
    import gc
    import weakref

    from partita.patterns import is_constant, is_op, wildcard
    from partita.patterns.programs import claim_program

    pattern = is_op("qnn.requantize")(
        is_op("qnn.dense")(wildcard(), is_constant(), is_constant(), is_constant(),
                           is_constant(), is_constant()),
        is_constant(), is_constant(), is_constant(), is_constant(),
    )
    assert compiled(pattern) is not None
    claim_program(pattern)
    named = pattern.named("x")  # a renamed copy compiles its own matcher
    assert getattr(named, "_matcher", None) is None
    gone = weakref.ref(pattern)
    del pattern, named
    gc.collect()
    assert gone() is None
