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
    (conv,) = [r for r in exe.report.rows if r.op == "QLinearConv"]
    assert conv.target == "ref"  # the input's layout transpose may run on the NPU
    assert "sum exactly in int32" in conv.reason
    feeds = feeds_for(mod, 0)
    want = P.interpret(mod, feeds)[0]
    assert P.build(mod, "llvm").run(*feeds.values())[0].tobytes() == want.tobytes()
    plain = P.build(mod, "llvm -isa=plain")  # the vector kernel as generic IR (no x86 intrinsic)
    assert "VCONV" in {k.split()[0] for k in plain.steps[0].region.kernels}
    assert plain.run(*feeds.values())[0].tobytes() == want.tobytes()


NETS_WITH_VARIANTS = [
    "mobilenet_v2_035_96.qdq_s8s8_pc.onnx",
    "mobilenet_v2_035_96.qdq_u8s8_pt.onnx",
    "mobilenet_v2_035_96.qop_u8s8_pc.onnx",
    "resnet_mini_64.qdq_s8s8_pc.onnx",
    "torch_mobilenetv2_64.qdq_s8s8_pc.onnx",
]


@pytest.mark.parametrize("host", ["avx2", "vnni"])
@pytest.mark.parametrize("name", NETS_WITH_VARIANTS)
def test_an_npu_target_runs_quantized_onnx_as_integer_networks_by_default(
    name, host, monkeypatch
):
    """The default import reproduces this CPU's ONNX Runtime (for CPU-only builds) and, where
    that differs from integer semantics, offers the integer-semantics import; a target with the
    NPU builds that one: >= 99% of the MACs on the NPU on any host, bit-exact with the
    interpreter on the variant, and the report says per output how it relates to ONNX Runtime
    here. Both kinds of host are forced on every machine (the default follows
    ``ort_int8_kernel()``); the real ONNX Runtime is the oracle for the kind this CPU is."""
    import partita.frontends.onnx.frontend as frontend
    from partita.backends.npu import semantics_for
    from partita.frontends.onnx import compare_semantics

    here = ort_int8_kernel()
    monkeypatch.setattr(frontend, "ort_int8_kernel", lambda: host)
    path = models("nets", name)[0]
    mod = from_onnx(path)
    exe = P.build(mod, "npu, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) >= 0.99 * summary["macs"]
    feeds = feeds_for(mod, 0)
    variant = semantics_for(mod, "npu, ref")
    assert _accumulate(variant) <= {("qnn.conv2d", "exact"), ("qnn.dense", "exact")}
    got = exe.run(*feeds.values())[0]
    assert got.tobytes() == P.interpret(variant, feeds)[0].tobytes()
    (cmp,) = compare_semantics(mod, feeds)
    notes = exe.report.notes
    if variant is mod:  # ONNX Runtime here already computes integer semantics
        assert "integer_semantics" not in mod.attrs and not notes and cmp["equal"]
    else:
        assert notes and "integer semantics" in notes[0]
        assert "equals ONNX Runtime" in notes[1] or "may differ from ONNX Runtime" in notes[1]
        if "equals ONNX Runtime" in notes[1]:  # a claim of equality holds on any input
            assert cmp["equal"]
        if not cmp["equal"]:
            assert "may differ from ONNX Runtime" in notes[1] and cmp["max_lsb"] > 0
        assert ("saturates int16 pairs" in notes[1]) == (host == "avx2")
    # CPU-only builds keep reproducing this machine's ONNX Runtime bit for bit
    cpu = P.build(mod, "ref")
    assert not cpu.report.notes
    if host == here:
        (want,) = ort_run(path, feeds, "enable_all")
        assert cpu.run(*feeds.values())[0].tobytes() == want.tobytes()
    else:
        assert cpu.run(*feeds.values())[0].tobytes() == P.interpret(mod, feeds)[0].tobytes()


def test_an_explicit_ort_cpu_keeps_that_runtime_everywhere():
    path = models("nets", "mobilenet_v2_035_96.qdq_s8s8_pc.onnx")[0]
    mod = from_onnx(path, ort_cpu=ort_int8_kernel())
    assert "integer_semantics" not in mod.attrs
    exe = P.build(mod, "npu, ref")
    feeds = feeds_for(mod, 0)
    assert exe.run(*feeds.values())[0].tobytes() == P.interpret(mod, feeds)[0].tobytes()
    assert not exe.report.notes
