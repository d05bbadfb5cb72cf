"""Property: Relay's compiler_begin/compiler_end form round-trips partita's regions. On random
DAGs and targets, writing AnnotateTarget's (and MergeCompilerRegions') regions as annotations
and reading them back gives the same regions, and the annotated module, and what PartitionGraph
makes of it, compute the same bits."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partita.partition import AnnotateTarget, MergeCompilerRegions, PartitionGraph
from partita.partition.annotations import annotate_regions, has_annotations, strip_annotations
from partita.partition.regions import UNIT_TYPES, flatten, value_children
from test_partition_property import SHAPE, dags, setups

from partita.interpreter import interpret
from partita.ir import IRModule
from partita.ir.graph import dataflow_order
from partita.passes import InferType


def _labels(body, region_of) -> list:
    """Per unit in post-order: (target, host, index of its region by first appearance)."""
    first: dict[int, int] = {}
    out = []
    for node in dataflow_order(body):
        if type(node) not in UNIT_TYPES:
            continue
        region = region_of.get(id(node))
        if region is None or (region.host and not value_children(node)):  # printed bare
            out.append(None)
            continue
        group = first.setdefault(id(region), len(first))
        out.append((region.target, region.host, group))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_annotations_round_trip(data):
    mod = InferType()(data.draw(dags()))
    targets = data.draw(setups(mod))[0]
    annotated = AnnotateTarget(targets)(mod)
    if data.draw(st.booleans()):
        annotated = MergeCompilerRegions()(annotated)
    flat, region_of = flatten(annotated["main"].body)
    written = annotate_regions(flat, region_of)
    assert has_annotations(written) == any(type(n) in UNIT_TYPES for n in dataflow_order(flat))
    back, read = strip_annotations(written)
    assert _labels(back, read) == _labels(flat, region_of)

    main = annotated["main"]
    as_relay = IRModule.from_expr(main.with_body(written))
    rng = np.random.default_rng(0)
    feed = {p.name_hint: rng.uniform(-2, 2, SHAPE).astype("float32") for p in main.params}
    want = interpret(mod, feed)
    for got in (interpret(as_relay, feed), interpret(PartitionGraph()(as_relay), feed)):
        for w, g in zip(want if isinstance(want, list) else [want],
                        got if isinstance(got, list) else [got]):
            np.testing.assert_array_equal(g, w)
