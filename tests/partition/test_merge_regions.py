"""MergeCompilerRegions: neighbouring regions of one target merge as far as they can without a
cycle. Each case lists where every named node ends up."""

from __future__ import annotations

import pytest
from partita.partition import AnnotateTarget, MergeCompilerRegions
from partition_graphs import (
    assert_same_bits,
    backend,
    mergeable_neighbours,
    partitions,
    passes,
    placement,
    retyped,
)

import partita as P
from partita.ir import Call, Function, post_order

ACC = backend("acc", ["add", "multiply", "nn.relu", "split", "concatenate", "negative"])


def run(text, targets=(ACC,), min_size=1):
    mod = P.parse(text)
    out = passes((), list(targets), min_size)(mod)
    assert_same_bits(mod, out)
    retyped(out)
    assert mergeable_neighbours(out) == []
    return out


def test_a_chain_next_to_the_inputs_and_the_output_is_one_partition():
    out = run("""
    def @main(%x: Tensor[(2, 4), float32], %y: Tensor[(2, 4), float32]) {
      %0 = add(%x, %y) /* span=A:0:a */;
      %1 = nn.relu(%0) /* span=R:1:b */;
      multiply(%1, %x) /* span=M:2:c */
    }""")
    assert placement(out) == {"main": [], "acc_main_0": ["a", "b", "c"]}
    assert out["main"].body.op.name_hint == "acc_main_0"


def test_a_cpu_op_between_two_branches_splits_the_diamond_without_a_cycle():
    # a feeds the CPU op t and c; d needs both: {a, c, d} would consume t, which consumes a.
    out = run("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = nn.relu(%x) /* span=R:0:a */;
      %1 = tanh(%0) /* span=T:1:t */;
      %2 = negative(%0) /* span=N:2:c */;
      add(%1, %2) /* span=A:3:d */
    }""")
    assert placement(out) == {"main": ["t"], "acc_main_0": ["a", "c"], "acc_main_1": ["d"]}


def test_the_relay_cycle_case_never_merges():
    # A feeds both the CPU op C and B; C feeds B. Merging A and B would need C inside.
    out = run("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = add(%x, %x) /* span=A:0:A */;
      %1 = tanh(%0) /* span=C:1:C */;
      multiply(%0, %1) /* span=B:2:B */
    }""")
    assert placement(out) == {"main": ["C"], "acc_main_0": ["A"], "acc_main_1": ["B"]}


def test_a_diamond_on_one_target_is_one_partition():
    out = run("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = nn.relu(%x) /* span=R:0:a */;
      %1 = negative(%0) /* span=N:1:b */;
      %2 = multiply(%0, 3f) /* span=M:2:c */;
      add(%1, %2) /* span=A:3:d */
    }""")
    assert placement(out) == {"main": [], "acc_main_0": ["a", "b", "c", "d"]}


def test_a_region_output_feeding_the_cpu_and_another_region():
    dsp = backend("dsp", ["exp"])
    out = run(
        """
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = add(%x, %x) /* span=A:0:a */;
      %1 = nn.relu(%0) /* span=R:1:b */;
      %2 = tanh(%1) /* span=T:2:t */;
      %3 = exp(%1) /* span=E:3:e */;
      %4 = negative(%0) /* span=N:4:n */;
      (%2, %3, %4)
    }""",
        targets=(ACC, dsp),
    )
    assert placement(out) == {"main": ["t"], "acc_main_0": ["a", "b", "n"], "dsp_main_0": ["e"]}
    acc = out["acc_main_0"]
    assert isinstance(acc.body, P.Tuple) and len(acc.body.fields) == 2  # b and n leave it


def test_tuple_producers_inside_a_region_export_their_items():
    out = run("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = split(%x, indices_or_sections=2, axis=1) /* span=S:0:s */;
      %1 = tanh(%0.0) /* span=T:1:t */;
      %2 = nn.relu(%0.1) /* span=R:2:r */;
      %3 = concatenate((%1, %2), axis=1) /* span=C:3:c */;
      %3
    }""")
    assert placement(out) == {"main": ["t"], "acc_main_0": ["r", "s"], "acc_main_1": ["c"]}
    outputs = out["acc_main_0"].body
    assert isinstance(outputs, P.Tuple)
    assert all(isinstance(f.checked_type, P.TensorType) for f in outputs.fields)


@pytest.mark.parametrize(
    "targets, expected",
    [
        ((backend("acc", ["add", "nn.relu", "tanh", "negative"]),), 1),  # supports everything
        ((backend("acc", []),), 0),  # supports nothing
        ((), 0),  # no target at all
    ],
)
def test_everything_or_nothing(targets, expected):
    out = run(
        """
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = nn.relu(%x) /* span=R:0:a */;
      %1 = tanh(%0) /* span=T:1:b */;
      %2 = negative(%0) /* span=N:2:c */;
      add(%1, %2) /* span=A:3:d */
    }""",
        targets=targets,
    )
    assert len(partitions(out)) == expected


def test_merging_works_on_annotated_ir_and_is_idempotent():
    mod = P.parse("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = nn.relu(%x);
      %1 = negative(%0);
      add(%1, %0)
    }""")
    annotated = AnnotateTarget([ACC])(mod)
    once = MergeCompilerRegions()(annotated)
    twice = MergeCompilerRegions()(once)
    P.assert_structural_equal(once, twice)
    calls = [
        n
        for n in post_order(once["main"].body, enter_functions=False)
        if isinstance(n, Call) and isinstance(n.op, Function)
    ]
    assert len(calls) == 1 and calls[0].op.attrs["Compiler"] == "acc"
    assert_same_bits(mod, once)
