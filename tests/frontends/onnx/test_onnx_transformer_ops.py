"""One-node ONNX models of the transformer ops (frontends/onnx/ops_transformer.py,
ops_attention.py, ops_dynquant.py) against ONNX Runtime: float within rounding, integer outputs
bit-exact."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_cases import ort_run
from partita.frontends.onnx import UnsupportedOperatorError, from_onnx

import partita

TYPES = {
    "float32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "uint8": TensorProto.UINT8,
    "int8": TensorProto.INT8,
    "bool": TensorProto.BOOL,
}


def model(nodes, inputs, outputs, inits=(), opset=17):
    """A model of ``nodes``; inputs/outputs as (name, dtype, shape) (output shape may be None)."""
    vi = [helper.make_tensor_value_info(n, TYPES[d], s) for n, d, s in inputs]
    vo = [helper.make_tensor_value_info(n, TYPES[d], s) for n, d, s in outputs]
    graph = helper.make_graph(
        nodes, "g", vi, vo, [numpy_helper.from_array(v, k) for k, v in dict(inits).items()]
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m.SerializeToString()


def check(m: bytes, feeds: dict, atol: float = 2e-6) -> None:
    want = ort_run(m, feeds, "disable_all")
    got = partita.interpret(from_onnx(m), feeds)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=atol)


RNG = np.random.default_rng(15)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def test_gather_embedding_and_negative_constant_indices():
    table = f32(10, 6)
    ids = np.array([[1, 9, 0], [3, 3, 2]], np.int64)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("Gather", ["emb", "sel"], ["y"], axis=1),
    ]
    m = model(
        nodes,
        [("ids", "int64", [2, 3])],
        [("y", "float32", None)],
        {"table": table, "sel": np.array([-1, 0], np.int64)},
    )
    check(m, {"ids": ids})


def test_mask_equal_not_where_expand_reduce_sum():
    nodes = [
        helper.make_node("Equal", ["mask", "zero"], ["eq"]),
        helper.make_node("Not", ["eq"], ["keep"]),
        helper.make_node("Where", ["keep", "x", "neg"], ["w"]),
        helper.make_node("Expand", ["w", "shape"], ["y"]),
        helper.make_node("Cast", ["mask"], ["m32"], to=TensorProto.INT32),
        helper.make_node("ReduceSum", ["m32", "axes"], ["n"], keepdims=0),
    ]
    m = model(
        nodes,
        [("mask", "int64", [2, 5]), ("x", "float32", [2, 5])],
        [("y", "float32", None), ("n", "int32", None)],
        {
            "zero": np.array(0, np.int64),
            "neg": np.array(-1e4, np.float32),
            "shape": np.array([3, 2, 5], np.int64),
            "axes": np.array([1], np.int64),
        },
    )
    check(m, {"mask": np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], np.int64), "x": f32(2, 5)})


@pytest.mark.parametrize("axis, shape", [(-1, (2, 5, 8)), (1, (2, 3, 4))])
def test_layer_normalization(axis, shape):
    norm = int(np.prod(shape[axis % len(shape) :]))
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis, epsilon=1e-5)
    m = model(
        [node],
        [("x", "float32", list(shape))],
        [("y", "float32", None)],
        {"g": f32(*shape[axis % len(shape) :]), "b": f32(*shape[axis % len(shape) :])},
    )
    assert norm > 1
    check(m, {"x": f32(*shape, scale=3.0)}, atol=1e-5)


def test_decomposed_layer_norm_pow_erf():
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]),
        helper.make_node("Sub", ["x", "mu"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Sqrt", ["var"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Erf", ["n"], ["y"]),
    ]
    m = model(
        nodes,
        [("x", "float32", [3, 16])],
        [("y", "float32", None)],
        {"two": np.array(2.0, np.float32)},
    )
    check(m, {"x": f32(3, 16)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    m = model([node], [("x", "float32", [4, 32])], [("y", "float32", None)], opset=20)
    check(m, {"x": f32(4, 32, scale=3.0)})


@pytest.mark.parametrize(
    "sa, sb", [((2, 3, 4, 5), (1, 3, 5, 6)), ((2, 1, 4, 5), (3, 5, 6)), ((2, 3, 4, 5), (5, 6))]
)
def test_matmul_batches(sa, sb):
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    m = model(
        [node], [("a", "float32", list(sa)), ("b", "float32", list(sb))], [("y", "float32", None)]
    )
    check(m, {"a": f32(*sa), "b": f32(*sb)})


def test_contrib_gelus_skip_layer_norm_fused_matmul():
    ms = "com.microsoft"
    nodes = [
        helper.make_node("BiasGelu", ["x", "bias"], ["g1"], domain=ms),
        helper.make_node("FastGelu", ["x", "bias"], ["g2"], domain=ms),
        helper.make_node("Gelu", ["x"], ["g3"], domain=ms),
        helper.make_node(
            "SkipLayerNormalization",
            ["g1", "g2", "gamma", "beta", "bias"],
            ["s"],
            domain=ms,
            epsilon=1e-6,
        ),
        helper.make_node(
            "FusedMatMul", ["s", "w"], ["y"], domain=ms, alpha=0.5, transA=0, transB=1
        ),
    ]
    m = model(
        nodes,
        [("x", "float32", [2, 3, 8])],
        [("g3", "float32", None), ("s", "float32", None), ("y", "float32", None)],
        {"bias": f32(8), "gamma": f32(8), "beta": f32(8), "w": f32(4, 8)},
    )
    check(m, {"x": f32(2, 3, 8, scale=2.0)}, atol=1e-5)


@pytest.mark.parametrize("mask", [None, "lengths", "raw"])
def test_attention(mask):
    b, s, h, heads = 2, 5, 8, 2
    inputs = [("x", "float32", [b, s, h])]
    names = ["x", "w", "bias"]
    feeds = {"x": f32(b, s, h)}
    if mask == "lengths":
        inputs.append(("m", "int32", [b]))
        feeds["m"] = np.array([5, 3], np.int32)
    elif mask == "raw":
        inputs.append(("m", "int32", [b, s]))
        feeds["m"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    names += ["m"] if mask else []
    node = helper.make_node("Attention", names, ["y"], domain="com.microsoft", num_heads=heads)
    m = model(
        [node],
        inputs,
        [("y", "float32", None)],
        {"w": f32(h, 3 * h, scale=0.5), "bias": f32(3 * h, scale=0.1)},
    )
    check(m, feeds, atol=1e-5)


def test_attention_with_past_is_unsupported_by_name():
    node = helper.make_node(
        "Attention",
        ["x", "w", "bias", "", "past"],
        ["y"],
        domain="com.microsoft",
        num_heads=2,
        name="att",
    )
    m = model(
        [node],
        [("x", "float32", [1, 2, 4]), ("past", "float32", [2, 1, 2, 1, 2])],
        [("y", "float32", None)],
        {"w": f32(4, 12), "bias": f32(12)},
    )
    with pytest.raises(UnsupportedOperatorError, match="Attention 'att'.*past"):
        from_onnx(m)


@pytest.mark.parametrize("kind", ["normal", "positive", "zeros", "tiny"])
def test_dynamic_quantize_linear_and_matmul_integer(kind):
    x = {
        "normal": f32(3, 4, 16, scale=2.0),
        "positive": np.abs(f32(3, 4, 16)),
        "zeros": np.zeros((3, 4, 16), np.float32),
        "tiny": f32(3, 4, 16, scale=1e-30),
    }[kind]
    w = RNG.integers(-128, 128, (16, 8)).astype(np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
        helper.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["acc"]),
    ]
    m = model(
        nodes,
        [("x", "float32", [3, 4, 16])],
        [
            ("q", "uint8", None),
            ("s", "float32", None),
            ("z", "uint8", None),
            ("acc", "int32", None),
        ],
        {"w": w, "wz": np.array(3, np.int8)},
    )
    check(m, {"x": x}, atol=0)


@pytest.mark.parametrize(
    "where",
    ["nan first", "nan inside", "+inf", "-inf", "+-inf", "nan and -inf", "all nan"],
)
def test_dynamic_quantize_linear_of_non_finite_inputs(where):
    """NaN never enters the range (MLAS's scan) and a range reaching -inf gives zero point 255
    (ONNX Runtime's ``std::max(0, std::min(255, NaN))``): the interpreter equals ONNX Runtime
    where its answer does not depend on which vector lane holds the NaN, and the llvm host equals
    the interpreter on every tier (forced; -emulate=yes where this CPU lacks one)."""
    x = f32(4, 8)
    if where == "all nan":
        x[:] = np.nan
    for spot, value in {"nan first": {(0, 0): np.nan}, "nan inside": {(1, 3): np.nan},
                        "+inf": {(2, 5): np.inf}, "-inf": {(2, 5): -np.inf},
                        "+-inf": {(0, 1): np.inf, (3, 2): -np.inf},
                        "nan and -inf": {(0, 0): np.nan, (2, 2): -np.inf}}.get(where, {}).items():
        x[spot] = value
    m = model([helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])],
              [("x", "float32", [4, 8])],
              [("q", "uint8", None), ("s", "float32", None), ("z", "uint8", None)])
    mod = from_onnx(m)
    got = [np.asarray(a) for a in partita.interpret(mod, {"x": x})]
    if where != "all nan":  # ORT: zero point 255 there, from a NaN its vector min kept
        want = ort_run(m, {"x": x}, "disable_all")
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    for isa in ("plain", "avx2", "vnni", "amx"):
        out = partita.build(mod, f"llvm -isa={isa} -emulate=yes").run(x)
        for g, o in zip(got, out):
            np.testing.assert_array_equal(np.asarray(o), g, err_msg=isa)


def test_dynamic_quantize_matmul_and_integer_to_float():
    ms = "com.microsoft"
    w = RNG.integers(-128, 128, (16, 8)).astype(np.int8)
    nodes = [
        helper.make_node(
            "DynamicQuantizeMatMul", ["x", "w", "ws", "wz", "bias"], ["y1"], domain=ms
        ),
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
        helper.make_node(
            "MatMulIntegerToFloat", ["q", "w", "s", "ws", "z", "wz", "bias"], ["y2"], domain=ms
        ),
    ]
    m = model(
        nodes,
        [("x", "float32", [2, 5, 16])],
        [("y1", "float32", None), ("y2", "float32", None)],
        {"w": w, "ws": np.array(0.02, np.float32), "wz": np.array(0, np.int8), "bias": f32(8)},
    )
    check(m, {"x": f32(2, 5, 16)}, atol=1e-6)


def test_bad_transformer_nodes_fail_naming_the_node():
    from partita.frontends.onnx import ONNXConversionError

    gather = helper.make_node("Gather", ["t", "i"], ["y"], name="emb")
    m = model(
        [gather],
        [("t", "float32", [4, 2])],
        [("y", "float32", None)],
        {"i": np.array([4], np.int64)},
    )
    with pytest.raises(ONNXConversionError, match="#0 Gather 'emb'.*out of range for axis 0"):
        from_onnx(m)
    ln = helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln")
    m = model([ln], [("x", "float32", [2, 8])], [("y", "float32", None)], {"g": f32(4)})
    with pytest.raises(ONNXConversionError, match="LayerNormalization 'ln'.*4 values.*8"):
        from_onnx(m)
    att = helper.make_node(
        "Attention", ["x", "w", "b"], ["y"], domain="com.microsoft", num_heads=3, name="att"
    )
    m = model(
        [att],
        [("x", "float32", [1, 2, 4])],
        [("y", "float32", None)],
        {"w": f32(4, 12), "b": f32(12)},
    )
    with pytest.raises(ONNXConversionError, match="Attention 'att'.*num_heads=3"):
        from_onnx(m)
    pw = helper.make_node("Pow", ["x", "e"], ["y"], name="cube")
    m = model(
        [pw], [("x", "float32", [3])], [("y", "float32", None)], {"e": np.array(3.0, np.float32)}
    )
    with pytest.raises(UnsupportedOperatorError, match="Pow 'cube': Pow with exponent 3.0"):
        from_onnx(m)
