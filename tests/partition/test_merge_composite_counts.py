"""MergeComposite's region check by use counts (partita.ir.graph.use_counts) against the users
map it replaced (patterns.group.region_problem): same answer at every node of graphs where
values are shared, used twice by one node and used outside a match; and no counting at all
when every match is a single node (the op-only chain of benchmarks/partition.py)."""

from __future__ import annotations

import numpy as np
from partita.partition import MergeComposite
from partita.patterns import is_constant, is_op, wildcard
from partita.patterns.claims import Claimer
from partita.patterns.group import region_problem

import partita as P
from partita.ir import Function, post_order
from partita.ir.graph import Graph, use_counts
from partita.ir.order import value_inputs
from partita.passes.infer_type import InferType

RELU_ADD = is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))
MUL_ADD = is_op("multiply")(is_op("add")(wildcard(), wildcard()), wildcard())
TANH_RELU_ADD = is_op("tanh")(RELU_ADD)
ADD_CONST = is_op("add")(wildcard(), is_constant())
PATTERNS = [RELU_ADD, MUL_ADD, TANH_RELU_ADD, ADD_CONST, is_op("nn.relu")(wildcard())]


def _shared_graph(stages: int) -> P.IRModule:
    """add results used by their relu only, by a relu and a multiply (outside a relu(add)
    match), twice by one multiply; tuples and projections in between."""
    x = P.var("x", (4,))
    relu, add, mul, tanh = (P.get_op(n) for n in ("nn.relu", "add", "multiply", "tanh"))
    y = x
    for i in range(stages):
        a = add(y, x) if i % 2 else add(y, P.const(np.ones(4, "float32")))
        r = relu(a)
        if i % 3 == 0:
            y = mul(r, a)  # a used by r and by the multiply
        elif i % 3 == 1:
            y = tanh(mul(a, a))  # a used twice by one node
        else:
            t = P.ir.Tuple([tanh(r), y])  # tanh(relu(add)) claims what relu(add) wants
            y = tanh(P.ir.TupleGetItem(t, 0))
    return P.IRModule.from_expr(y)


def test_use_counts_are_the_users_map_lengths():
    body = InferType()(_shared_graph(30))["main"].body
    graph = Graph(body)
    counts = use_counts(graph.order)
    units = [n for n in graph.order if value_inputs(n)]
    assert use_counts(units) == counts  # leaves use nothing: the units are enough
    for node in graph.order:
        assert counts[id(node)] == len(graph.users.get(id(node), ())), node
    assert graph.uses == counts


def test_claim_problem_is_region_problems():
    body = InferType()(_shared_graph(30))["main"].body
    graph = Graph(body)
    claimer = Claimer(graph)
    seen = {"clean": 0, "used outside": 0, "claimed": 0}
    claimed: set[int] = set()
    for node in reversed(graph.order):
        for pattern in PATTERNS:
            found = claimer.claim(pattern, node, claimed)
            if found is None:
                continue
            want = region_problem(node, found.interior, graph, claimed)
            assert found.problem == want, (node, pattern)
            if want is None:
                seen["clean"] += 1
                if len(found.interior) > 1:
                    claimed.update(k for k in found.interior if k != id(node))
            else:
                seen["claimed" if "already belongs" in want else "used outside"] += 1
    assert all(seen.values()), seen  # every case was met


def test_single_node_matches_count_no_uses(monkeypatch):
    """The op-only chain's table matches single nodes: the region check needs no counts."""
    import partita.partition.merge_composite as mc

    counted = []
    real = mc.shared_values

    def spy(*units):
        counted.append(1)
        return real(*units)

    monkeypatch.setattr(mc, "shared_values", spy)
    monkeypatch.setattr(mc, "PROGRAM_MIN", 0)  # the programs even for a few candidates
    x = P.var("x", (4,))
    y = x
    for i in range(50):
        y = P.get_op("nn.relu")(y) if i % 2 else P.get_op("add")(y, x)
    mod = InferType()(P.IRModule.from_expr(y))
    out = MergeComposite([("relu", is_op("nn.relu")(wildcard()))])(mod)
    assert not counted  # uses never counted (shared values never sought)
    composites = [n for n in post_order(out["main"]) if type(n) is Function and n.attrs]
    assert len(composites) == 25 and all(f.attrs["Composite"] == "relu" for f in composites)
    # a two-node pattern counts once, at its first match, however many matches follow
    mod = InferType()(P.IRModule.from_expr(y))
    out = MergeComposite([("relu_add", RELU_ADD)])(mod)
    assert len(counted) == 1
    composites = [n for n in post_order(out["main"]) if type(n) is Function and n.attrs]
    assert len(composites) == 25


def test_programs_and_closures_merge_the_same(monkeypatch):
    """MergeComposite with claim programs for every rule and with none: the same module (a
    check that refuses some matches included)."""
    import partita.partition.merge_composite as mc
    from partita.backends import Verdict

    def odd(root) -> Verdict:
        return Verdict(len(root.args) % 2 == 0 or id(root) % 3 == 0, "odd")

    table = [("ta", TANH_RELU_ADD), ("ra", RELU_ADD, odd), ("ma", MUL_ADD), ("ac", ADD_CONST)]
    mod = InferType()(_shared_graph(40))
    texts = []
    for minimum in (0, 10**9):
        monkeypatch.setattr(mc, "PROGRAM_MIN", minimum)
        texts.append(str(MergeComposite(table)(mod)))
    assert texts[0] == texts[1] and "Composite" in texts[0]
