"""TFLite 16x8 models (int16 activations, int8 weights, int64 bias; tests/models/tflite/int16)
on the NPU: the ops Vela 5.2 runs in 16x8 are placed on the NPU and are bit-exact with the
interpreter (itself bit-exact with TFLite's reference kernels) on inputs over the whole int16
range, and with BUILTIN_REF's stored outputs (concat: an int16 QUANTIZE, then CONCATENATION)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P

MODELS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "int16"
WHOLE_ON_THE_NPU = [
    "add", "add_relu", "avg_pool", "concat", "conv_relu", "conv_stride2", "depthwise_relu6",
    "fully_connected", "max_pool", "mean", "mul", "pad", "reshape", "sub", "softmax",
    "mobilenet_like", "mobilenet_like_logits", "conv_per_tensor", "fully_connected_per_tensor",
]  # fmt: skip
# session 20 (n30i): Vela 5.2 runs these in 16x8 (the depth multiplier as two depthwise
# convolutions and a transpose, backends/npu/legalize_dwconv.py)
SESSION_20 = [
    "dwconv_m2", "mean_axis2", "transpose", "strided_slice", "maximum", "minimum",
    "resize_nearest", "dwconv_m2_in_graph", "mean_axis2_in_graph",
]  # fmt: skip
# session 20 (n30p): 16x8 ABS and LEAKY_RELU (Vela: its Abs and LeakyRelu operations, or MUL,
# MUL and MAXIMUM for a LEAKY_RELU that rescales)
SESSION_20 += ["abs", "leaky_relu", "abs_in_graph", "leaky_relu_in_graph"]
WHOLE_ON_THE_NPU += SESSION_20


def _check(exe, mod, path):
    rng = np.random.default_rng(16)
    for _ in range(2):
        feeds = [
            rng.integers(-32768, 32768, tuple(int(d) for d in p.checked_type.shape)).astype(
                np.int16
            )
            for p in mod["main"].params
        ]
        for got, want in zip(exe.run(*feeds), P.interpret(mod, feeds)):
            assert np.asarray(got).dtype == np.int16
            assert np.array_equal(np.asarray(got), np.asarray(want))
    with np.load(path.with_suffix(".npz")) as z:
        n_in = sum(k.startswith("input_") for k in z.files)
        for s in range(z["input_0"].shape[0]):
            got = exe.run(*[z[f"input_{i}"][s] for i in range(n_in)])
            assert np.array_equal(np.asarray(got[0]), z["ref_0"][s]), (path.stem, s)


@pytest.mark.parametrize("name", WHOLE_ON_THE_NPU)
def test_16x8_model_runs_whole_on_the_npu_bit_exact(name):
    path = MODELS / f"{name}.tflite"
    mod = from_tflite(path)
    exe = P.build(mod, "npu, llvm")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    _check(exe, mod, path)


@pytest.mark.parametrize("preset", ["u55-128", "u65-512"])
def test_16x8_conv_on_other_presets(preset):
    path = MODELS / "conv_relu.tflite"
    mod = from_tflite(path)
    exe = P.build(mod, f"npu -config={preset}, llvm")
    assert [s.target for s in exe.steps] == ["npu"]
    _check(exe, mod, path)


@pytest.mark.parametrize("preset", ["u55-128", "u55-256", "u65-256", "u65-512"])
@pytest.mark.parametrize("name", SESSION_20)
def test_16x8_session_20_ops_on_every_preset(name, preset):
    path = MODELS / f"{name}.tflite"
    mod = from_tflite(path)
    exe = P.build(mod, f"npu -config={preset}, llvm")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    # an operation Vela has no counterpart for costs 0 (a depth multiplier's concatenation and
    # reshape: vela_depthmult.py); every other operation, and so every region, costs cycles
    free = ("concatenate", "reshape") if name.startswith("dwconv_m2") else ()
    for s in exe.steps:
        for op, c in zip(s.region.program.ops, s.region.cycles):
            assert c["cycles"] > 0 or op.params.get("op") in free, (op.name, c["cycles"])
    _check(exe, mod, path)


def test_an_int64_bias_beyond_int32_stays_exact_on_the_npu():
    """TFLite's 16x8 bias is int64; one beyond int32 is carried as int64, not wrapped."""
    bias = np.array([3 << 33, -(5 << 32), 7, -9], np.int64)
    mod = P.parse(
        """
def @main(%x: Tensor[(1, 6, 6, 4), int16]) {
  %0 = qnn.conv2d(%x, meta[relay.Constant][0], 0, 0, 0.5f, 0.5f, padding=[1, 1, 1, 1],
       data_layout="NHWC", kernel_layout="OHWI", out_dtype="int64");
  %1 = nn.bias_add(%0, meta[relay.Constant][1], axis=3);
  qnn.requantize(%1, 0.25f, 0, 300000f, 0, axis=3, out_dtype="int16")
}""",
        [np.random.default_rng(0).integers(-127, 128, (4, 3, 3, 4)).astype(np.int8), bias],
    )
    exe = P.build(mod, "npu, llvm")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    x = np.random.default_rng(1).integers(-32768, 32768, (1, 6, 6, 4)).astype(np.int16)
    want = np.asarray(P.interpret(mod, [x])[0])
    assert 1000 < np.abs(want[..., :2]).min() < 32767  # the large biases, unwrapped, unsaturated
    assert np.array_equal(np.asarray(exe.run(x)[0]), want)


def test_16x8_abs_and_leaky_relu_stay_operations_of_their_own():
    """Vela runs a 16x8 ABS or LEAKY_RELU after a convolution as an elementwise operation of its
    own (its per-layer report): not fused into the convolution's output stage. The one-op
    models' quantizations are equal (Vela's native LeakyRelu, ABS's cost); the in-graph
    LEAKY_RELU rescales and costs Vela's MUL, MUL and MAXIMUM: two and a half ABS passes or
    more."""
    from partita.backends.npu.vela_access import leaky_as_max

    middle = {}
    for name in ("abs_in_graph", "leaky_relu_in_graph", "abs", "leaky_relu"):
        exe = P.build(from_tflite(MODELS / f"{name}.tflite"), "npu -config=u55-256, llvm")
        (step,) = exe.steps
        ops = step.region.program.ops
        kinds = ["CONV", "LUT", "CONV"] if name.endswith("in_graph") else ["LUT"]
        assert [op.kind for op in ops] == kinds, name
        assert all("table" not in op.arrays for op in ops if op.kind == "CONV")
        k = 1 if name.endswith("in_graph") else 0
        assert leaky_as_max(ops[k]) == (name == "leaky_relu_in_graph")
        middle[name] = step.region.cycles[k]["cycles"]
    assert middle["abs"] == middle["leaky_relu"]  # both native, no table loaded
    assert 2.5 * middle["abs_in_graph"] <= middle["leaky_relu_in_graph"]
    # Vela 5.2's per-layer report on u55-256: abs_in_graph's Abs 512 op cycles,
    # leaky_relu_in_graph's MUL 512, MUL 512, MAXIMUM 768
    assert abs(middle["abs_in_graph"] - 512) <= 0.1 * 512
    assert abs(middle["leaky_relu_in_graph"] - 1792) <= 0.1 * 1792


# Vela 5.2's op cycles (its debug database, --enable-debug-db) of the one-op 16x8 ABS and
# LEAKY_RELU (4x4x8 int16; equal quantizations: its native Abs / LeakyRelu), u55-128, u55-256,
# u65-256, u65-512: the maps' traffic in bursts of one block depth (16 bytes: efficiency 0.5
# in SRAM, 0.125 in DRAM)
VELA_UNARY16 = {"u55-128": 128, "u55-256": 128, "u65-256": 341, "u65-512": 341}


@pytest.mark.parametrize("preset", sorted(VELA_UNARY16))
@pytest.mark.parametrize("name", ["abs", "leaky_relu"])
def test_16x8_one_op_abs_and_leaky_relu_cost_velas(name, preset):
    exe = P.build(from_tflite(MODELS / f"{name}.tflite"), f"npu -config={preset}, llvm")
    ours = sum(c["cycles"] for s in exe.steps for c in s.region.cycles)
    assert 0.99 <= ours / VELA_UNARY16[preset] <= 1.01, ours


# Vela 5.2's op cycles (its debug database) of the one-op 16x8 ADD, SUB and MUL (4x4x8 int16
# maps from the region's input to its output, NHWC; ADD and SUB share the rule) on u55-128,
# u55-256, u65-256, u65-512: the maps' traffic in bursts of one block depth, 1,024 + 512
# effective SRAM bytes on the U55s, 4,096 + 2,048 DRAM bytes on the U65s (n30r)
VELA_BINARY16 = {"u55-128": 192, "u55-256": 192, "u65-256": 512, "u65-512": 512}
# the MAXIMUM after its input's QUANTIZE: one NHCWB16 input in full bursts, the NHWC one at the
# bricks' depth (Vela 256 / 256 / 554 / 554: on the U65s regor's ElementwiseSanitizer moves the
# QUANTIZE's map back to DRAM, beside the region's input, vela_layout.evicted_maps); and Vela's
# QUANTIZE, a 16-bit 1x1 average pool writing NHCWB16 bricks (496 / 328 / 1,109 / 1,025; ours
# in the block model 480 / 320 / 1,102 / 1,038)
VELA_MAXIMUM16 = {"u55-128": 256, "u55-256": 256, "u65-256": 554, "u65-512": 554}
VELA_QUANTIZE16 = {"u55-128": 496, "u55-256": 328, "u65-256": 1109, "u65-512": 1025}


def _op_cycles(name, preset):
    exe = P.build(from_tflite(MODELS / f"{name}.tflite"), f"npu -config={preset}, llvm")
    (step,) = exe.steps
    return [
        (op.params.get("op"), c["cycles"])
        for op, c in zip(step.region.program.ops, step.region.cycles)
    ]


@pytest.mark.parametrize("preset", sorted(VELA_BINARY16))
@pytest.mark.parametrize("name", ["add", "sub", "mul", "add_relu"])
def test_16x8_one_op_add_sub_mul_cost_velas(name, preset):
    ((_, ours),) = _op_cycles(name, preset)
    assert 0.99 <= ours / VELA_BINARY16[preset] <= 1.01, ours


@pytest.mark.parametrize("preset", sorted(VELA_MAXIMUM16))
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_16x8_one_op_maximum_minimum_cost_velas(name, preset):
    (rq, quantize), (op, ours) = _op_cycles(name, preset)
    assert (rq, op) == ("qnn.requantize", name)
    assert abs(ours / VELA_MAXIMUM16[preset] - 1) <= 0.01, ours
    assert abs(quantize / VELA_QUANTIZE16[preset] - 1) <= 0.04, quantize


# Vela 5.2's op cycles (its debug database) of the 16x8 nearest 2x resize (4x4x8 -> 8x8x8), one
# AvgPool reading the input upscaled, and its output block (the upscaled read's rounding)
VELA_RESIZE16 = {
    "u55-128": (1556, (7, 6, 8)),
    "u55-256": (894, (6, 6, 8)),
    "u65-256": (1915, (6, 6, 8)),
    "u65-512": (1614, (6, 6, 8)),
}


@pytest.mark.parametrize("preset", sorted(VELA_RESIZE16))
def test_16x8_resize_nearest_costs_velas_avgpool(preset):
    from partita.backends.npu.blocks import Query, find_block
    from partita.backends.npu.config import get_config

    cycles, block = VELA_RESIZE16[preset]
    q = Query("pool", (4, 4, 8), (8, 8, 8), bits=16, upscale=2, rounding=1)
    assert find_block(get_config(preset), q).ofm == block
    ((op, ours),) = _op_cycles("resize_nearest", preset)
    assert op == "image.resize2d"
    assert abs(ours / cycles - 1) <= (0.05 if preset != "u65-512" else 0.15), ours
