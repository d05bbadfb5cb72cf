"""relay.frontend.from_tflite gives TVM's TFLite graph (HWIO regular convolution weights, a
scalar 0 for an all-zero kernel zero point) with the same bits as partita's own import."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from partita import relay
from partita.ir import Call
from partita.ir.visitor import post_order

MODEL = Path(__file__).parents[1] / "models/tflite/nets/mobilenet_v1_025_128.tflite"


def _convs(mod):
    return [n for n in post_order(mod["main"]) if type(n) is Call and n.op.name == "qnn.conv2d"]


def test_from_tflite_gives_tvms_graph_with_the_same_bits():
    tvm_mod, params = relay.frontend.from_tflite(str(MODEL))
    own, _ = relay.frontend.from_tflite(str(MODEL), layout="tflite")
    assert params == {}
    regular = [c for c in _convs(tvm_mod) if c.attrs.groups == 1]
    assert regular and all(c.attrs["kernel_layout"] == "HWIO" for c in regular)
    assert all(c.args[3].data.ndim == 0 for c in regular)  # the kernel zero point
    own_regular = [c for c in _convs(own) if c.attrs.groups == 1]
    assert all(c.attrs.kernel_layout == "OHWI" for c in own_regular)
    for t, o in zip(regular, own_regular):
        np.testing.assert_array_equal(t.args[1].data, np.transpose(o.args[1].data, (1, 2, 3, 0)))
    data = np.random.default_rng(0).integers(-128, 128, (1, 128, 128, 3), dtype="int8")
    np.testing.assert_array_equal(relay.interpret(tvm_mod, [data]), relay.interpret(own, [data]))


def test_a_non_zero_kernel_zero_point_stays_a_vector():
    x = relay.var("x", shape=(1, 4, 4, 2), dtype="int8")
    w = relay.const(np.ones((3, 1, 1, 2), "int8"))
    conv = relay.qnn.op.conv2d(
        x,
        w,
        relay.const(0),
        relay.const(np.array([0, 1, 0], "int32")),
        relay.const(0.5),
        relay.const(np.array([0.1, 0.2, 0.3], "float32")),
        kernel_size=(1, 1),
        channels=3,
        data_layout="NHWC",
        kernel_layout="OHWI",
    )
    mod = relay.frontend.tvm_graph(relay.IRModule.from_expr(conv))
    out = mod["main"].body
    assert out.args[3].data.shape == (3,) and out.attrs.kernel_layout == "HWIO"
    data = np.random.default_rng(1).integers(-128, 128, (1, 4, 4, 2), dtype="int8")
    ref = relay.IRModule.from_expr(conv)
    np.testing.assert_array_equal(relay.interpret(mod, [data]), relay.interpret(ref, [data]))
