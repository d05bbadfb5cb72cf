"""Bad ONNX input gives PartitaErrors that name the problem; spans name the source node;
unsupported nodes are listed all at once. The byte fuzz is slow-marked."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx_cases import MODELS
from partita.frontends import from_onnx
from partita.frontends.onnx import ONNXError, ONNXFormatError, UnsupportedOperatorError

import partita as P
from partita.errors import PartitaError
from partita.ir import iter_calls


def make(nodes, inputs=None, inits=(), opset=17, domains=(), outputs=("y",)):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outputs], list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def test_corrupt_protobuf():
    with pytest.raises(ONNXFormatError, match="not an ONNX model"):
        from_onnx(b"\x08\x07garbage that is not a protobuf \xff\xff\xff")
    with pytest.raises(ONNXFormatError, match="no graph"):
        from_onnx(b"")


def test_unreadable_path_and_bad_argument(tmp_path):
    with pytest.raises(ONNXError, match="cannot read"):
        from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(ONNXError, match="takes a path, bytes or an onnx.ModelProto"):
        from_onnx(42)


def test_missing_initializer_names_the_node():
    m = make([helper.make_node("Conv", ["x", "W"], ["y"], name="conv0")])
    with pytest.raises(ONNXFormatError, match=r"#0 Conv 'conv0' reads 'W'.*missing initializer"):
        from_onnx(m)


def test_wrong_opset():
    m = make([helper.make_node("Relu", ["x"], ["y"])], opset=9)
    with pytest.raises(ONNXFormatError, match="opset 9; partita reads opsets 13 to"):
        from_onnx(m)


def test_unknown_domains_and_ops_are_listed_at_once():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("Frobnicate", ["a"], ["b"], name="frob", domain="org.example"),
             helper.make_node("Einsum", ["x"], ["c"], name="ein", equation="ij->ji"),
             helper.make_node("Add", ["b", "c"], ["y"], name="after")]
    m = make(nodes, domains=("org.example",))
    with pytest.raises(UnsupportedOperatorError) as e:
        from_onnx(m)
    assert [u[:3] for u in e.value.unsupported] == [(1, "org.example.Frobnicate", "frob"),
                                                   (2, "Einsum", "ein")]
    text = str(e.value)
    assert "2 unsupported nodes" in text and "unknown domain 'org.example'" in text
    m = make(nodes[:2] + [helper.make_node("Identity", ["b"], ["y"])])  # domain not imported
    with pytest.raises(UnsupportedOperatorError, match="not imported by the model"):
        from_onnx(m)


def test_a_node_with_more_or_fewer_inputs_than_its_schema_is_refused():
    """Found by the fuzzer (seed 1717, case 83872: a Mul turned into a Transpose of two
    inputs): the converters read only the inputs they know, so the extra one was dropped."""
    m = make([helper.make_node("Transpose", ["x", "x"], ["y"], name="t0", perm=[0, 1, 3, 2])])
    with pytest.raises(ONNXError, match=r"#0 Transpose 't0': has 2 inputs; ONNX's Transpose "
                                        r"takes 1"):
        from_onnx(m)
    m = make([helper.make_node("Add", ["x"], ["y"], name="a0")])
    with pytest.raises(ONNXError, match=r"#0 Add 'a0': has 1 inputs; ONNX's Add takes 2"):
        from_onnx(m)
    clip = helper.make_node("Clip", ["x", "", "hi"], ["y"], name="c0")  # optional inputs
    hi = numpy_helper.from_array(np.float32(1.0), "hi")
    assert from_onnx(make([clip], inits=[hi])) is not None


def test_dynamic_shape_needs_input_shapes():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 6])
    m = make([helper.make_node("Relu", ["x"], ["y"])], inputs=[x])
    with pytest.raises(ONNXError, match=r"'x' has a dynamic shape \['N', 4, 6, 6\]; pass "
                                        r"input_shapes"):
        from_onnx(m)
    mod = from_onnx(m, input_shapes={"x": (2, 4, 6, 6)})
    assert mod["main"].params[0].type_annotation.shape == (2, 4, 6, 6)
    with pytest.raises(ONNXError, match="does not fit"):
        from_onnx(m, input_shapes={"x": (2, 5, 6, 6)})
    with pytest.raises(ONNXError, match="not inputs of the model"):
        from_onnx(m, input_shapes={"z": (1,)})


def test_bad_operands_name_the_node():
    w = numpy_helper.from_array(np.zeros((4, 4, 3, 3), np.float32), "W")
    m = make([helper.make_node("Conv", ["x", "W"], ["y"], name="c", kernel_shape=[5, 5])],
             inits=[w])
    with pytest.raises(P.PartitaError, match=r"node #0 Conv 'c': kernel_shape \[5, 5\]"):
        from_onnx(m)
    s = numpy_helper.from_array(np.float32(-1.0), "s")
    m = make([helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q")], inits=[s])
    with pytest.raises(P.PartitaError, match="'q': y_scale must be positive"):
        from_onnx(m)


def test_spans_name_the_source_node():
    path = MODELS / "ops" / "conv_relu.qop_u8s8_pc.onnx"
    mod = from_onnx(path)
    names = {n.name for n in onnx.load(path).graph.node}
    conv = [c for c in iter_calls(mod["main"].body) if c.op.name == "qnn.conv2d"][0]
    assert conv.span.op_type == "QLinearConv" and conv.span.source in names
    assert "QLinearConv #" in str(conv.span)
    qdq = from_onnx(MODELS / "ops" / "conv.qdq_s8s8_pc.onnx")
    conv = [c for c in iter_calls(qdq["main"].body) if c.op.name == "qnn.conv2d"][0]
    assert conv.span.op_type == "Conv" and conv.span.source == "conv"
    rq = [c for c in iter_calls(qdq["main"].body) if c.op.name == "qnn.requantize"][0]
    assert rq.span.op_type == "QuantizeLinear"


def test_attrs_name_inputs_and_outputs():
    mod = from_onnx(MODELS / "ops" / "concat.onnx")
    assert mod.attrs["input_names"] == ("a", "b") and mod.attrs["output_names"] == ("y",)


SMALL = sorted((MODELS / "ops").glob("*.onnx"))[:40]


def _runs_as_typed(mod) -> None:
    """An accepted mutant is a typed module whose interpreter run (on zeros of its inputs'
    types) gives arrays of the declared output types, or refuses with a PartitaError."""
    from partita.backends.compiled import flat_types

    from partita.interpreter import interpret

    main = mod["main"]
    feeds = [np.zeros(p.checked_type.shape, p.checked_type.dtype) for p in main.params]
    if any(f.size > 1 << 20 for f in feeds):
        return
    try:
        outs = interpret(mod, feeds)
    except PartitaError:
        return
    want = flat_types(main.body.checked_type)
    assert len(outs) == len(want)
    for got, t in zip(outs, want):
        assert tuple(np.shape(got)) == tuple(t.shape) and np.asarray(got).dtype == t.dtype


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL), st.data())
def test_fuzzed_bytes_fail_cleanly(path, data):
    """Random byte edits of real models: from_onnx returns a module or raises a PartitaError."""
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    try:
        mod = from_onnx(bytes(raw))
    except PartitaError:
        return
    _runs_as_typed(mod)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL), st.data())
def test_fuzzed_graphs_fail_cleanly(path, data):
    """Structural edits (inputs dropped or renamed, attributes changed, initializers removed or
    reshaped, op types swapped): from_onnx returns a module or raises a PartitaError."""
    m = onnx.load(path)
    for _ in range(data.draw(st.integers(1, 3))):
        node = m.graph.node[data.draw(st.integers(0, len(m.graph.node) - 1))]
        edit = data.draw(st.sampled_from(["input", "attr", "init", "op", "dims"]))
        if edit == "input" and node.input:
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = data.draw(
                st.sampled_from(["", "nowhere", m.graph.input[0].name]))
        elif edit == "attr" and node.attribute:
            a = node.attribute[data.draw(st.integers(0, len(node.attribute) - 1))]
            a.CopyFrom(helper.make_attribute(a.name, data.draw(
                st.sampled_from([0, -3, 7, 2.5, "x", [1], [0, 0, 0, 0, 0], [-1, 2]]))))
        elif edit == "init" and m.graph.initializer:
            i = data.draw(st.integers(0, len(m.graph.initializer) - 1))
            if data.draw(st.booleans()):
                del m.graph.initializer[i]
            else:
                m.graph.initializer[i].dims.append(2)
        elif edit == "op":
            node.op_type = data.draw(st.sampled_from(["Conv", "Relu", "Gemm", "Concat", "Pad",
                                                      "QLinearConv", "Split", "Resize"]))
        elif edit == "dims":
            dims = m.graph.input[0].type.tensor_type.shape.dim
            if dims:
                dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = data.draw(
                    st.integers(0, 5))
    try:
        mod = from_onnx(m)
    except PartitaError:
        return
    _runs_as_typed(mod)
