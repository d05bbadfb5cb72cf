"""The simulator's compiled engine (backends/npu/native.py) computes the numpy simulator's bits:
per operation under hypothesis, on random chains, on every test network, with each kernel
family (VNNI, AVX2, plain) forced where this CPU runs it; what it cannot take runs in numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.npu.native import AUTO_MACS, NativeProgram, choose_engine, program_macs
from partita.backends.npu.simulator import run_program
from partita.backends.registry import BackendError
from partita.frontends import from_tflite
from test_npu_chains import KINDS, step
from test_npu_ops import conv_graph

import partita as P
from partita.ir import Function, IRModule, TensorType, Var

NETS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "nets"
ORDER = ["plain", "avx2", "vnni"]
RUNNABLE = ORDER  # a family this CPU lacks runs through exact stand-ins of its instructions


def npu_program(exe):
    (step_,) = [s for s in exe.steps if s.target == "npu"]
    return step_.region.program


def random_inputs(program, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for t in program.inputs:
        desc = program.tensors[t]
        info = np.iinfo(desc.dtype)
        out.append(rng.integers(info.min, info.max + 1, desc.shape).astype(desc.dtype))
    return out


def assert_engines_agree(program, isa=None, seed=0, all_native=True):
    native = NativeProgram(program, isa)
    if all_native:
        assert native.native_ops == len(program.ops)
    xs = random_inputs(program, seed)
    for a, b in zip(run_program(program, xs), native.run(xs)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    return native


@settings(max_examples=20, deadline=None)
@given(
    h=st.integers(3, 10),
    w=st.integers(3, 10),
    cin=st.integers(1, 20),
    cout=st.integers(1, 20),
    k=st.sampled_from([1, 2, 3, 5]),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    pad=st.integers(0, 2),
    depthwise=st.booleans(),
    relu6=st.booleans(),
    semantics=st.sampled_from(["tflite", "tflite_double", "onnx"]),
    isa=st.sampled_from(RUNNABLE),
)
def test_native_conv_equals_the_numpy_simulator(
    h, w, cin, cout, k, stride, dilation, pad, depthwise, relu6, semantics, isa
):
    if (k - 1) * dilation + 1 > min(h, w) + 2 * pad:
        return
    mod = conv_graph(h, w, cin, cout, k, stride, dilation, pad, depthwise, relu6,
                     kernel_seed=h + w, semantics=semantics)  # fmt: skip
    program = npu_program(P.build(mod, "npu -config=u65-256, ref"))
    # every ISA's vector kernels (plain's generic ones included) take every output stage
    native = assert_engines_agree(program, isa, seed=h * w, all_native=True)
    assert native.native_ops == 1


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6), st.integers(0, 1000))
def test_native_chains_equal_the_numpy_simulator(kinds, seed):
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((1, 6, 6, 4), "int8"))
    out = x
    for kind in kinds:
        out = step(kind, out, x, rng)
    mod = IRModule({"main": Function([x], out)})
    assert_engines_agree(npu_program(P.build(mod, "npu, ref")), seed=seed)


@pytest.mark.parametrize("pad_value", [-3, 7])
def test_explicit_pad_folds_when_it_pads_with_the_zero_point(pad_value):
    """A padded conv's pad (nn.pad fused by the compiler) becomes the kernel's padding when it
    pads with the input zero point (-3 here); any other value keeps the op in numpy."""
    rng = np.random.default_rng(5)
    consts = [
        np.int8(pad_value),
        rng.integers(-127, 128, (4, 3, 3, 3), dtype=np.int8),
        rng.integers(-900, 900, 4, dtype=np.int32),
    ]
    mod2 = P.parse(
        """
def @main(%x: Tensor[(1, 6, 6, 3), int8]) {
  %0 = nn.pad(%x, meta[relay.Constant][0], pad_width=[[0, 0], [1, 1], [2, 0], [0, 0]]);
  %1 = qnn.conv2d(%0, meta[relay.Constant][1], -3, 0, 0.05f, 0.01f, padding=[0, 0, 0, 0],
       data_layout="NHWC", kernel_layout="OHWI", out_dtype="int32");
  %2 = nn.bias_add(%1, meta[relay.Constant][2], axis=3);
  qnn.requantize(%2, 0.0005f, 0, 0.08f, 5, axis=3, out_dtype="int8")
}""",
        consts,
    )
    exe = P.build(mod2, "npu, ref")
    program = npu_program(exe)
    assert len(program.ops) == 1 and any(program.ops[0].params["explicit_pad"])
    native = assert_engines_agree(program, all_native=False)
    assert native.native_ops == (1 if pad_value == -3 else 0)
    data = random_inputs(program)
    assert np.array_equal(native.run(data)[0], P.interpret(mod2, data)[0])


NET_FILES = sorted(p.name for p in NETS.glob("*.tflite") if "float_io" not in p.name)


@pytest.mark.slow
@pytest.mark.parametrize("name", NET_FILES)
def test_every_test_network_runs_natively_with_the_numpy_bits(name):
    program = npu_program(P.build(from_tflite(str(NETS / name)), "npu, ref"))
    assert_engines_agree(program)


@pytest.mark.parametrize("isa", RUNNABLE)
def test_each_kernel_family_on_a_network(isa):
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    program = npu_program(P.build(mod, "npu, ref"))
    assert_engines_agree(program, isa, seed=3)


def test_the_engine_option_and_its_errors(monkeypatch):
    mod = from_tflite(str(NETS / "resnet_mini_64.tflite"))
    x = np.random.default_rng(1).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    for sim in ("native", "numpy"):
        exe = P.build(mod, f"npu -sim={sim}, ref")
        (region,) = [s.region for s in exe.steps if s.target == "npu"]
        assert region.engine == sim and region.summary()["simulator"] == sim
        assert np.array_equal(exe.run(x)[0], want)
    with pytest.raises(BackendError, match="sim"):
        P.build(mod, "npu -sim=fast, ref")
    program = npu_program(P.build(mod, "npu, ref"))
    assert program_macs(program) < AUTO_MACS and choose_engine(program, "auto") == "numpy"
    monkeypatch.setenv("PARTITA_NPU_SIM", "native")  # what a loaded executable consults
    exe = P.build(mod, "npu, ref")
    assert [s.region.engine for s in exe.steps if s.target == "npu"] == ["native"]
    monkeypatch.setenv("PARTITA_NPU_SIM", "fast")
    with pytest.raises(BackendError, match="unknown simulator engine 'fast'"):
        P.build(mod, "npu, ref")
