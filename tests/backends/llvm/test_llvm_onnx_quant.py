"""ONNX Runtime's QuantizeLinear per tensor (qnn.quantize, semantics "onnx") in whole vectors of
16 (emit/int8/quant_vectors.py: x / scale in float32, rint, NaN -> 0, clamped, + zero
point; the rest of the elements one by one): the interpreter's bits for any float32, ties, NaN,
infinities and values far out of range included, to int8, uint8 and int16, every length's
tail, one and two threads, on any x86-64 CPU (`-isa=avx2`, emulated where the CPU lacks it)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import llvm_target
from partita.backends.llvm.lower.context import lower

import partita as P
from partita import relay
from partita.ir import Constant, TensorType, Var
from partita.ir.op import get_op


def _module(shape, dtype, scale, zp):
    x = Var("x", TensorType(shape, "float32"))
    q = get_op("qnn.quantize")(x, Constant(np.float32(scale)), Constant(np.int32(zp)), axis=-1,
                               out_dtype=dtype, semantics="onnx")
    return P.InferType()(relay.IRModule.from_expr(relay.Function([x], q)))


def _data(rng, shape, scale):
    data = (rng.standard_normal(shape) * 80 * scale).astype(np.float32)
    flat = data.reshape(-1)
    ties = (rng.integers(-300, 300, flat.size) + 0.5).astype(np.float32) * np.float32(scale)
    flat[::3] = ties[::3]  # x / scale lands on (or next to) a half
    flat[1::7] = rng.choice(np.float32([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0,
                                        3e-39, 40000 * scale, -40000 * scale]),
                            flat[1::7].size)
    return data


@pytest.mark.parametrize("shape,dtype,scale,zp", [
    ((1, 7, 5, 3), "int8", 0.05, 3),  # 105 elements: 6 vectors and a tail of 9
    ((15,), "uint8", 0.0173, 128),  # shorter than a vector: the tail only
    ((2, 16, 9), "int16", 0.0031, -700),
    ((1, 64, 40, 41), "int8", 0.021, -5),  # 104,960: split in chunks under -threads=2
    ((1, 33, 45, 47), "uint8", 0.37, 0),
])  # fmt: skip
@pytest.mark.parametrize("threads", [1, 2])
def test_vector_quantize_equals_the_interpreter(shape, dtype, scale, zp, threads):
    mod = _module(shape, dtype, scale, zp)
    quants = [k for k in lower(mod["main"], "avx2", threads=threads).kernels if k.kind == "QUANT"]
    assert quants and all(k.params.get("vector") for k in quants)  # the vector path is planned
    assert not any(k.params.get("vector") for k in lower(mod["main"], "plain").kernels)
    rng = np.random.default_rng(abs(hash((shape, dtype))) % 1000)
    exe = P.build(mod, llvm_target("avx2", f" -threads={threads}"))
    for _ in range(2):
        data = _data(rng, shape, scale)
        want = P.interpret(mod, [data])[0]
        got = exe.run(data)[0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_vector_quantize_equals_onnxruntime():
    """The same arithmetic as ONNX Runtime's QuantizeLinear on this CPU (finite inputs: the
    interpreter's NaN -> zero point is partita's documented choice, not checked against ORT)."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    shape, scale, zp = (3, 5, 71), 0.0437, -9
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, shape)],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [scale]),
         helper.make_tensor("z", TensorProto.INT8, [], [zp])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    mod = _module(shape, "int8", scale, zp)
    exe = P.build(mod, llvm_target("avx2"))
    rng = np.random.default_rng(5)
    data = _data(rng, shape, scale)
    data[~np.isfinite(data)] = 7.0
    want = sess.run(None, {"x": data})[0]
    assert np.array_equal(exe.run(data)[0], want)


@pytest.mark.parametrize("shape,dtype,scale,zp", [
    ((1, 7, 5, 3), "int8", 0.05, 3),
    ((15,), "uint8", 0.0173, 128),
    ((1, 64, 40, 41), "int8", 1e-30, -128),  # 104,960: split in chunks under -threads=2
    ((2, 33, 47), "uint8", 3.3e4, 255),
    ((3, 17), "int8", 0.1, 100000),  # a zero point outside the data's range
])  # fmt: skip
@pytest.mark.parametrize("threads", [1, 2])
def test_vector_dequantize_equals_the_table(shape, dtype, scale, zp, threads):
    """qnn.dequantize of 8-bit data to float32 (LUT, 16 elements a step in float64 arithmetic,
    emit/int8/quant_vectors.py ``lut_dequantize``; the tail through the table): the reference's
    float64 product rounded to float32, for every 8-bit value."""
    x = Var("x", TensorType(shape, dtype))
    out = get_op("qnn.dequantize")(x, Constant(np.float32(scale)), Constant(np.int32(zp)))
    mod = P.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))
    luts = [k for k in lower(mod["main"], "avx2", threads=threads).kernels if k.kind == "LUT"]
    assert luts and all(k.params.get("dequant") for k in luts)
    exe = P.build(mod, llvm_target("avx2", f" -threads={threads}"))
    info = np.iinfo(dtype)
    data = np.resize(np.arange(info.min, info.max + 1, dtype=dtype), shape)  # every value
    want = P.interpret(mod, [data])[0]
    got = exe.run(data)[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
