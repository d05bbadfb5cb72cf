"""A 1 x 1 float convolution (+ bias, relu) whose only reader is a zero-padded 3 x 3 one writes
straight into the padded image (lower/float_halos.py; ResNet's bottleneck): no FPAD kernel, the
border zeroed by the product. Against the interpreter on every tier forced, one and two threads
(row and panel chunks), bytes equal to the build that keeps the FPAD copy, and against ONNX
Runtime for the ONNX form."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from drivers import alternate_drivers
from partita.backends.llvm.emit.float import chunks
from partita.backends.llvm.lower import float_conv

import partita as P
from partita import relay

context = importlib.import_module("partita.backends.llvm.lower.context")
TIERS = ["amx", "vnni", "avxvnni", "avx2", "plain"]


def _bottleneck(h, w, cin, mid, cout, pad, seed=0):
    """NHWC: two 1 x 1 convolutions (the first's bytes free for the padded image: the border
    must be zeroed on every run), relu(conv1x1(.) + b1) -> conv (3 x 3 or 5 x 5, ``pad`` =
    top, left, bottom, right) + b2."""
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(1, h, w, cin))

    def const(*shape):
        return relay.const(rng.standard_normal(shape).astype(np.float32))

    y = x
    for _ in range(2):
        y = relay.nn.conv2d(y, const(1, 1, cin, cin), data_layout="NHWC", kernel_layout="HWIO")
    y = relay.nn.conv2d(y, const(1, 1, cin, mid), data_layout="NHWC", kernel_layout="HWIO")
    y = relay.nn.relu(relay.nn.bias_add(y, const(mid), axis=3))
    k = 3 if max(pad) <= 1 else 5
    y = relay.nn.conv2d(y, const(k, k, mid, cout), padding=pad, data_layout="NHWC",
                        kernel_layout="HWIO")
    y = relay.nn.bias_add(y, const(cout), axis=3)
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    return relay.transform.InferType()(mod), (1, h, w, cin)


def _labels(exe) -> list[str]:
    return [str(label) for s in exe.steps for label in (getattr(s.region, "kernels", None) or [])]


def _run_both_drivers(exe, a):
    alternate_drivers(exe, 2)  # the worker's driver and the one-thread one, whatever the load
    return [exe.run(a)[0] for _ in range(4)]


# 14 x 14: rows in chunks (196 rows, 64 channels); 7 x 9 with 256 channels: panel chunks; an
# uneven pad of a 5 x 5 kernel (top 2, left 1, bottom 0, right 2)
SHAPES = {
    "rows": (14, 14, 32, 64, 48, [1, 1, 1, 1]),
    "panels": (7, 9, 64, 256, 32, [1, 1, 1, 1]),
    "uneven": (6, 5, 16, 32, 16, [2, 1, 0, 2]),
}


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_product_into_padded_image(monkeypatch, tmp_path, tier, shape):
    mod, xs = _bottleneck(*SHAPES[shape])
    a = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    want = P.interpret(mod, [a])[0]
    scale = float(np.abs(want).max())
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setattr(float_conv, "SPLIT_MACS", 1 << 12)  # small products split too,
    monkeypatch.setattr(chunks, "CHUNK_MACS", 1 << 12)  # in many chunks
    target = f"llvm -isa={tier} -emulate=yes"
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "fused"))
    one = P.build(mod, target)
    assert not any("fpad" in label for label in _labels(one)), _labels(one)
    got = one.run(a)[0]
    assert float(np.abs(got - want).max()) <= 1e-5 * scale
    two = P.build(mod, target + " -threads=2")
    assert all(o.tobytes() == got.tobytes() for o in _run_both_drivers(two, a))
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "copied"))
    monkeypatch.setattr(context, "float_into_pads", lambda plan: None)
    copied = P.build(mod, target)
    assert any("fpad" in label for label in _labels(copied))
    assert copied.run(a)[0].tobytes() == got.tobytes()


def test_a_value_read_twice_keeps_its_copy():
    """The 1 x 1 product's value also an output: it keeps its own buffer and the FPAD copy."""
    mod, xs = _bottleneck(8, 8, 16, 32, 16, [1, 1, 1, 1])
    body = mod["main"].body
    inner = body.args[0].args[0]  # relu(...) read by the 3 x 3 convolution
    fn = relay.Function(mod["main"].params, relay.Tuple([body, inner]))
    mod2 = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    exe = P.build(mod2, "llvm")
    assert any("fpad" in label for label in _labels(exe))
    a = np.random.default_rng(2).standard_normal(xs).astype(np.float32)
    for got, want in zip(exe.run(a), P.interpret(mod2, [a])):
        assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_onnx_bottleneck_against_onnx_runtime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    from partita.frontends import from_onnx

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
             (("w1", (64, 32, 1, 1)), ("b1", (64,)), ("w2", (32, 64, 3, 3)), ("b2", (32,)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "bottleneck", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            [1, 32, 14, 14])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "bottleneck.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                     .SerializeToString())
    a = rng.standard_normal((1, 32, 14, 14)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None,
                                                                                   {"x": a})[0]
    for tier in TIERS:
        exe = P.build(from_onnx(path), f"llvm -isa={tier} -emulate=yes")
        assert not any("fpad" in label for label in _labels(exe))
        got = exe.run(a)[0]
        assert float(np.abs(got - want).max()) <= 1e-4 * float(np.abs(want).max())
