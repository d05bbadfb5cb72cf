"""AnnotateTarget: every composite and op gets a target, and the CPU ones say why."""

from __future__ import annotations

import pytest
from common_graphs import registered
from partita.backends import Backend, Verdict
from partita.partition import AnnotateTarget, MergeComposite
from partita.patterns import is_op, wildcard
from partition_graphs import assert_same_bits, backend, retyped

import partita as P
from partita.ir import Call, Function, post_order

GRAPH = """
def @main(%x: Tensor[(2, 4), float32]) {
  %0 = nn.relu(%x) /* span=RELU:0:r */;
  %1 = add(%0, %x) /* span=ADD:1:a */;
  %2 = tanh(%1) /* span=TANH:2:t */;
  %3 = split(%2, indices_or_sections=2, axis=1) /* span=SPLIT:3:s */;
  %4 = concatenate((%3.1, %3.0), axis=1) /* span=CONCAT:4:c */;
  negative(%4) /* span=NEG:5:n */
}
"""


def regions(mod) -> dict:
    """node name (or node kind for tuples) -> (target, reason) of the unit wrapping it."""
    out = {}
    for node in post_order(mod["main"].body, enter_functions=False):
        if isinstance(node, Call) and isinstance(node.op, Function) and "Compiler" in node.op.attrs:
            attrs = node.op.attrs
            inner = node.op.body
            name = inner.span.tensor if getattr(inner, "span", None) else type(inner).__name__
            out[name] = (attrs["Compiler"], attrs.get("Reason", ""))
    return out


def test_an_op_goes_to_the_first_target_that_accepts_it():
    picky = Backend("a", ops={"nn.relu": lambda c: Verdict(False, "relu needs int8"), "add": True})
    lax = Backend("b", ops={"nn.relu": True, "add": True})
    out = AnnotateTarget([picky, lax])(P.parse(GRAPH))
    got = regions(out)
    assert got["r"] == ("b", "") and got["a"] == ("a", "")
    out = AnnotateTarget([picky])(P.parse(GRAPH))
    assert regions(out)["r"] == ("llvm", "a: relu needs int8")


def test_every_unit_is_wrapped_and_the_bits_stay():
    mod = P.parse(GRAPH)
    out = AnnotateTarget([backend("acc", ["tanh", "split", "concatenate"])])(mod)
    text = str(out)
    assert 'Compiler="acc"' in text and "Host=True" in text
    assert_same_bits(mod, out)
    P.assert_structural_equal(retyped(out), out)  # reasons survive printing and parsing


def test_tuple_items_follow_their_producer_and_tuples_their_consumers():
    out = AnnotateTarget([backend("acc", ["split", "concatenate"])])(P.parse(GRAPH))
    got = regions(out)
    assert got["s"][0] == got["c"][0] == got["Tuple"][0] == got["TupleGetItem"][0] == "acc"
    out = AnnotateTarget([backend("acc", ["split"])])(P.parse(GRAPH))
    got = regions(out)
    assert got["TupleGetItem"][0] == "acc" and got["Tuple"][0] == "llvm"


def test_composites_belong_to_the_target_their_name_starts_with():
    table = [
        ("acc.relu_add", is_op("add")(is_op("nn.relu")(wildcard()), wildcard())),
        ("tanh_only", is_op("tanh")(wildcard())),
        ("other.neg", is_op("negative")(wildcard())),
    ]
    mod = MergeComposite(table)(P.parse(GRAPH))
    got = regions(AnnotateTarget(["acc"])(mod))  # a bare target: no backend registered
    assert got["a"] == ("acc", "")
    assert got["t"] == ("llvm", "composite tanh_only names no target (call it <target>.tanh_only)")
    assert got["n"] == (
        "llvm",
        "composite other.neg belongs to other, which is not a target here (targets: acc)",
    )


def test_a_registered_backend_adds_its_single_op_checks():
    with registered(backend("acc_reg", ["tanh"])):
        got = regions(AnnotateTarget(["acc_reg"])(P.parse(GRAPH)))
    assert got["t"] == ("acc_reg", "")


@pytest.mark.parametrize(
    "targets, reason",
    [
        ([], "no accelerator target was given"),
        (
            [backend("acc", ["add"])],
            "no pattern matched: no acc pattern contains tanh, and no target supports it alone",
        ),
    ],
)
def test_reasons_when_nothing_matches(targets, reason):
    got = regions(AnnotateTarget(targets)(P.parse(GRAPH)))
    assert got["t"] == ("llvm", reason)


def test_the_nearest_partial_match_is_reported():
    table = [("acc.relu_add", is_op("add")(is_op("nn.relu")(wildcard()), is_op("exp")(wildcard())))]
    mod = MergeComposite(table)(P.parse(GRAPH))
    got = regions(AnnotateTarget(["acc"])(mod))
    assert got["r"][1] == (
        "no pattern matched; nearest: acc.relu_add at add (ADD #1) (5 sub-patterns matched, "
        "then is_op('exp')(wildcard()) failed on %x: not a call: got %x)"
    )


def test_the_host_is_not_a_target():
    with pytest.raises(P.PartitaError, match="llvm is a host"):
        AnnotateTarget(["llvm"])
    with pytest.raises(P.PartitaError, match="a target is a backend name"):
        AnnotateTarget([3])
