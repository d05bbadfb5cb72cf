"""Claim programs (patterns/programs.py) against the general path they stand in for: at every
node of real graphs, for every pattern of every registered backend table and the hand-written
ones, a program's answer is Claimer.claim's (no match; or the same bindings in the same order,
the same interior in the same order, the same composite function and inputs as
extract_function's), or GENERIC, which hands the node to Claimer.claim."""

from __future__ import annotations

import numpy as np
from partita.patterns import is_op, wildcard
from partita.patterns.claims import GENERIC, NEED_USES, Claimer, claim_program, shared_values
from test_patterns_compiled import _graphs, _patterns

import partita as P
from partita.ir.graph import Graph, use_counts
from partita.ir.order import value_inputs
from partita.ops import get_op


def _same_function(got, want) -> None:
    (fn, ins), (fn2, ins2) = got, want
    assert [p.name_hint for p in fn.params] == [p.name_hint for p in fn2.params]
    assert [p.type_annotation for p in fn.params] == [p.type_annotation for p in fn2.params]
    assert len(ins) == len(ins2) and all(a is b for a, b in zip(ins, ins2))
    assert dict(fn.attrs) == dict(fn2.attrs)
    assert str(fn.body) == str(fn2.body)
    assert fn.type_or_none == fn.body.type_or_none  # as MergeComposite types it
    assert P.ir.structural_equal(fn, fn2)
    assert fn.body.type_or_none == fn2.body.type_or_none


def _compare(body, patterns, counts) -> None:
    graph = Graph(body)
    claimer = Claimer(graph)
    shared = {k for k, n in use_counts(graph.order).items() if n > 1}
    units = [n for n in graph.order if value_inputs(n)]
    assert shared_values(units) == shared
    programs = [(p, claim_program(p)) for p in patterns]
    claimed: set[int] = set()
    for node in reversed(graph.order):
        for pattern, program in programs:
            if program is None:
                continue
            found = program.match(node, claimed, shared)
            assert found is not NEED_USES
            want = claimer.claim(pattern, node, claimed)
            if found is None:
                assert want is None, (pattern, node.short())
                continue
            if found is GENERIC:
                counts["generic"] += 1
                continue
            counts["fast"] += 1
            assert want is not None and want.problem is None, (pattern, node.short())
            shape = program.shapes[found[0]]
            got = shape.bindings(found)
            assert list(got) == list(want.bindings), (pattern, node.short())
            assert all(got[k] is v for k, v in want.bindings.items())
            interior = shape.interior(found)
            assert [id(n) for n in interior] == list(want.interior), (pattern, node.short())
            attrs = program.attrs(shape, {"Composite": "c"})
            want.rule = type("Rule", (), {"attrs": {"Composite": "c"}})()
            call = shape.build(found, 7, attrs, lambda key, x: x)
            want_fn, want_inputs = want.to_function(7)
            _same_function((call.op, call.args), (want_fn, want_inputs))
            assert call.span is node.span and call.type_or_none == want_fn.body.type_or_none
            if len(interior) > 1 and len(claimed) < 40:
                # claim some (the next nodes see claimed interiors, as in MergeComposite)
                claimed.update(id(n) for n in interior[1:])


def _residual_with_shared_values():
    """add results used outside their relu, twice by one node, constants as wildcard inputs."""
    x = P.var("x", (4,))
    relu, add, mul = get_op("nn.relu"), get_op("add"), get_op("multiply")
    one = P.const(np.ones(4, "float32"))
    y = x
    for i in range(12):
        a = add(y, one) if i % 2 else add(one, one)
        r = relu(a)
        y = mul(r, a) if i % 3 == 0 else mul(relu(mul(a, a)), r) if i % 3 == 1 else r
    return P.IRModule.from_expr(y)["main"].body


def test_programs_answer_as_claimer_claim():
    patterns = _patterns() + [
        is_op("nn.relu")(is_op("add")(wildcard(), wildcard())),
        is_op("multiply")(is_op("nn.relu")(wildcard()), wildcard()),
        is_op("multiply")(is_op("add")(wildcard(), wildcard()), is_op("add")(wildcard(),
                                                                           wildcard())),
    ]
    assert sum(claim_program(p) is not None for p in patterns) >= 15
    counts = {"fast": 0, "generic": 0}
    for body in [*_graphs(), _residual_with_shared_values()]:
        _compare(body, patterns, counts)
    assert counts["fast"] > 50 and counts["generic"] > 0, counts


def test_the_npu_table_has_programs():
    """Every npu pattern the closures compile has a program; all their shapes are copied by
    the program but concat's (``is_tuple(None)``: its fields are bound by no pattern)."""
    from partita.backends.registry import get_pattern_table

    general = []
    for entry in get_pattern_table("npu"):
        program = claim_program(entry.pattern)
        if program is None:
            general.append(entry.name)
            continue
        if not all(s.build is not None for s in program.shapes):
            general.append(entry.name)
    assert general == ["npu.concat", "npu.resize_bilinear", "npu.lstm_mul"]


def test_shared_values_are_the_values_used_twice():
    """shared_values against use_counts, on a graph with composite calls (a call uses its
    function), tuples and projections."""
    from partita.partition import MergeComposite

    body = _residual_with_shared_values()
    t = P.ir.Tuple([body, get_op("nn.relu")(body)])
    mod = P.IRModule.from_expr(P.ir.TupleGetItem(t, 1))
    mod = MergeComposite([("relu", is_op("nn.relu")(wildcard()))])(mod)
    graph = Graph(mod["main"].body)
    units = [n for n in graph.order if value_inputs(n)]
    assert any(type(n) is P.ir.Call and type(n.op) is P.ir.Function for n in units)
    counts = use_counts(graph.order)
    assert shared_values(units) == {k for k, n in counts.items() if n > 1}
