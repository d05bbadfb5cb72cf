"""``-isa=plain`` never emits x86 vector intrinsics: the pair-saturating vector convolution
(accumulate="vpmaddubsw", ONNX Runtime's AVX2 u8s8 semantics), forced onto VCONV on plain
(the routing to WMAC turned off), is generic vector IR (widened products, pair sums clamped to
int16) and equals the interpreter bit for bit; every plain build's IR is scanned."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from partita.backends import llvm as llvm_backend
from partita.backends.llvm.lower import wide_mac as q16_lower
from test_llvm_pairs_routing import _layer

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op

X86 = re.compile(r"llvm\.x86\.|<\s*(16|32|64)\s*x\s*\w+>\s*asm|avx512|\bvpmadd|\bvpdpbusd")


def _build_capturing(mod, target, monkeypatch):
    texts = []
    real = llvm_backend.compile_parts

    def spy(parts, *a, **k):
        made = [t() if callable(t) else t for t in parts]
        texts.extend(made)
        return real([(lambda s=s: s) for s in made], *a, **k)

    monkeypatch.setattr(llvm_backend, "compile_parts", spy)
    exe = P.build(mod, target)
    return exe, "\n".join(texts)


@pytest.mark.parametrize("mode", ["vpmaddubsw", "vpmaddubsw_tap"])
@pytest.mark.parametrize("op", ["conv", "dense"])
def test_plain_pairs_vconv_is_generic_and_exact(op, mode, monkeypatch):
    monkeypatch.setattr(q16_lower, "_vector_kernels_refuse", lambda *a: False)
    mod = _layer(op, mode, "tflite")
    exe, ir_text = _build_capturing(mod, "llvm -isa=plain", monkeypatch)
    kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert "VCONV" in kinds, kinds
    assert ir_text and not X86.search(ir_text), X86.search(ir_text)
    ty = exe.input_types[0]
    info = np.iinfo(ty.dtype)
    for s in (1, 2):
        data = np.random.default_rng(s).integers(info.min, info.max, ty.shape, dtype=ty.dtype,
                                                 endpoint=True)
        assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])


def test_the_scan_sees_avx2(monkeypatch):
    """The same build on -isa=avx2 does show x86 intrinsics (the scan can fail)."""
    monkeypatch.setattr(q16_lower, "_vector_kernels_refuse", lambda *a: False)
    _, ir_text = _build_capturing(_layer("conv", "vpmaddubsw", "tflite"), "llvm -isa=avx2",
                                  monkeypatch)
    assert X86.search(ir_text)


MODELS = Path(__file__).resolve().parents[2] / "models"
PLAIN_MODELS = [("onnx", "onnx/nets/mobilenet_v2_035_96.qop_u8s8_pc.onnx", "avx2"),
                ("onnx", "onnx/nets/mobilenet_v2_035_96.qop_u8s8_pc.onnx", "vnni"),
                ("onnx", "onnx/nets/mobilenet_v2_035_96.qdq_s8s8_pc.onnx", "avx2"),
                ("tflite", "tflite/nets/mobilenet_v2_035_96.tflite", None)]


@pytest.mark.parametrize("fmt,path,ort_cpu", PLAIN_MODELS)
def test_plain_builds_of_models_have_no_x86_code(fmt, path, ort_cpu, monkeypatch):
    """The test models' -isa=plain builds (ONNX Runtime's AVX2 semantics: pair saturation
    everywhere) hold no x86 intrinsic in their IR."""
    from partita.frontends import from_onnx, from_tflite

    mod = (from_onnx(MODELS / path, ort_cpu=ort_cpu) if fmt == "onnx"
           else from_tflite(MODELS / path))
    _, ir_text = _build_capturing(mod, "llvm -isa=plain", monkeypatch)
    assert ir_text and not X86.search(ir_text), X86.search(ir_text)


@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_plain_pairs_depthwise_is_generic_vector_ir_and_exact(semantics, strides, monkeypatch):
    """Depthwise with ONNX Runtime's tap-pair saturation (accumulate="vpmaddubsw", uint8
    data) on -isa=plain: the vector depthwise kernel (VDW, 16 channels per vector, tap pairs
    clamped to int16 by compare-and-select), not the scalar WMAC loops; no x86 intrinsic in the
    IR; equal to the interpreter on data over the whole 8-bit range, where pairs do saturate
    (the exact-sum layer's output differs). Runs on any CPU (plain code)."""
    rng = np.random.default_rng(7)
    c = 24  # one full vector and a padded one
    x = Var("x", TensorType((1, 9, 8, c), "uint8"))

    def layer(mode):
        w = rng.integers(-128, 128, (c, 3, 3, 1)).astype(np.int8)
        w[:, 0, :2, 0] = 127  # tap pairs whose products exceed int16 on large inputs
        y = get_op("qnn.conv2d")(
            x, Constant(w), Constant(np.int32(3)), Constant(np.int32(0)),
            Constant(np.float32(0.05)), Constant(np.float32(0.01)), strides=strides,
            padding=(1, 1, 1, 1), groups=c, data_layout="NHWC", kernel_layout="OHWI",
            accumulate=mode)  # fmt: skip
        y = get_op("nn.bias_add")(y, Constant(rng.integers(-3000, 3000, c).astype(np.int32)),
                                  axis=3)
        y = get_op("qnn.requantize")(y, Constant(np.float32(0.0005)), Constant(np.int32(0)),
                                     Constant(np.float32(0.3)), Constant(np.int32(0)), axis=3,
                                     out_dtype="uint8", semantics=semantics)  # fmt: skip
        return IRModule({"main": Function([x], y)})

    state = rng.bit_generator.state
    mod = layer("vpmaddubsw")
    rng.bit_generator.state = state
    exact = layer("exact")
    exe, ir_text = _build_capturing(mod, "llvm -isa=plain", monkeypatch)
    kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert "VDW" in kinds and "WMAC" not in kinds, kinds
    assert ir_text and not X86.search(ir_text), X86.search(ir_text)
    differs = False
    for s in (1, 2, 3):
        data = np.random.default_rng(s).integers(0, 255, (1, 9, 8, c), dtype=np.uint8,
                                                 endpoint=True)
        if s == 3:
            data[:] = 255
        want = P.interpret(mod, [data])[0]
        assert np.array_equal(exe.run(data)[0], want)
        differs |= not np.array_equal(want, P.interpret(exact, [data])[0])
    assert differs  # the pairs did saturate somewhere


def test_plain_residual_add_gathers_generically(monkeypatch):
    """LUT2 (a residual qnn.add) on -isa=plain gathers whole vectors with the generic
    llvm.masked.gather (no x86 intrinsic) and equals the interpreter, scalar tail included."""
    size = 16 * 9 + 5
    xs = [P.var(f"x{i}", (1, size), "int8") for i in range(2)]
    q = [P.const(np.float32(s)) for s in (0.05, 0.07, 0.09)]
    zp = P.const(np.int32(3))
    y = get_op("qnn.add")(xs[0], xs[1], q[0], zp, q[1], zp, q[2], zp)
    mod = IRModule.from_expr(Function(xs, y))
    exe, ir_text = _build_capturing(mod, "llvm -isa=plain", monkeypatch)
    assert "llvm.masked.gather" in ir_text and not X86.search(ir_text)
    rng = np.random.default_rng(11)
    for _ in range(4):
        data = [rng.integers(-128, 128, (1, size), dtype=np.int8) for _ in range(2)]
        assert np.array_equal(exe.run(*data)[0], P.interpret(mod, data)[0])
