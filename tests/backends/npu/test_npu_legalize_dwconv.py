"""A depthwise convolution with a depth multiplier, legalized as Vela 5.2 runs it
(backends/npu/legalize_dwconv.py): M depthwise convolutions and a transpose, the same bits on
the NPU and, when the NPU gives the pieces back, on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.backends.npu.legalize_dwconv import NPULegalizeDepthMultiplier
from partita.frontends import from_tflite

import partita as P
from partita.ir import Call, post_order

TFLITE = Path(__file__).resolve().parents[2] / "models" / "tflite"


def _ops(mod) -> list[str]:
    return [n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)]


def _grouped(stride: int, mult: int = 3, channels: int = 4):
    """A per-channel int8 depthwise convolution with multiplier ``mult``, bias and RELU6."""
    rng = np.random.default_rng(stride)
    cout = channels * mult
    weight = rng.integers(-127, 128, (3, 3, cout, 1)).astype(np.int8)
    bias = rng.integers(-500, 500, cout).astype(np.int32)
    scales = (rng.uniform(0.5, 1.5, cout) * 0.01).astype(np.float32)
    return P.parse(
        f"""
def @main(%x: Tensor[(1, 12, 12, {channels}), int8]) {{
  %0 = qnn.conv2d(%x, meta[relay.Constant][0], 3, 0, 0.02f, meta[relay.Constant][2],
       strides=[{stride}, {stride}], padding=[1, 1, 1, 1], groups={channels},
       data_layout="NHWC", kernel_layout="HWOI");
  %1 = nn.bias_add(%0, meta[relay.Constant][1], axis=3);
  %2 = qnn.requantize(%1, meta[relay.Constant][3], 0, 0.05f, -7, axis=3, out_dtype="int8");
  clip(%2, a_min=-7f, a_max=113f)
}}""",
        [weight, bias, scales, scales * np.float32(0.02)],
    )


def test_a_multiplier_of_three_runs_as_three_depthwise_convolutions_and_a_transpose():
    mod = _grouped(stride=1)
    legal = NPULegalizeDepthMultiplier()(mod)
    ops = _ops(legal)
    assert ops.count("qnn.conv2d") == 3 and ops.count("clip") == 3
    assert ops[-3:] == ["concatenate", "transpose", "reshape"]
    x = np.random.default_rng(5).integers(-128, 128, (1, 12, 12, 4)).astype(np.int8)
    want = np.asarray(P.interpret(mod, [x])[0])
    exe = P.build(mod, "npu, llvm")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    assert np.array_equal(np.asarray(exe.run(x)[0]), want)
    # the pieces on the CPU (what a region the NPU gives back runs): the same bits
    assert np.array_equal(np.asarray(P.build(legal, "llvm").run(x)[0]), want)


def test_a_piece_the_npu_would_refuse_leaves_the_convolution_whole():
    mod = _grouped(stride=4)  # Vela's and our stride limit is 3
    assert _ops(NPULegalizeDepthMultiplier()(mod)) == _ops(mod)


def test_one_input_channel_is_a_plain_convolution_left_as_it_is():
    mod = _grouped(stride=1, mult=8, channels=1)  # groups=1: the NPU runs it as one conv
    assert _ops(NPULegalizeDepthMultiplier()(mod)) == _ops(mod)
    exe = P.build(mod, "npu, llvm")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()


@pytest.mark.parametrize(
    "path", ["ops/dwconv_m2_in_graph.tflite", "int16/dwconv_m2_in_graph.tflite"]
)
def test_the_legalized_converter_models_equal_the_interpreter_on_the_cpu(path):
    mod = from_tflite(str(TFLITE / path))
    exe = P.build(NPULegalizeDepthMultiplier()(mod), "llvm")
    rng = np.random.default_rng(2)
    xs = [
        rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, t.shape, t.dtype, True)
        for t in exe.input_types
    ]
    assert np.array_equal(np.asarray(exe.run(*xs)[0]), np.asarray(P.interpret(mod, xs)[0]))
