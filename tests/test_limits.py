"""The memory budget: absurd shapes, pads and dilations are refused before any allocation."""

from __future__ import annotations

import numpy as np
import pytest

import partita as P
from partita.limits import MemoryBudgetError, check_bytes, memory_budget, parse_bytes


def conv_text(pad: int, dilation: int) -> str:
    return f"""
def @main(%x: Tensor[(1, 8, 8, 4), int8]) {{
  qnn.conv2d(%x, meta[relay.Constant][0], 0, 0, 0.1f, 0.1f, padding=[{pad}, {pad}, {pad}, {pad}],
             dilation=[{dilation}, {dilation}], data_layout="NHWC", kernel_layout="OHWI",
             out_dtype="int32")
}}"""


WEIGHT = [np.ones((4, 3, 3, 4), np.int8)]


@pytest.mark.parametrize("pad, dilation", [(2**20, 2**20), (2**31, 1), (2**40, 1)])
def test_huge_pads_and_dilations_are_refused_at_type_inference(pad, dilation):
    with pytest.raises(
        MemoryBudgetError,
        match=r"qnn.conv2d.*would need .* over the memory "
        r"budget of 4.0 GiB",
    ):
        P.InferType()(P.parse(conv_text(pad, dilation), WEIGHT))


def test_huge_pad_op_and_huge_inputs_are_refused():
    text = """def @main(%x: Tensor[(1, 8), float32]) {
  nn.pad(%x, 0f, pad_width=[[0, 0], [0, 1099511627776]])
}"""
    with pytest.raises(MemoryBudgetError, match="nn.pad"):
        P.InferType()(P.parse(text))


def test_the_budget_is_configurable(monkeypatch):
    monkeypatch.setenv("PARTITA_MEMORY_BUDGET", "1k")
    assert memory_budget() == 1024
    with pytest.raises(MemoryBudgetError, match="over the memory budget of 1.0 KiB"):
        P.InferType()(P.parse(conv_text(4, 1), WEIGHT))
    monkeypatch.setenv("PARTITA_MEMORY_BUDGET", "lots")
    with pytest.raises(MemoryBudgetError, match="write a size"):
        check_bytes(1, "x")
    assert parse_bytes("2g") == 2 << 30 and parse_bytes("512MB") == 512 << 20


def test_a_reasonable_model_is_untouched():
    out = P.InferType()(P.parse(conv_text(1, 2), WEIGHT))
    assert out["main"].body.checked_type.shape == (1, 6, 6, 4)


def test_onnx_nodes_without_outputs_and_huge_inputs_are_refused():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from partita.frontends import from_onnx

    def model(dim, outputs):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, dim])
        scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
        nodes = [helper.make_node("Relu", ["x"], outputs), helper.make_node("Relu", ["x"], ["y"])]
        graph = helper.make_graph(nodes, "g", [x], [y], [scale])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    with pytest.raises(P.PartitaError, match=r"node #0 \(Relu ''\) has no outputs"):
        from_onnx(model(4, []))
    with pytest.raises(MemoryBudgetError, match="graph input 'x'"):
        from_onnx(model(2**40, ["z"]))
    ok = from_onnx(model(4, ["z"]))  # the same graph, sized sensibly, imports and runs
    x = np.array([[-1.0, 0.0, 2.0, -3.0]], np.float32)
    assert ok["main"].params[0].checked_type.shape == (1, 4)
    assert np.array_equal(P.interpret(ok, [x])[0], np.maximum(x, 0))
