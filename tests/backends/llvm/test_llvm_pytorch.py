"""PyTorch's integer semantics on the LLVM backend: quantize_per_tensor's fused multiply-add
("fbgemm" QUANT), fbgemm's and oneDNN's float32 output stages in the vector kernels, fbgemm's
AVX2 depthwise tap pairs saturating to int16 (VDW), and the TorchScript int8 MobileNetV2 models
whole, bit for bit against the interpreter (which equals PyTorch on the CPU's engine)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.frontends import from_pytorch

import partita as P
from partita.ir import Function, IRModule, TensorType, Var
from partita.ops import get_op

MODELS = Path(__file__).resolve().parents[2] / "models" / "pytorch"
F32, I32 = np.float32, np.int32
# a tier this CPU lacks: through -emulate=yes (exact stand-ins of its instructions)
ISAS = ["avx2", "vnni"]


def assert_exact(mod, feeds, kinds=None):
    exe = P.build(mod, "llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    if kinds:
        assert kinds <= {k.split()[0] for k in exe.steps[0].region.kernels}
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, P.interpret(mod, feeds)):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@settings(max_examples=15, deadline=None)
@given(scale=st.floats(0.001, 0.5), zp=st.integers(0, 255), seed=st.integers(0, 999))
def test_fbgemm_quantize_is_one_fused_multiply_add(scale, zp, seed):
    x = Var("x", TensorType((4, 33), "float32"))
    out = get_op("qnn.quantize")(x, F32(scale), I32(zp), out_dtype="uint8", semantics="fbgemm")
    rng = np.random.default_rng(seed)
    data = (rng.integers(-300, 300, (4, 33)) * F32(scale) / 2).astype(F32)  # many ties
    data[0, :3] = [np.nan, np.inf, -np.inf]
    assert_exact(IRModule({"main": Function([x], out)}), [data], {"QUANT"})


def conv_module(semantics, depthwise, pairs, seed):
    rng = np.random.default_rng(seed)
    c = 20
    x = Var("x", TensorType((1, 7, 7, c), "uint8"))
    cout, groups = (c, c) if depthwise else (24, 1)
    w = rng.integers(-127, 128, (cout, 3, 3, 1 if depthwise else c)).astype(np.int8)
    conv = get_op("qnn.conv2d")(
        x, w, I32(60), I32(0), F32(0.05), F32(0.01), padding=(1, 1, 1, 1), groups=groups,
        data_layout="NHWC", kernel_layout="OHWI", out_dtype="int32",
        accumulate="vpmaddubsw" if pairs else "exact",
    )  # fmt: skip
    bias = get_op("nn.bias_add")(conv, rng.integers(-500, 500, cout).astype(I32), axis=3)
    s_aw = (rng.uniform(0.0004, 0.0006, cout)).astype(F32)
    zp_in = rng.uniform(-0.5, 0.5, cout).astype(F32) if semantics != "tflite" else I32(0)
    out = get_op("qnn.requantize")(bias, s_aw, zp_in, F32(0.08), I32(128), axis=3,
                                   out_dtype="uint8", semantics=semantics)
    return IRModule({"main": Function([x], out)}), rng.integers(0, 256, (1, 7, 7, c), np.uint8)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("semantics", ["fbgemm", "onednn"])
@pytest.mark.parametrize("depthwise", [False, True])
def test_pytorch_output_stages_and_depthwise_tap_pairs(isa, semantics, depthwise, monkeypatch):
    monkeypatch.setenv("PARTITA_LLVM_ISA", isa)
    monkeypatch.setenv("PARTITA_LLVM_EMULATE", "yes")  # changes nothing where the CPU runs it
    for seed in range(3):
        mod, x = conv_module(semantics, depthwise, pairs=depthwise or isa == "avx2", seed=seed)
        assert_exact(mod, [x], {"VDW" if depthwise else "VCONV"})


def test_depthwise_tap_pairs_do_saturate():
    """Inputs at 255 and weights at +-127 push pairs past int16: the kernel must saturate."""
    mod, _ = conv_module("fbgemm", True, True, 0)
    exact, _ = conv_module("fbgemm", True, False, 0)
    x = np.full((1, 7, 7, 20), 255, np.uint8)
    assert not np.array_equal(P.interpret(mod, [x])[0], P.interpret(exact, [x])[0])
    assert_exact(mod, [x], {"VDW"})


TS = {"ts_eager_mobilenetv2.pt": (1, 3, 64, 64), "ts_fx_mobilenetv2.pt": (1, 3, 64, 64),
      "ts_eager_x86_tv_mobilenetv2_035.pt": (1, 3, 96, 96)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TS))
@pytest.mark.parametrize("vnni", [None, False])
def test_torchscript_int8_models_build_for_llvm_bit_exactly(name, vnni):
    """The CPU's own engine (None) and AVX2's pair saturation (False) on whatever CPU runs it."""
    mod = from_pytorch(str(MODELS / name), example_inputs=[TS[name]], avx512_vnni=vnni)
    rng = np.random.default_rng(7)
    assert_exact(mod, [rng.standard_normal(TS[name]).astype(F32)], {"QUANT", "VCONV", "VDW"})
