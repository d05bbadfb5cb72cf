"""Composite target strings, tvmc style."""

from __future__ import annotations

import pytest
from common_graphs import registered
from partita.backends import Backend
from partita.partition import CompositeTarget, TargetError, TargetSpec, parse_target

NPU = Backend("npu_t", options={"config": "npu-256", "fast": False})
DSP = Backend("dsp_t")


@pytest.fixture(autouse=True)
def backends():
    with registered(NPU, DSP):
        yield


def test_targets_with_options_and_the_host_last():
    t = parse_target("npu_t -config=npu-512 -fast, dsp_t, llvm -mcpu=native")
    assert t.names == ["npu_t", "dsp_t"]
    assert t.targets[0].options == {"config": "npu-512", "fast": True}
    assert t.host == TargetSpec("llvm") and t.host.options == {"mcpu": "native"}
    assert str(t) == "npu_t -config=npu-512 -fast, dsp_t, llvm -mcpu=native"


def test_the_default_host_is_appended():
    assert parse_target("npu_t").host.name == "llvm"
    assert parse_target("llvm").targets == ()


def test_quoted_values_keep_commas_and_spaces():
    t = parse_target("npu_t -config='a, b', llvm")
    assert t.targets[0].options == {"config": "a, b"}


def test_a_composite_target_passes_through():
    t = parse_target("npu_t, llvm")
    assert parse_target(t) is t and isinstance(t, CompositeTarget)
    assert parse_target(["npu_t", "llvm"]).names == ["npu_t"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "non-empty string"),
        ("npu_t,, llvm", "empty backend"),
        ("npu_t, llvm,", "empty backend"),
        ("npu_t config=x", "must look like -key=value"),
        ("npu_t -config=a -config=b", "given twice"),
        ("npu_t -colour=red", r"no option -colour \(its options: -config, -fast\)"),
        ("npu_t, npu_t", "names npu_t twice"),
        ("llvm, npu_t", "host llvm must come last"),
        ("gpu_x, llvm", "unknown backend 'gpu_x'"),
        ("npu_t -config='open", "unterminated quote"),
    ],
)
def test_bad_targets(text, message):
    with pytest.raises(TargetError, match=message):
        parse_target(text)


def test_the_declared_host_is_kept_off_the_backends_options():
    t = parse_target("npu_t -config=npu-512 -host=cortex-a55:1.8GHz, llvm")
    assert t.host_model == "cortex-a55:1.8GHz"
    assert t.targets[0].options == {"config": "npu-512"} and t.host.options == {}
    again = parse_target(str(t))  # printed on the host part, read back the same
    assert again.host_model == t.host_model and again == t
    assert parse_target("npu_t, llvm -host=measured").host_model == "measured"
    assert parse_target("npu_t, llvm").host_model is None
