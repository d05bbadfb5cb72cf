"""Big graphs: everything is iterative, so a 100,000-node chain partitions without a
RecursionError (and in time linear in its size: see benchmarks/partition.py)."""

from __future__ import annotations

import pytest
from common_graphs import registered
from partita.backends import Backend
from partita.partition import partition_for, placement_report
from partita.patterns import is_op, wildcard
from partition_graphs import assert_same_bits

import partita as P
from partita.ir import Span


def chain(n: int, cut_every: int) -> P.IRModule:
    """relu / add-the-input ops; every ``cut_every``-th op is a tanh the target refuses."""
    x = P.var("x", (4,))
    y = x
    relu, add, tanh = P.get_op("nn.relu"), P.get_op("add"), P.get_op("tanh")
    for i in range(n):
        span = Span(i, "OP", None)
        if i % cut_every == cut_every - 1:
            y = tanh(y, span=span)
        elif i % 2:
            y = add(y, x, span=span)
        else:
            y = relu(y, span=span)
    return P.IRModule.from_expr(y)


def run(n: int, cut_every: int):
    mod = chain(n, cut_every)
    acc = Backend("acc_big", ops=["add"], patterns=[("relu", is_op("nn.relu")(wildcard()))])
    with registered(acc):
        out = partition_for(mod, "acc_big")
    return mod, out


def test_ten_thousand_nodes():
    mod, out = run(10_000, 50)
    assert len(out.functions) == 1 + 200
    assert_same_bits(mod, out)


@pytest.mark.slow
def test_a_hundred_thousand_nodes():
    mod, out = run(100_000, 250)
    assert len(out.functions) == 1 + 400
    report = placement_report(out)
    assert report.summary()["ops_by_target"] == {"acc_big": 99_600, "llvm": 400}
