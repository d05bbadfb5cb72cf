"""Pair-saturating qnn.conv2d / qnn.dense (accumulate="vpmaddubsw" / "vpmaddubsw_tap", ONNX
Runtime's AVX2 u8s8 kernels) with symmetric weights that the 8-bit vector kernels refuse go to
WMAC (q16_lower._vector_kernels_refuse): -isa=plain, a raw int32 accumulator, grouped
convolutions that are not depthwise,
depthwise ones of int8 data. Each equals the interpreter bit for bit on data over the whole
8-bit range (pairs do saturate); what the vector kernels take stays on them; and the routing
agrees with lower.mac exactly: whatever mac lowered before is lowered the same way, whatever it
refused for pair saturation is WMAC now."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import build_graph, llvm_target
from partita.backends.llvm.lower import wide_mac as q16_lower
from partita.backends.llvm.lower.context import lower

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op
from partita.passes.infer_type import infer_type

F32, I32 = np.float32, np.int32
MODES = ("vpmaddubsw", "vpmaddubsw_tap")
VECTOR_ISAS = ("vnni", "avx2")
GEO = {"hw": (5, 6), "k": (3, 3), "strides": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1)}


def _layer(op: str, mode: str, semantics: str = "tflite", data: str = "uint8", seed: int = 0):
    """build_graph's fused layer: 8 input channels, 16 outputs, int8 weights, zero weight zero
    points, bias, per-channel requantize to int8."""
    geo = {"rows": 5} if op == "dense" else GEO
    return build_graph(op, data, 8, 16, geo, seed, True, None, semantics=semantics,
                       accumulate=mode)[0]


def _grouped(mode: str, groups: int, cin: int, cout: int, data: str = "uint8",
             semantics: str | None = "tflite", seed: int = 0):
    """A grouped convolution (NHWC, OHWI) with bias, [requantize to int8 (semantics), clip];
    semantics None: the int32 accumulator plus bias is the output."""
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((1, 5, 6, cin), data))
    w = rng.integers(-128, 128, (cout, 3, 3, cin // groups)).astype(np.int8)
    info = np.iinfo(data)
    y = get_op("qnn.conv2d")(
        x, Constant(w), Constant(I32(rng.integers(info.min, info.max + 1))), Constant(I32(0)),
        Constant(F32(0.05)), Constant(F32(0.01)), strides=(1, 1), padding=(1, 1, 0, 1),
        groups=groups, data_layout="NHWC", kernel_layout="OHWI", accumulate=mode,
    )  # fmt: skip
    y = get_op("nn.bias_add")(y, Constant(rng.integers(-3000, 3000, cout).astype(I32)), axis=3)
    if semantics is not None:
        y = get_op("qnn.requantize")(y, Constant(F32(0.0005)), Constant(I32(0)),
                                     Constant(F32(0.08)), Constant(I32(-3)), axis=3,
                                     out_dtype="int8", semantics=semantics)  # fmt: skip
        y = get_op("clip")(y, a_min=-100.0, a_max=120.0)
    return IRModule({"main": Function([x], y)})


def _check(mod, isa: str, kind: str, seed: int = 1) -> None:
    """``llvm -isa=isa`` builds ``mod`` with a ``kind`` kernel (WMAC: and none of the 8-bit MAC
    ones) and equals the interpreter on data over the whole 8-bit range."""
    exe = P.build(mod, llvm_target(isa))
    assert [s.target for s in exe.steps] == ["llvm"]
    kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert kind in kinds, kinds
    if kind == "WMAC":
        assert not kinds & {"CONV", "DWCONV", "FC", "VCONV", "VDW", "IM2COL"}, kinds
    ty = exe.input_types[0]
    info = np.iinfo(ty.dtype)
    for s in (seed, seed + 1):
        data = np.random.default_rng(s).integers(info.min, info.max, ty.shape, dtype=ty.dtype,
                                                 endpoint=True)
        got, want = exe.run(data)[0], P.interpret(mod, [data])[0]
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("semantics", ["tflite", "onnx", "tflite_builtin"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["conv", "dense"])
def test_plain_isa_takes_pairs_on_generic_vector_kernels(op, mode, semantics):
    """-isa=plain runs pair saturation on the vector convolution written as generic IR (no
    x86 intrinsic: the kernel's isa is plain), every output stage, the float32 one ("onnx")
    included."""
    mod = _layer(op, mode, semantics)
    _check(mod, "plain", "VCONV")
    fn = mod["main"]
    infer_type(fn)
    isas = {k.params.get("isa") for k in lower(fn, "plain", 1).kernels if k.kind == "VCONV"}
    assert isas == {"plain"}, isas


@pytest.mark.parametrize("isa", VECTOR_ISAS)
@pytest.mark.parametrize("data", ["uint8", "int8"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["conv", "dense"])
def test_tflite_builtin_requantize_on_vector_isas(isa, op, mode, data):
    """The vector kernels' "tflite_builtin" output stage (ties upward twice) after pairs."""
    _check(_layer(op, mode, "tflite_builtin", data), isa, "VCONV")


@pytest.mark.parametrize("isa", ["plain", *VECTOR_ISAS])
@pytest.mark.parametrize("mode", MODES)
def test_grouped_convolutions_that_are_not_depthwise(isa, mode):
    """groups=2 over 8 input channels (4 per group, 3 or 6 outputs per group)."""
    _check(_grouped(mode, 2, 8, 6), isa, "WMAC")
    _check(_grouped(mode, 2, 8, 12, semantics="onnx", seed=3), isa, "WMAC")


@pytest.mark.parametrize("isa", ["plain", *VECTOR_ISAS])
def test_depthwise_pairs_the_vector_kernels_refuse(isa):
    """A channel multiplier of 2 (groups = input channels, not output channels) and int8 data
    (fbgemm's depthwise tap pairs read raw uint8 activations only)."""
    _check(_grouped("vpmaddubsw", 8, 8, 16), isa, "WMAC")
    _check(_grouped("vpmaddubsw", 8, 8, 8, data="int8", seed=2), isa, "WMAC")


@pytest.mark.parametrize("isa", ["plain", *VECTOR_ISAS])
@pytest.mark.parametrize("mode", MODES)
def test_raw_accumulators(isa, mode):
    """No requantize: the int32 accumulator (plus bias), where pairs do saturate."""
    mod = _grouped(mode, 1, 8, 16, semantics=None)
    _check(mod, isa, "WMAC")
    exact = _grouped("exact", 1, 8, 16, semantics=None)
    x = np.full((1, 5, 6, 8), 255, np.uint8)
    assert not np.array_equal(P.interpret(mod, [x])[0], P.interpret(exact, [x])[0])


def _kinds(mod, isa: str) -> list[str]:
    fn = mod["main"]
    infer_type(fn)
    return [k.kind for k in lower(fn, isa, 1).kernels]


@pytest.mark.parametrize("isa", VECTOR_ISAS)
@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
@pytest.mark.parametrize("mode", MODES)
def test_what_the_vector_kernels_take_stays_on_them(isa, mode, semantics):
    """Ungrouped uint8 convolutions and dense layers: VCONV (an odd channel count through an
    IM2COL copy for "vpmaddubsw"); depthwise uint8 "vpmaddubsw": VDW."""
    assert _kinds(_layer("conv", mode, semantics), isa) == ["VCONV"]
    assert _kinds(_layer("dense", mode, semantics), isa) == ["VCONV"]
    odd = build_graph("conv", "uint8", 3, 16, GEO, 4, False, None, semantics=semantics,
                      accumulate=mode)[0]
    assert _kinds(odd, isa) == (["IM2COL", "VCONV"] if mode == "vpmaddubsw" else ["VCONV"])
    if mode == "vpmaddubsw":
        assert _kinds(_grouped(mode, 8, 8, 8, semantics=semantics), isa) == ["VDW"]
    _check(_layer("conv", mode, semantics), isa, "VCONV")


def test_float_stages_with_exact_sums_stay_on_the_vector_kernels():
    """Exact sums with the float32 'onnx' output stage are no pair saturation: still mac's
    vector kernel, -isa=plain's generic one included."""
    _check(_layer("conv", "exact", "onnx"), "plain", "VCONV")


def _cases():
    """Pair-saturating layers over the dimensions the routing looks at."""
    for op in ("conv", "dense"):
        for mode in MODES:
            for data in ("uint8", "int8"):
                for sem in ("tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm",
                            "onednn"):
                    yield _layer(op, mode, sem, data)
    for mode in MODES:
        for groups, cin, cout, data in ((1, 3, 5, "uint8"), (2, 8, 6, "uint8"),
                                        (8, 8, 8, "uint8"), (8, 8, 8, "int8"),
                                        (8, 8, 16, "uint8"), (4, 8, 4, "int8")):
            if mode == "vpmaddubsw_tap" and groups > 1 and (cin // groups) % 2:
                continue  # the type relation refuses it
            for sem in ("tflite", "onnx", None):
                yield _grouped(mode, groups, cin, cout, data, sem)


@pytest.mark.parametrize("isa", ["plain", "avx2", "vnni", "amx"])
def test_the_routing_agrees_with_mac(isa, monkeypatch):
    """With the routing off (lower_wide_mac declining as it did), every case mac lowers is
    lowered to the same kernels with it on, and every case mac refuses for pair saturation
    (or a grouped convolution's pairs) becomes one WMAC kernel. Only plans are made (lower),
    so the CPU need not run ``isa``."""
    routed = kept = 0
    for mod in _cases():
        new = _kinds(mod, isa)
        with monkeypatch.context() as m:
            m.setattr(q16_lower, "_vector_kernels_refuse", lambda *a: False)
            try:
                old = _kinds(mod, isa)
            except P.PartitaError as e:
                assert "pair saturation" in str(e) or "grouped convolution" in str(e), e
                assert new == ["WMAC"]
                routed += 1
                continue
        assert new == old and "WMAC" not in old
        kept += 1
    assert routed and (kept or isa == "plain"), (routed, kept)
