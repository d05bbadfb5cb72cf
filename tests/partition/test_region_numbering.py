"""The region numbering (builder._region_walk, which RegionBuilder.regions uses): each region's
members in dataflow order, its inputs and outputs in the order Relay's depth-first walk
completes the edges that cross its boundary. Held to ``_walked``, the definition written out
plainly, on random DAGs with shared inputs, constants, tuples, composite calls (whose function
the dataflow walk meets and the region walk does not) and random labels, with constants bound
and not. (Session 17 tried replaying the walk from the cached dataflow order; on the 100k
chain it was no faster than walking again, and these tests are what held it.)"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partita.partition.builder import _region_walk
from partita.partition.units import Region, value_children

from partita.ir import Call, Constant, Function, Tuple, TupleGetItem, const, var
from partita.ir.order import dataflow_order
from partita.ops import get_op

SHAPE = (2, 4)


@st.composite
def labelled_graphs(draw):
    x, y = var("x", SHAPE), var("y", SHAPE)
    values = [x, y]
    shared = const(1.5, "float32")
    composite = None
    for _ in range(draw(st.integers(1, 30))):
        pick = lambda: values[draw(st.integers(0, len(values) - 1))]  # noqa: E731
        kind = draw(st.sampled_from(["unary", "binary", "binary", "const", "split", "comp"]))
        if kind == "unary":
            values.append(Call(get_op("nn.relu"), [pick()]))
        elif kind == "binary":
            values.append(Call(get_op("add"), [pick(), pick()]))
        elif kind == "const":
            values.append(Call(get_op("multiply"), [shared, pick()]))
        elif kind == "split":
            parts = Call(get_op("split"), [pick()], {"indices_or_sections": 2, "axis": 1})
            items = [TupleGetItem(parts, i) for i in draw(st.permutations([0, 1]))]
            values.append(Call(get_op("concatenate"), [Tuple(items)], {"axis": 1}))
        else:
            if composite is None or draw(st.booleans()):  # shared callee or a new one
                a, b = var("a", SHAPE), var("b", SHAPE)
                composite = Function(
                    [a, b], Call(get_op("subtract"), [a, b]), None, {"Composite": "t.sub"}
                )
            values.append(Call(composite, [pick(), pick()]))
    computed = values[2:]
    extra = draw(st.lists(st.sampled_from(computed), max_size=2, unique_by=id))
    outs = [computed[-1], *[e for e in extra if e is not computed[-1]]]
    root = outs[0] if len(outs) == 1 else Tuple(outs)
    regions = [Region("a"), Region("b"), Region("a"), Region("llvm", True, "r")]
    labels = {}
    for node in dataflow_order(root):
        if type(node) in (Call, Tuple, TupleGetItem) and draw(st.integers(0, 4)):
            labels[id(node)] = regions[draw(st.integers(0, len(regions) - 1))]
    return root, labels


def _walked(root, grouped, bind):
    """The numbering by its definition: one depth-first walk, inputs left to right, each edge
    between regions met when it completes."""
    members, ins_of, outs_of, done = {}, {}, {}, set()

    def cross(kid, region, owner):
        if owner is not None:
            outs_of.setdefault(id(owner), {}).setdefault(id(kid), kid)
        if region is not None and (not bind or type(kid) is not Constant):
            ins_of.setdefault(id(region), {}).setdefault(id(kid), kid)

    def finish(node):
        done.add(id(node))
        region = grouped(id(node))
        if region is not None:
            members.setdefault(id(region), []).append(node)

    stack = [(root, iter(value_children(root)))]
    while stack:
        node, kids = stack[-1]
        region = grouped(id(node))
        for kid in kids:
            owner = grouped(id(kid))
            if id(kid) in done:
                if owner is not region:
                    cross(kid, region, owner)
                continue
            if not value_children(kid):
                finish(kid)
                if owner is not region:
                    cross(kid, region, owner)
                continue
            stack.append((kid, iter(value_children(kid))))
            break
        else:
            stack.pop()
            finish(node)
            if stack:
                above = grouped(id(stack[-1][0]))
                if above is not region:
                    cross(node, above, region)
    first = grouped(id(root))
    if first is not None:
        outs_of.setdefault(id(first), {}).setdefault(id(root), root)
    return (
        members,
        {k: list(ins_of.get(k, {}).values()) for k in members},
        {k: outs_of.get(k, {}) for k in members},
    )


def _ids(result):
    members, ins, outs = result
    return (
        [(k, list(map(id, v))) for k, v in members.items()],
        [(k, list(map(id, v))) for k, v in ins.items()],
        [(k, list(outs[k])) for k in outs],
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labelled_graphs(), st.booleans(), st.booleans())
def test_region_numbering_is_the_walks(graph, bind, host_plain):
    root, labels = graph
    # PartitionGraph groups only accelerator regions (host ones stay plain nodes)
    grouped = {k: r for k, r in labels.items() if not (host_plain and r.host)}.get
    assert _ids(_region_walk(root, grouped, bind)) == _ids(_walked(root, grouped, bind))


@pytest.mark.parametrize("bind", [True, False])
def test_inputs_in_the_order_the_walk_completes_their_edges(bind):
    """add(relu(relu(x)), x) with only the add in a region: x comes first in the order (the
    walk finishes it first, under the relus) but its edge into the add completes last, so the
    relu is input 0 and x input 1, as Relay's walk numbers them."""
    x = var("x", SHAPE)
    c = Call(get_op("nn.relu"), [Call(get_op("nn.relu"), [x])])
    root = Call(get_op("add"), [c, x])
    region = Region("a")
    labels = {id(root): region}
    members, ins, outs = _region_walk(root, labels.get, bind)
    assert dataflow_order(root).index(x) < dataflow_order(root).index(c)
    assert [n is c for n in ins[id(region)]] == [True, False] and ins[id(region)][1] is x
    assert _ids((members, ins, outs)) == _ids(_walked(root, labels.get, bind))
