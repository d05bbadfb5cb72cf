"""Property: random DAGs, random support sets, random patterns. After partitioning the module
types from scratch, has no cycles, holds every op exactly once, computes the same bits, puts
only supported work in each partition, and leaves no two mergeable neighbours apart."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partita.backends import Backend, Verdict
from partita.patterns import is_constant, is_op, wildcard
from partition_graphs import assert_invariants, op_spans

from partita.ir import (
    Call,
    Constant,
    Function,
    IRModule,
    Span,
    Tuple,
    TupleGetItem,
    const,
    post_order,
    var,
)
from partita.ops import get_op

UNARY = ["nn.relu", "negative", "abs", "tanh"]
BINARY = ["add", "multiply", "subtract", "maximum"]
SHAPE = (2, 4)


@st.composite
def dags(draw):
    """A random DAG of float ops with several consumers, tuples (split / concatenate), shared
    constants, and one or more outputs."""
    values = [var("x", SHAPE), var("y", SHAPE)]
    shared = const(draw(st.floats(-2, 2, width=32)), "float32")
    count = draw(st.integers(1, 14))
    index = 0
    for _ in range(count):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "const", "split"]))
        pick = lambda: values[draw(st.integers(0, len(values) - 1))]  # noqa: E731
        span = Span(index, kind, f"n{index}")
        index += 1
        if kind == "unary":
            values.append(Call(get_op(draw(st.sampled_from(UNARY))), [pick()], span=span))
        elif kind == "binary":
            op = get_op(draw(st.sampled_from(BINARY)))
            values.append(Call(op, [pick(), pick()], span=span))
        elif kind == "const":
            values.append(Call(get_op("add"), [pick(), shared], span=span))
        else:
            parts = Call(
                get_op("split"), [pick()], {"indices_or_sections": 2, "axis": 1}, span=span
            )
            order = draw(st.permutations([0, 1]))
            fields = Tuple([TupleGetItem(parts, i) for i in order])
            values.append(
                Call(
                    get_op("concatenate"),
                    [fields],
                    {"axis": 1},
                    span=Span(index, "concat", f"n{index}"),
                )
            )
            index += 1
            if draw(st.booleans()):  # a second consumer of the split, through the same item
                first = TupleGetItem(parts, 0)
                values.append(
                    Call(
                        get_op("concatenate"),
                        [Tuple([first, first])],
                        {"axis": 1},
                        span=Span(index, "concat", f"n{index}"),
                    )
                )
                index += 1
    computed = values[2:]
    extra = draw(st.lists(st.sampled_from(computed), max_size=2, unique_by=id))
    outs = [computed[-1], *[e for e in extra if e is not computed[-1]]]
    body = outs[0] if len(outs) == 1 else Tuple(outs)
    return IRModule.from_expr(Function(values[:2], body))


ALL_OPS = UNARY + BINARY + ["split", "concatenate"]


def _refuse_odd(root) -> Verdict:
    index = root.span.index if root.span is not None else 0
    return Verdict(index % 3 != 1, f"span index {index} is refused")


@st.composite
def patterns(draw, calls, depth=1):
    """A pattern cut from the graph (so that it matches somewhere): a call's op, and for each
    argument a wildcard, a constant, or (one level down) the pattern of the argument."""
    node = draw(st.sampled_from(calls))
    args = []
    for arg in node.args:
        if isinstance(arg, Constant):
            args.append(is_constant() if draw(st.booleans()) else wildcard())
        elif depth > 0 and arg in calls and draw(st.booleans()):
            args.append(draw(patterns([arg], depth - 1)))
        else:
            args.append(wildcard())
    return is_op(node.op.name)(*args)


@st.composite
def setups(draw, mod):
    calls = [
        n
        for n in post_order(mod["main"].body)
        if isinstance(n, Call) and n.op.name in UNARY + BINARY
    ]
    names = ["a", "b"][: draw(st.integers(1, 2))]
    targets, table, support = [], [], {}
    for name in names:
        ops = draw(st.lists(st.sampled_from(ALL_OPS), unique=True, max_size=len(ALL_OPS)))
        support[name] = set(ops)
        for k in range(draw(st.integers(0, 3)) if calls else 0):
            check = _refuse_odd if draw(st.booleans()) else None
            table.append((f"{name}.p{k}", draw(patterns(calls)), check))
        targets.append(Backend(name, ops={o: True for o in ops}))
    return targets, table, support, draw(st.integers(1, 3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_partitions_keep_every_invariant(data):
    mod = data.draw(dags())
    targets, table, support, min_size = data.draw(setups(mod))
    assert_invariants(mod, table, targets, support, min_size)


def test_every_op_once_counts_duplicates():
    """The oracle itself: a graph that computes an op twice is caught."""
    x = var("x", SHAPE)
    relu = Call(get_op("nn.relu"), [x], span=Span(0, "r", "n0"))
    twice = Call(get_op("add"), [relu, Call(get_op("nn.relu"), [x], span=relu.span)])

    assert op_spans(IRModule.from_expr(twice))[relu.span] == 2
    assert Counter({relu.span: 1}) != op_spans(IRModule.from_expr(twice))


def _random_chainy_dag(rng, n: int) -> IRModule:
    """A bigger DAG (tens to a hundred ops) whose ops mostly read recent values, sometimes far
    ones: long paths around regions, where merges are most likely to make cycles."""
    ops = ["nn.relu", "negative", "add", "multiply", "maximum", "tanh"]
    values = [var("x", SHAPE), var("y", SHAPE)]
    for i in range(n):
        op = get_op(ops[rng.integers(len(ops))])
        args = []
        for _ in range(op.num_inputs):
            back = (
                min(int(rng.geometric(0.3)), len(values))
                if rng.random() < 0.8
                else int(rng.integers(1, len(values) + 1))
            )
            args.append(values[-back])
        values.append(Call(op, args, span=Span(i, op.name, f"n{i}")))
    return IRModule.from_expr(Function(values[:2], values[-1]))


@pytest.mark.parametrize("seed", range(25))
def test_bigger_random_dags_merge_maximally_without_cycles(seed):
    rng = np.random.default_rng(seed)
    mod = _random_chainy_dag(rng, int(rng.integers(20, 100)))
    names = ["nn.relu", "negative", "add", "multiply", "maximum", "tanh"]
    a = set(rng.choice(names, size=int(rng.integers(1, 6)), replace=False))
    b = set(rng.choice(names, size=int(rng.integers(0, 4)), replace=False))
    targets = [Backend("a", ops={o: True for o in a}), Backend("b", ops={o: True for o in b})]
    assert_invariants(mod, [], targets, {"a": a, "b": b}, 1)
