"""from_onnx(ort_cpu=...): ONNX Runtime's uint8 x int8 kernels sum exactly on CPUs with VNNI and
saturate pairs of products to int16 (VPMADDUBSW) on x86-64 without it; the default import follows
this machine, as ONNX Runtime does. test_onnx_ops.py / test_onnx_nets.py hold every quantized
model against ONNX Runtime on whatever CPU runs them; here: the choice itself.
"""

from __future__ import annotations

import pytest
from onnx_cases import feeds_for, models, ort_run
from partita.frontends import from_onnx
from partita.frontends.onnx import ONNXError
from partita.frontends.onnx.ort_kernels import ort_int8_kernel

import partita as P
from partita.ir import iter_calls


@pytest.mark.parametrize(
    "flags,kernel",
    [
        ({"sse4_2", "avx2", "fma"}, "avx2"),  # Zen 3, Haswell .. Skylake client
        ({"avx2", "avx512f", "avx512bw"}, "avx2"),  # Skylake-SP: AVX-512 without VNNI
        ({"avx2", "avx512f", "avx512_vnni"}, "vnni"),  # Cascade Lake, Zen 4
        ({"avx2", "avx_vnni"}, "vnni"),  # Alder Lake
        ({"avx2", "amx_int8", "avx512_vnni"}, "vnni"),  # Sapphire Rapids
        ({"sse4_2"}, "vnni"),  # no AVX2: MLAS's SSE kernel widens to int16 first, exact
    ],
)
def test_kernel_from_cpu_flags(flags, kernel):
    assert ort_int8_kernel(flags) == kernel


def test_this_machine_is_detected():
    assert ort_int8_kernel() in ("avx2", "vnni")


def _accumulate(mod):
    return {(c.op.name, c.attrs.accumulate) for c in iter_calls(mod["main"])
            if c.op.name in ("qnn.conv2d", "qnn.dense")}


def test_avx2_marks_the_u8s8_kernels_but_not_depthwise():
    path = models("nets", "mobilenet_v2_035_96.qop_u8s8_pc.onnx")[0]
    avx2 = from_onnx(path, ort_cpu="avx2")
    marked = [c for c in iter_calls(avx2["main"]) if c.op.name == "qnn.conv2d"]
    for c in marked:
        depthwise = c.attrs.groups > 1
        assert c.attrs.accumulate == ("exact" if depthwise else "vpmaddubsw"), c.span
    assert _accumulate(from_onnx(path, ort_cpu="vnni")) == {("qnn.conv2d", "exact"),
                                                            ("qnn.dense", "exact")}


def test_int8_qoperator_kernels_stay_exact():
    # QLinearConv on int8 data runs MLAS's S8S8 kernel, which is exact; only QDQ groups see
    # their int8 activations rewritten to uint8
    qop = from_onnx(models("ops", "conv.qop_s8s8_pt.onnx")[0], ort_cpu="avx2")
    assert _accumulate(qop) == {("qnn.conv2d", "exact")}
    qdq = from_onnx(models("ops", "conv.qdq_s8s8_pc.onnx")[0], ort_cpu="avx2")
    assert _accumulate(qdq) == {("qnn.conv2d", "vpmaddubsw")}


def test_the_two_differ_where_pairs_saturate():
    path = models("ops", "conv.qop_u8s8_pc.onnx")[0]
    avx2, vnni = from_onnx(path, ort_cpu="avx2"), from_onnx(path, ort_cpu="vnni")
    feeds = feeds_for(avx2, 0)
    a, v = P.interpret(avx2, feeds)[0], P.interpret(vnni, feeds)[0]
    assert (a != v).any()
    (want,) = ort_run(path, feeds, "enable_all")
    here = avx2 if ort_int8_kernel() == "avx2" else vnni
    assert P.interpret(here, feeds)[0].tobytes() == want.tobytes()


def test_bad_option():
    with pytest.raises(ONNXError, match="ort_cpu must be one of"):
        from_onnx(models("ops", "conv.qop_u8s8_pc.onnx")[0], ort_cpu="avx512")


def test_the_npu_refuses_saturating_sums_and_llvm_compiles_them():
    path = models("ops", "conv.qop_u8s8_pc.onnx")[0]
    mod = from_onnx(path, ort_cpu="avx2")
    exe = P.build(mod, "npu, ref")
    assert "npu" not in {s.target for s in exe.steps}
    assert "sum exactly in int32" in exe.report.to_json()
    feeds = feeds_for(mod, 0)
    want = P.interpret(mod, feeds)[0]
    assert P.build(mod, "llvm").run(*feeds.values())[0].tobytes() == want.tobytes()
    plain = P.build(mod, "llvm -isa=plain")  # no vector kernels: the scalar WMAC kernel
    assert "WMAC" in {k.split()[0] for k in plain.steps[0].region.kernels}
    assert plain.run(*feeds.values())[0].tobytes() == want.tobytes()
