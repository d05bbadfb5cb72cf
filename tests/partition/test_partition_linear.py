"""Partitioning stays linear: the work each pass does, counted (Python function calls, builtins
included, and the nodes the shared dataflow walk visits), grows in proportion to the graph.

A timing test would be flaky on a shared machine; a count is exact. An accidental quadratic (a
walk of the whole graph per region, a list scanned per node) makes the count per node of the
bigger graph several times that of the smaller one, so it fails here long before anyone
notices it in benchmarks/partition.py.
"""

from __future__ import annotations

import sys

import pytest
from common_graphs import registered
from partita.backends import Backend
from partita.partition import partition_pipeline
from partita.patterns import is_op, wildcard

import partita as P
from partita.ir import order as ir_order
from partita.ir import post_order
from partita.passes.infra import PassContext, PassInstrument

PASSES = ("InferType", "MergeComposite", "AnnotateTarget", "MergeCompilerRegions",
          "RegionPolicies", "PartitionGraph")


class _CallCounter(PassInstrument):
    """Python and builtin calls made inside each pass (sys.setprofile)."""

    def __init__(self):
        self.calls: dict[str, int] = {}
        self._stack: list[str] = []
        self._count = 0

    def _profile(self, _frame, event, _arg):
        if event in ("call", "c_call"):
            self._count += 1

    def run_before_pass(self, p, mod):
        if not self._stack:  # the pipeline itself: count inside each of its passes
            self._stack.append(p.name)
            return
        self._stack.append(p.name)
        self._count = 0
        sys.setprofile(self._profile)

    def run_after_pass(self, p, mod):
        name = self._stack.pop()
        if self._stack:
            sys.setprofile(None)
            self.calls[name] = self.calls.get(name, 0) + self._count


def _chain(n: int) -> P.IRModule:
    """An op-only chain: relu / add-the-input, cut every 10 ops by a tanh the target refuses."""
    x = P.var("x", (4,))
    y = x
    relu, add, tanh = P.get_op("nn.relu"), P.get_op("add"), P.get_op("tanh")
    for i in range(n):
        y = tanh(y) if i % 10 == 9 else add(y, x) if i % 2 else relu(y)
    return P.IRModule.from_expr(y)


def _residual(n: int) -> P.IRModule:
    """Residual stages whose skip connection reaches across a refused op, so that
    MergeCompilerRegions must refuse merges that would make a cycle."""
    x = P.var("x", (4,))
    y = x
    relu, add, tanh = P.get_op("nn.relu"), P.get_op("add"), P.get_op("tanh")
    for i in range(n // 4):
        z = relu(y)
        z = tanh(z) if i % 3 == 2 else relu(z)
        y = add(y, relu(z))
    return P.IRModule.from_expr(y)


ACC = Backend("acc_linear", ops=["add"], patterns=[("relu", is_op("nn.relu")(wildcard()))])


def _counts(build, n: int) -> tuple[dict, int, int]:
    """Calls per pass, nodes in the graph, and the nodes the dataflow walk visited."""
    mod = build(n)
    nodes = len(post_order(mod["main"]))
    counter = _CallCounter()
    walked = ir_order.ORDER_STATS["nodes"]
    with registered(ACC), PassContext(instruments=[counter]):
        partition_pipeline("acc_linear")(mod).functions  # noqa: B018 (build every function)
    return counter.calls, nodes, ir_order.ORDER_STATS["nodes"] - walked


@pytest.mark.parametrize("build", [_chain, _residual], ids=["chain", "residual"])
def test_work_per_node_does_not_grow(build):
    small, n_small, walked_small = _counts(build, 1_000)
    big, n_big, walked_big = _counts(build, 4_000)
    assert set(PASSES) <= set(small)
    for name in small:
        per_small, per_big = small[name] / n_small, big[name] / n_big
        # linear: the same work per node (a little slack for per-pass constant costs, which
        # weigh more on the small graph); a quadratic would be about 4x
        assert per_big <= 1.1 * per_small, (name, per_small, per_big)
        assert per_big < 200, (name, per_big)  # calls per node: a cheap pass stays cheap
    # the shared walk: each pass orders the graph at most once (and reuses earlier orders)
    assert walked_big / n_big <= 1.15 * walked_small / n_small
    assert walked_big <= 6 * n_big
