"""Verdicts and constraints: the requirement text is the refusal message."""

from __future__ import annotations

import pytest
from partita.backends import (
    CheckError,
    Verdict,
    all_of,
    as_verdict,
    constraint,
    in_range,
    requirements_of,
    run_check,
)

import partita as P

STRIDE_RANGE = (1, 3)


@constraint("Stride height and width must be in the range [{}, {}]", *STRIDE_RANGE)
def stride_range(call) -> Verdict:
    sh, sw = call.attrs.strides
    ok = in_range(sh, *STRIDE_RANGE) and in_range(sw, *STRIDE_RANGE)
    return Verdict(ok, f"got {sh}x{sw}")


@constraint("Weights must be int8")
def int8_weights(call) -> bool:
    return call.args[1].checked_type.dtype == "int8"


def conv(strides, wdtype="float32"):
    x = P.var("x", (1, 3, 8, 8), wdtype)
    w = P.const(__import__("numpy").zeros((4, 3, 3, 3), wdtype))
    call = P.get_op("nn.conv2d")(x, w, strides=strides)
    P.infer_type(call)
    return call


@pytest.mark.parametrize(
    "strides, ok, reason",
    [
        ((1, 1), True, ""),
        ((3, 2), True, ""),
        ((4, 4), False, "Stride height and width must be in the range [1, 3] (got 4x4)"),
        ((1, 5), False, "Stride height and width must be in the range [1, 3] (got 1x5)"),
    ],
)
def test_constraint_verdict_and_reason(strides, ok, reason):
    verdict = stride_range(conv(strides))
    assert verdict.ok is ok and bool(verdict) is ok
    assert verdict.reason == reason


def test_constraint_keeps_its_requirement_and_name():
    assert stride_range.requirement == "Stride height and width must be in the range [1, 3]"
    assert stride_range.name == "stride_range"
    assert requirements_of(stride_range) == [stride_range.requirement]


def test_bool_constraint_refuses_with_the_bare_requirement():
    assert int8_weights(conv((1, 1))) == Verdict(False, "Weights must be int8")


def test_all_of_returns_the_first_refusal_and_lists_requirements():
    both = all_of(stride_range, int8_weights)
    assert both(conv((4, 4))).reason.startswith("Stride height")
    assert both(conv((1, 1))).reason == "Weights must be int8"
    assert requirements_of(both) == [stride_range.requirement, "Weights must be int8"]
    assert both(conv((1, 1), "int8")).ok


def test_verdict_helpers():
    assert Verdict.accept() == Verdict(True, "")
    assert Verdict.refuse("too big") == Verdict(False, "too big")
    assert as_verdict(True) == Verdict(True)
    assert as_verdict(False, stride_range).reason == "stride_range returned False"


def test_bad_check_results_and_exceptions_are_check_errors():
    with pytest.raises(CheckError, match="returned 3; a check returns a Verdict or a bool"):
        as_verdict(3, stride_range)
    with pytest.raises(CheckError, match="reason must be a string"):
        Verdict(False, 3)

    def broken(call):
        return call.attrs.no_such_attr

    with pytest.raises(CheckError, match=r"check broken raised on nn.conv2d: AttributeError"):
        run_check(broken, conv((1, 1)))
    with pytest.raises(CheckError, match="takes checks"):
        all_of(stride_range, "not a check")
