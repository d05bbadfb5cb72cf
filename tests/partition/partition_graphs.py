"""Helpers for the partition tests: pipelines, where each named node ended up, and the oracles
(same bits, types from scratch, every op once, no mergeable neighbours left)."""

from __future__ import annotations

from collections import Counter

import networkx as nx
from partita.backends import Backend
from partita.partition import (
    AnnotateTarget,
    MergeCompilerRegions,
    MergeComposite,
    PartitionGraph,
    RegionPolicies,
)
from same_bits import assert_same_bits, random_inputs  # noqa: F401  (re-exported)

import partita as P
from partita.ir import Call, Function, GlobalVar, Tuple, TupleGetItem, post_order
from partita.ops.registry import Op


def passes(table=(), targets=("acc",), min_size=1, overrides=None, host="llvm"):
    """The partition pipeline, spelled out."""
    return P.Sequential(
        [
            P.InferType(),
            MergeComposite(table, overrides=overrides),
            AnnotateTarget(list(targets), host=host, overrides=overrides),
            MergeCompilerRegions(),
            RegionPolicies(
                min_size=min_size, targets=[t for t in targets if isinstance(t, str)], host=host
            ),
            PartitionGraph(host=host),
        ]
    )


def backend(name, ops=(), patterns=(), cost=None) -> Backend:
    return Backend(name, patterns=list(patterns), ops={o: True for o in ops}, cost=cost)


def partitions(mod) -> dict:
    return {k: f for k, f in mod.items() if "Compiler" in f.attrs}


def _names(fn) -> list[str]:
    out = []
    for node in post_order(fn.body):
        if isinstance(node, Call) and isinstance(node.op, Op):
            out.append(node.span.tensor if node.span is not None else node.op.name)
    return sorted(out)


def placement(mod) -> dict:
    """``{"main": [host node names], "<symbol>": [node names], ...}`` (names from the spans)."""
    out = {"main": []}
    for node in post_order(mod["main"].body, enter_functions=True):
        if isinstance(node, Call) and isinstance(node.op, Op):
            out["main"].append(node.span.tensor if node.span is not None else node.op.name)
    out["main"].sort()
    for name, fn in partitions(mod).items():
        out[name] = _names(fn)
    return out


def op_spans(mod) -> Counter:
    """Every op call of main and of the partitions it calls, by span."""
    seen, count = set(), Counter()
    stack = [mod["main"].body]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Call):
            if isinstance(node.op, Op):
                count[node.span] += 1
            elif isinstance(node.op, Function):
                stack.append(node.op.body)
            else:
                stack.append(mod[node.op.name_hint].body)
            stack.extend(node.args)
        elif isinstance(node, Tuple):
            stack.extend(node.fields)
        elif isinstance(node, TupleGetItem):
            stack.append(node.tuple_value)
    return count


def assert_typed(mod) -> None:
    """Every node the passes built carries its type already (no pass left one out)."""
    for fn in mod.functions.values():
        for node in post_order(fn.body):
            assert node.type_or_none is not None or isinstance(node, GlobalVar), node


def retyped(mod):
    """Print, parse and type the module from scratch (no cached types survive)."""
    text, consts = P.astext(mod)
    fresh = P.parse(text, consts)
    P.InferType()(fresh)
    return fresh


def item_graph(mod) -> nx.DiGraph:
    """Main's calls as a graph (a partition's tuple items folded into its call)."""
    g = nx.DiGraph()

    def item(node):
        while (
            isinstance(node, TupleGetItem)
            and isinstance(node.tuple_value, Call)
            and isinstance(node.tuple_value.op, GlobalVar)
        ):
            node = node.tuple_value
        return node

    for node in post_order(mod["main"].body, enter_functions=False):
        if isinstance(node, (Call, Tuple, TupleGetItem)):
            me = item(node)
            g.add_node(id(me), node=me)
            kids = (
                node.fields
                if isinstance(node, Tuple)
                else ([node.tuple_value] if isinstance(node, TupleGetItem) else node.args)
            )
            for kid in kids:
                if isinstance(kid, (Call, Tuple, TupleGetItem)) and id(item(kid)) != id(me):
                    g.add_edge(id(item(kid)), id(me))
    return g


def mergeable_neighbours(mod) -> list:
    """Pairs of partitions of one target, one feeding the other, with no other path between
    them: MergeCompilerRegions should have merged them."""
    g = item_graph(mod)
    assert nx.is_directed_acyclic_graph(g)
    out = []
    for a, b in list(g.edges):
        na, nb = g.nodes[a]["node"], g.nodes[b]["node"]
        if not all(isinstance(n, Call) and isinstance(n.op, GlobalVar) for n in (na, nb)):
            continue
        ta = mod[na.op.name_hint].attrs["Compiler"]
        if ta != mod[nb.op.name_hint].attrs["Compiler"]:
            continue
        h = g.copy()
        h.remove_edge(a, b)
        if not nx.has_path(h, a, b):
            out.append((na.op.name_hint, nb.op.name_hint))
    return out


def assert_invariants(mod, table, targets, support, min_size=1):
    """Partition ``mod`` and check every invariant of the pipeline (see the property test)."""
    from partita.partition import placement_report

    out = passes(table, targets, min_size)(mod)
    assert_typed(out)
    fresh = retyped(out)
    assert nx.is_directed_acyclic_graph(item_graph(out))
    assert op_spans(out) == op_spans(mod)
    assert_same_bits(mod, out)
    assert_same_bits(mod, fresh, seed=1)
    for fn in partitions(out).values():
        target = fn.attrs["Compiler"]
        for node in post_order(fn.body, enter_functions=False):
            if isinstance(node, Call) and isinstance(node.op, Op):
                assert node.op.name in support[target], (node.op.name, target)
            elif isinstance(node, Call) and isinstance(node.op, Function):
                assert node.op.attrs["Composite"].startswith(target + ".")
    for node in post_order(out["main"].body, enter_functions=False):
        assert not (isinstance(node, Call) and isinstance(node.op, Function)), "composite in main"
    if min_size == 1:
        assert mergeable_neighbours(out) == []
    report = placement_report(out)
    assert all(row.reason for row in report.host_rows)
    return out
