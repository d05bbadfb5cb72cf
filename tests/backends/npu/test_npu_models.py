"""The NPU on whole models: TFLite's interpreter is the oracle, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P

NETS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "nets"
FULLY_COVERED = {
    "mobilenet_v1_025_128",
    "mobilenet_v2_035_96",
    "mobilenet_v3_small_075_96",
    "resnet_mini_64",
    "mobilenet_v2_035_96_uint8",
}
# every 8-bit-I/O net in the folder (a net added there is tested without editing this file)
INT8_NETS = sorted(p.stem for p in NETS.glob("*.tflite") if not p.stem.endswith("_float_io"))


def tflite_reference(path, x):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(
        model_path=str(path), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def random_input(ty, seed):
    info = np.iinfo(ty.dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min, info.max, ty.shape, dtype=ty.dtype, endpoint=True)


@pytest.mark.parametrize("name", INT8_NETS)
@pytest.mark.parametrize("config", ["u55-256", "u65-256"])
def test_whole_nets_on_the_npu_equal_tflite(name, config, tmp_path):
    path = NETS / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={config}, ref")
    summary = exe.report.summary()
    if name in FULLY_COVERED:
        assert summary["macs_by_target"].get("npu", 0) == summary["macs"]  # every MAC on the NPU
        assert summary["partitions"] == 1
    exe.save(tmp_path / "m.partita")
    loaded = P.load(tmp_path / "m.partita")
    for seed in range(3):
        x = random_input(exe.input_types[0], seed)
        want = tflite_reference(path, x)
        assert np.array_equal(exe.run(x)[0], want)
        assert np.array_equal(loaded.run(x)[0], want)


@pytest.mark.parametrize("name", INT8_NETS)
@pytest.mark.parametrize("config", ["u55-128", "u65-512"])
def test_whole_nets_build_and_equal_tflite_on_the_other_presets(name, config):
    """Every int8 test net builds on every preset (SRAM never fails a build)."""
    path = NETS / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={config}, ref")
    x = random_input(exe.input_types[0], 7)
    assert np.array_equal(exe.run(x)[0], tflite_reference(path, x))


@pytest.mark.parametrize("config", ["u55-128", "u55-256", "u65-256", "u65-512"])
def test_a_map_larger_than_the_sram_is_cascaded_on_u55_and_spilled_on_u65(config):
    """big_map_288 (TFLite's converter) has a 288x288x64 map (5.3 MB), larger than every
    preset's SRAM. The U55 (no off-chip memory for feature maps) cascades it from the stem into
    the depthwise conv, a band of rows at a time, as Vela does; the U65 spills it to DRAM.
    Every MAC runs on the NPU, bit-exact with TFLite."""
    path = NETS / "big_map_288.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={config}, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) == summary["macs"]
    program = exe.steps[0].region.program
    big = [t for t in program.tensors if t.nbytes > 4 << 20]
    if config.startswith("u55"):
        assert big and all(0 < t.resident < 256 << 10 for t in big)
        assert program.sram_peak <= 4 << 20
    else:
        assert all(t.memory == "dram" for t in big)
    x = random_input(exe.input_types[0], 1)
    assert np.array_equal(exe.run(x)[0], tflite_reference(path, x))


def test_float_io_model_keeps_quantize_and_dequantize_on_the_cpu_with_reasons():
    exe = P.build(from_tflite(str(NETS / "mobilenet_v2_035_96_float_io.tflite")), "npu, ref")
    rows = exe.report.host_rows
    assert [r.op for r in rows] == ["QUANTIZE", "DEQUANTIZE"]
    assert all("no npu pattern contains" in r.reason for r in rows)
    x = np.random.default_rng(0).standard_normal(exe.input_types[0].shape).astype(np.float32)
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96_float_io.tflite"))
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_profile_reports_cycles_macs_and_bytes_per_op():
    exe = P.build(from_tflite(str(NETS / "mobilenet_v2_035_96.tflite")), "npu, ref")
    profile = exe.profile(random_input(exe.input_types[0], 0))
    npu = profile.totals["npu"]
    assert npu["macs"] == exe.report.summary()["macs"]
    assert npu["cycles"] > npu["macs"] / 256  # never faster than the MAC array's peak
    assert set(npu["bytes"]) == {"sram", "flash"}
    ops = profile.steps[0].ops
    assert all(0 <= op.metrics["utilisation"] <= 1 for op in ops)
    assert "CONV_2D #0" in ops[0].name


def test_tvm_ethos_n_style_pipeline_then_build():
    """MergeComposite(table) -> AnnotateTarget("npu") -> MergeCompilerRegions() ->
    PartitionGraph(), as TVM's partition_for_ethosn does, then build: same bits as TFLite."""
    from partita.backends import get_pattern_table
    from partita.partition import (
        AnnotateTarget,
        MergeCompilerRegions,
        MergeComposite,
        PartitionGraph,
    )

    from partita.passes import InferType, Sequential

    path = NETS / "mobilenet_v2_035_96.tflite"
    pipeline = Sequential(
        [
            InferType(),
            MergeComposite(get_pattern_table("npu")),
            AnnotateTarget(["npu"]),
            MergeCompilerRegions(),
            PartitionGraph(),
        ]
    )
    mod = pipeline(from_tflite(str(path)))
    compilers = [(f.attrs or {}).get("Compiler") for f in mod.functions.values()]
    assert compilers.count("npu") == 1
    exe = P.build(mod, "npu -config=u65-256, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = random_input(exe.input_types[0], 7)
    assert np.array_equal(exe.run(x)[0], tflite_reference(path, x))


ONNX_NETS = Path(__file__).resolve().parents[2] / "models" / "onnx" / "nets"


@pytest.mark.parametrize(
    "name",
    [
        "mobilenet_v2_035_96.qop_u8s8_pc",
        "mobilenet_v2_035_96.qdq_u8s8_pt",
        "resnet_mini_64.qop_s8s8_pt",
        "torch_mobilenetv2_64.qop_u8s8_pt",
    ],
)
def test_nchw_onnx_nets_run_on_the_npu_with_their_own_semantics(name):
    """NCHW QLinearConv / QDQ graphs are converted to NHWC before partitioning; ONNX Runtime's
    requantization (float32 scale, half to even) runs in the NPU's output stage."""
    from partita.frontends import from_onnx

    # exact int32 sums, as the NPU's MAC array (on CPUs without VNNI the default import
    # reproduces ONNX Runtime's saturating pairs, which the NPU refuses: test_onnx_ort_cpu.py)
    mod = from_onnx(str(ONNX_NETS / f"{name}.onnx"), ort_cpu="vnni")
    exe = P.build(mod, "npu, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) >= 0.99 * summary["macs"]
    assert summary["partitions"] <= 2
    ty = exe.input_types[0]
    x = np.random.default_rng(3).standard_normal(ty.shape).astype(ty.dtype)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_hardswish_after_a_convolution_is_its_fused_activation():
    path = NETS / "mobilenet_v3_small_075_96.tflite"
    exe = P.build(from_tflite(str(path)), "npu -config=u65-256, ref")
    ops = exe.steps[0].region.program.ops
    fused = [op for op in ops if op.kind in ("CONV", "DWCONV", "FC") and "table" in op.arrays]
    assert len(fused) == 19 and not any(op.kind == "LUT" for op in ops)
    assert all("HARD_SWISH" in op.name for op in fused)
    x = random_input(exe.input_types[0], 11)
    assert np.array_equal(exe.run(x)[0], tflite_reference(path, x))
