"""One-op TFLite models (made by TFLite's converter, tests/models/tflite/ops) on the NPU, each
bit-exact with TFLite's reference kernels (BUILTIN_REF)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P

OPS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "ops"

# the whole model on the NPU (the op between its input and output)
ON_THE_NPU = [
    "maximum",
    "minimum",
    "softmax",
    "softmax_4d",
    "squeeze",
    "strided_slice",
    "strided_slice_shrink",
    "transpose",
    "leaky_relu",
    "slice",
    "pack",
    "unpack",
    "split",
    "split_v",
    "abs",
    "mirror_pad",
    "mean_axis2",  # MEAN over W alone: Vela's 1 x W all-ones depthwise convolution
    # depth multiplier 2: two depthwise convolutions and a transpose (legalize_dwconv.py)
    "dwconv_m2_s1_valid",
    "dwconv_m2_s2_valid_relu",
    "dwconv_m2_in_graph",
    "mean_axis2_in_graph",
]
# session 20 (n30i): the operators Vela 5.2 placed on the NPU and partita did not, every preset
SESSION_20 = ["dwconv_m2_s1_valid", "dwconv_m2_s2_valid_relu", "dwconv_m2_in_graph"]
SESSION_20 += ["mean_axis2", "mean_axis2_in_graph"]
PRESETS = ("u55-128", "u55-256", "u65-256", "u65-512")
# Vela's table, elementwise and reduction ops, each alone and between two convolutions
VELA_OPS = ["exp", "log", "rsqrt", "relu_0_to_1", "prelu", "reduce_max", "reduce_min", "arg_max"]
ON_THE_NPU += [f"{n}{suffix}" for n in VELA_OPS for suffix in ("", "_in_graph")]
# TRANSPOSE_CONV as Vela runs it: zero insertion + a convolution (backends/npu/legalize.py)
ON_THE_NPU += ["transpose_conv_s2_same", "transpose_conv_s2_valid", "transpose_conv_in_graph"]
# BATCH_MATMUL (int8): the int32 product, then its output stage
ON_THE_NPU += ["batch_matmul", "batch_matmul_adj_y"]
# RESIZE_BILINEAR by 2x/4x: TFLite's fixed-point taps as one unit operation
ON_THE_NPU += [
    "resize_bilinear_2x_half_pixel",
    "resize_bilinear_2x_half_pixel_in_graph",
    "resize_bilinear_4x",
]


def reference(path, inputs):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(
        model_path=str(path), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def assert_equals_tflite(exe, path, seed: int) -> None:
    """``exe`` on random inputs of its types (``seed``) gives TFLite BUILTIN_REF's bits."""
    rng = np.random.default_rng(seed)
    inputs = [
        rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, t.shape, t.dtype, True)
        for t in exe.input_types
    ]
    for got, want in zip(exe.run(*inputs), reference(path, inputs)):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("name", ON_THE_NPU)
def test_one_op_model_runs_on_the_npu_bit_exact_with_tflite(name):
    path = OPS / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    for seed in range(3):
        assert_equals_tflite(exe, path, seed)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", SESSION_20)
def test_velas_depth_multiplier_and_partial_mean_run_on_every_preset_bit_exact(name, preset):
    path = OPS / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    # a depth multiplier's concatenation and reshape cost 0 (Vela has neither:
    # vela_depthmult.py); every other operation costs cycles
    free = ("concatenate", "reshape") if name.startswith("dwconv_m2") else ()
    for s in exe.steps:
        for op, c in zip(s.region.program.ops, s.region.cycles):
            assert c["cycles"] > 0 or op.params.get("op") in free, (op.name, c["cycles"])
    assert_equals_tflite(exe, path, 7)


def test_a_strided_slice_with_a_stride_over_channels_stays_on_the_cpu_with_vela_s_reason():
    mod = P.parse("""
def @main(%x: Tensor[(1, 4, 4, 8), int8]) {
  strided_slice(%x, begin=[0, 0, 0, 0], end=[1, 4, 4, 8], strides=[1, 1, 1, 2])
}""")
    exe = P.build(mod, "npu, ref")
    (row,) = exe.report.host_rows
    assert "other than 1 only over H and W" in row.reason


def test_a_reflect_pad_before_a_conv_is_not_fused_as_a_constant_pad():
    """The conv's fused pad fills with one value; a reflect pad runs as its own op."""
    weight = np.ones((4, 3, 3, 4), np.int8)
    mod = P.parse(
        """
def @main(%x: Tensor[(1, 6, 6, 4), int8]) {
  %0 = nn.pad(%x, 0i8, pad_width=[[0, 0], [1, 1], [1, 1], [0, 0]], pad_mode="reflect");
  %1 = qnn.conv2d(%0, meta[relay.Constant][0], 0, 0, 0.25f, 0.01f, data_layout="NHWC",
       kernel_layout="OHWI", out_dtype="int32");
  qnn.requantize(%1, 0.0025f, 0, 0.1f, 0, out_dtype="int8")
}""",
        [weight],
    )
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    assert len(exe.steps[0].region.program.ops) == 2
    x = np.random.default_rng(0).integers(-128, 128, (1, 6, 6, 4), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_rsqrt_below_the_zero_point_fails_on_the_host_and_saturates_on_the_npu():
    """TFLite's RSQRT reports an error for inputs below the zero point; the NPU's table cannot
    fail and gives the largest output there (the value at zero), every other input TFLite's."""
    mod = P.parse("""
def @main(%x: Tensor[(1, 2, 2, 4), int8]) {
  qnn.rsqrt(%x, 0.02f, -10, 0.05f, -128)
}""")
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.arange(-14, 2, dtype=np.int8).reshape(1, 2, 2, 4)
    with pytest.raises(Exception, match="below the zero point"):
        P.interpret(mod, [x])
    got = exe.run(x)[0]
    valid = x >= -10
    assert np.array_equal(got[valid], P.interpret(mod, [np.maximum(x, -10)])[0][valid])
    assert (got[~valid] == 127).all()


def test_argmax_over_a_deep_map_stays_on_the_cpu_with_vela_s_reason():
    mod = P.parse("""
def @main(%x: Tensor[(1, 2, 2, 200), int8]) {
  argmax(%x, axis=[3])
}""")
    exe = P.build(mod, "npu, ref")
    (row,) = exe.report.host_rows
    assert "depth at most 127" in row.reason


@pytest.mark.parametrize("name, npu_steps", (("reverse_v2", 0), ("reverse_v2_in_graph", 2)))
def test_reverse_v2_stays_on_the_cpu_with_vela_s_reason(name, npu_steps):
    """Vela 5.2 refuses REVERSE_V2 on the Ethos-U55/U65 whatever its axis ('Unsupported reverse
    mask. Axis attribute is not supported.'; both models, vela --show-cpu-operations): so does
    partita, on every preset; the CPU's reverse is TFLite's bits."""
    path = OPS / f"{name}.tflite"
    for preset in PRESETS:
        exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
        assert [s.target for s in exe.steps].count("npu") == npu_steps, exe.report.table()
        (row,) = exe.report.host_rows
        assert "must not reverse an axis" in row.reason and "got axis 2" in row.reason
    assert_equals_tflite(exe, path, 3)


def test_tile_runs_on_the_npu_as_the_interpreter_does():
    """TILE has no converter-made test model (TFLite 2.21 writes version 3, which the
    interpreter cannot run); the op itself is numpy.tile's copies."""
    mod = P.parse("""
def @main(%x: Tensor[(1, 3, 4, 5), int8]) {
  tile(%x, reps=[1, 2, 1, 3])
}""")
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.random.default_rng(0).integers(-128, 128, (1, 3, 4, 5), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], np.tile(x, (1, 2, 1, 3)))


def test_a_transposed_convolution_becomes_zero_insertion_and_a_fused_convolution():
    path = OPS / "transpose_conv_in_graph.tflite"
    exe = P.build(from_tflite(str(path)), "npu, ref")
    kinds = [(op.kind, op.name.split(" ")[0]) for op in exe.steps[0].region.program.ops]
    assert ("UNIT", "npu.dilate") in kinds and kinds.count(("CONV", "npu.conv2d")) == 3


def test_a_bilinear_resize_vela_refuses_stays_on_the_cpu_with_its_reason():
    path = OPS / "resize_bilinear_half_pixel.tflite"  # 8x8 -> 13x11
    exe = P.build(from_tflite(str(path)), "npu, ref")
    assert "npu" not in [s.target for s in exe.steps]
    assert any("scale int8 NHWC data by 2, 4 or 8" in r.reason for r in exe.report.host_rows)
