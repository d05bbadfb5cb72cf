"""MergeComposite: matches become composite functions; the first entry of the table wins."""

from __future__ import annotations

import pytest
from partita.backends import BackendError, Verdict
from partita.partition import MergeComposite, Overrides, placement_report
from partita.patterns import is_constant, is_op, wildcard
from partition_graphs import assert_same_bits, passes, placement

import partita as P
from partita.ir import Call, Function, post_order

BEFORE = """
def @main(%x: Tensor[(2, 4), float32], %y: Tensor[(2, 4), float32]) {
  %0 = add(%x, %y) /* span=ADD:0:a */;
  %1 = nn.relu(%0) /* span=RELU:1:r */;
  %2 = multiply(%1, 2f) /* span=MUL:2:m */;
  negative(%2) /* span=NEG:3:n */
}
"""

ADD_RELU = is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))
ADD = is_op("add")(wildcard(), wildcard())
MUL_CONST = is_op("multiply")(wildcard(), is_constant())


def composites(mod) -> list[str]:
    return [
        n.op.attrs["Composite"]
        for n in post_order(mod["main"].body, enter_functions=False)
        if isinstance(n, Call) and isinstance(n.op, Function)
    ]


def test_matches_become_composites_with_constants_inside():
    mod = P.parse(BEFORE)
    out = MergeComposite([("acc.add_relu", ADD_RELU), ("acc.mul", MUL_CONST)])(mod)
    expected = P.parse("""
    def @main(%x: Tensor[(2, 4), float32], %y: Tensor[(2, 4), float32]) {
      %0 = fn (%a: Tensor[(2, 4), float32], %b: Tensor[(2, 4), float32],
               PartitionedFromPattern="add_nn.relu_", Composite="acc.add_relu") {
        nn.relu(add(%a, %b))
      };
      %1 = fn (%c: Tensor[(2, 4), float32], PartitionedFromPattern="multiply_",
               Composite="acc.mul") {
        multiply(%c, 2f)
      };
      negative(%1(%0(%x, %y)))
    }""")
    P.assert_structural_equal(out, expected)
    assert_same_bits(mod, out)


def test_the_first_entry_wins():
    """A fused pattern listed before its part takes the whole match; listed after, it never
    gets the chance."""
    mod = P.parse(BEFORE)
    assert composites(MergeComposite([("acc.add_relu", ADD_RELU), ("acc.add", ADD)])(mod)) == [
        "acc.add_relu"
    ]
    assert composites(MergeComposite([("acc.add", ADD), ("acc.add_relu", ADD_RELU)])(mod)) == [
        "acc.add"
    ]


def test_a_check_gets_the_matched_expression_and_a_refusal_frees_the_nodes():
    seen = []

    def no_relu_roots(root):
        seen.append(root.op.name)
        return Verdict(root.op.name != "nn.relu", "relu roots are refused")

    out = MergeComposite([("acc.add_relu", ADD_RELU, no_relu_roots), ("acc.add", ADD)])(
        P.parse(BEFORE)
    )
    assert seen == ["nn.relu"]
    assert composites(out) == ["acc.add"]


def test_a_check_that_takes_the_match_gets_the_named_captures():
    """``check(root, match)``: the captures of the pattern, by name, as a backend's check needs
    them (the add under the relu); a one-argument check or one whose second parameter has a
    default still gets the root alone."""
    pattern = is_op("nn.relu")(is_op("add")(wildcard(), wildcard()).named("sum"))
    seen = {}

    def wants_captures(root, match):
        seen["captures"] = {k: v.op.name for k, v in match.captures.items()}
        seen["root"] = match.root is root
        return match["sum"].args[0].name_hint == "x"

    def has_option(root, strict=False):
        seen["strict"] = strict
        return True

    out = MergeComposite([("acc.add_relu", pattern, wants_captures)])(P.parse(BEFORE))
    assert seen == {"captures": {"sum": "add"}, "root": True}
    assert composites(out) == ["acc.add_relu"]
    MergeComposite([("acc.add_relu", pattern, has_option)])(P.parse(BEFORE))
    assert seen["strict"] is False
    refused = passes([("acc.add_relu", pattern, lambda root, match: match["sum"] is root)], ["acc"])
    report = {r.name: r.reason for r in placement_report(refused(P.parse(BEFORE))).rows}
    assert report["a"] == "acc.add_relu: <lambda> returned False"


def test_a_refused_composite_explains_the_cpu_ops():
    def refuse(root):
        return Verdict(False, "Batch size must be 1 (got 2)")

    out = passes([("acc.add_relu", ADD_RELU, refuse)], ["acc"])(P.parse(BEFORE))
    report = {r.name: r.reason for r in placement_report(out).rows}
    assert report["a"] == report["r"] == "acc.add_relu: Batch size must be 1 (got 2)"


def test_bare_tables_take_pairs_and_triples_and_an_empty_table_changes_nothing():
    mod = P.parse(BEFORE)
    assert composites(MergeComposite([("x.add", ADD), ("x.mul", MUL_CONST, None)])(mod)) == [
        "x.add",
        "x.mul",
    ]
    out = MergeComposite([])(mod)
    assert out["main"] is mod["main"]


@pytest.mark.parametrize(
    "table, message",
    [
        ([(ADD, "acc.add")], "the name must be a non-empty string"),
        ([("acc.add",)], "must be \\(name, pattern\\)"),
        ([("acc.add", ADD, "check")], "is not callable"),
    ],
)
def test_bad_tables(table, message):
    with pytest.raises(BackendError, match=message):
        MergeComposite(table)


def test_overrides_keep_forced_ops_out_of_composites():
    mod = P.parse(BEFORE)
    out = MergeComposite(
        [("acc.add_relu", ADD_RELU), ("acc.add", ADD)], overrides=Overrides(nodes=["r"])
    )(mod)
    assert composites(out) == ["acc.add"]
    whole = passes(
        [("acc.add_relu", ADD_RELU), ("acc.add", ADD)],
        ["acc"],
        overrides=Overrides(op_types=["RELU"]),
    )(mod)
    assert placement(whole) == {"main": ["m", "n", "r"], "acc_main_0": ["a"]}


def test_forcing_a_composite_by_name_inlines_it_on_the_cpu():
    mod = P.parse(BEFORE)
    out = passes(
        [("acc.add_relu", ADD_RELU)], ["acc"], overrides=Overrides(op_types=["acc.add_relu"])
    )(mod)
    assert placement(out)["main"] == ["a", "m", "n", "r"]
    assert composites(out) == []  # inlined back into plain ops
    reasons = {r.name: r.reason for r in placement_report(out).rows}
    assert reasons["a"] == reasons["r"] == "forced onto the CPU (op type acc.add_relu)"
    assert_same_bits(mod, out)
