"""partita's own TVM-style BYOC module (byoc_toy_npu.py) partitions graphs spelt either way
(``relay.op.nn.*`` as TVM code writes them, ``relay.nn.*`` as partita's) the same, keeps the
bits, and its checks refuse what they should."""

from __future__ import annotations

import numpy as np
import pytest
from byoc_toy_npu import partition_for_toy_npu
from partita.backends import unregister_backend

from partita import relay


@pytest.fixture
def toy_npu():
    yield
    unregister_backend("toy_npu")


def _graph(nn, kernel_zp=0, stride=1, rng=None):
    """x -> pad -> qnn.conv2d -> bias -> requantize -> clip -> max_pool2d -> tanh (host)."""
    rng = rng or np.random.default_rng(0)
    x = relay.var("x", shape=(1, 6, 6, 3), dtype="int8")
    w = relay.var("w", shape=(3, 3, 3, 4), dtype="int8")  # HWIO, bound as a param
    pad = nn.pad(x, relay.const(np.int8(0)), pad_width=((0, 0), (1, 1), (1, 1), (0, 0)))
    conv = relay.qnn.op.conv2d(
        pad,
        w,
        relay.const(0),
        relay.const(kernel_zp),
        relay.const(0.05),
        relay.const(0.02),
        kernel_size=(3, 3),
        channels=4,
        strides=(stride, stride),
        data_layout="NHWC",
        kernel_layout="HWIO",
    )
    bias = nn.bias_add(conv, relay.const(rng.integers(-50, 50, (4,), dtype="int32")), axis=3)
    rq = relay.qnn.op.requantize(
        bias,
        relay.const(0.001),
        relay.const(0),
        relay.const(0.05),
        relay.const(0),
        out_dtype="int8",
    )
    pool = nn.max_pool2d(relay.clip(rq, -128, 127), pool_size=(2, 2), strides=(2, 2), layout="NHWC")
    out = relay.tanh(relay.cast(pool, dtype="float32"))
    params = {"w": rng.integers(-8, 8, (3, 3, 3, 4), dtype="int8")}
    return relay.IRModule.from_expr(relay.Function([x, w], out)), params


@pytest.mark.parametrize("nn", [relay.op.nn, relay.nn], ids=["relay.op.nn", "relay.nn"])
def test_toy_npu_module_partitions_and_keeps_the_bits(toy_npu, nn):
    mod, params = _graph(nn)
    ref = relay.IRModule.from_expr(relay.build_module.bind_params_by_name(mod["main"], params))
    out = partition_for_toy_npu(mod, params)  # binds the params into mod, as TVM's do
    lifted = {n: f for n, f in out.functions.items() if "Compiler" in f.attrs}
    assert list(lifted) == ["tvmgen_default_toy_npu_main_0"]
    assert lifted["tvmgen_default_toy_npu_main_0"].attrs["Compiler"] == "toy-npu"
    text = str(out)
    assert "toy-npu.qnn_conv2d" in text and "toy-npu.max_pool2d" in text
    assert "tanh" in str(out["main"])  # the host op stays in main
    rng = np.random.default_rng(1)
    data = rng.integers(-128, 128, (1, 6, 6, 3), dtype="int8")
    np.testing.assert_array_equal(relay.interpret(out, [data]), relay.interpret(ref, [data]))


def test_toy_npu_checks_refuse_by_attributes_and_constants(toy_npu):
    for kwargs in ({"kernel_zp": 3}, {"stride": 3}):
        mod, params = _graph(relay.op.nn, **kwargs)
        out = partition_for_toy_npu(mod, params)
        assert "toy-npu.qnn_conv2d" not in str(out)
        assert "toy-npu.max_pool2d" in str(out)  # the pool still goes


def test_toy_npu_spellings_build_the_same_graph():
    a, _ = _graph(relay.op.nn)
    b, _ = _graph(relay.nn)
    assert relay.structural_equal(a, b)
