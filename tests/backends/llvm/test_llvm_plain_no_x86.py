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
