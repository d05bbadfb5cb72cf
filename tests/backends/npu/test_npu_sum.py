"""TFLite's int8 SUM on the NPU (backends/npu/legalize.py: a convolution with all-ones weights,
the same int32 sum and requantization as the frontend's reference arithmetic): bit-exact with
partita's interpreter, and against TFLite. BUILTIN_REF's int8 SUM in ai-edge-litert 2.3 is
broken (a constant -1 for every input of sum_hw; up to 177 LSB off on sum_axis3; 108 LSB on
sum_in_graph), so TFLite's oracle here is its builtin kernel set, which computes the sum in
float32: within 1 LSB (docs/npu_supported_ops.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P
from partita import interpret
from partita.ir import iter_calls

litert = pytest.importorskip("ai_edge_litert.interpreter")

OPS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "ops"
MODELS = ["sum_hw", "sum_axis3", "sum_in_graph"]


def builtin(name, x):
    it = litert.Interpreter(
        model_path=str(OPS / f"{name}.tflite"),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.mark.parametrize("name", MODELS)
def test_sum_runs_on_the_npu_bit_exact(name):
    mod = from_tflite(str(OPS / f"{name}.tflite"))
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    shape = exe.input_types[0].shape
    worst = 0
    for seed in range(4):
        x = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
        (got,) = exe.run(x)
        assert np.array_equal(got, interpret(mod, [x])[0])
        worst = max(worst, int(np.abs(got.astype(int) - builtin(name, x).astype(int)).max()))
    assert worst <= 1


def test_the_npu_sums_with_a_convolution():
    mod = from_tflite(str(OPS / "sum_axis3.tflite"))
    from partita.backends.npu.legalize import NPULegalizeSum

    ops = [c.op_name for c in iter_calls(NPULegalizeSum()(mod)["main"])]
    assert "qnn.conv2d" in ops and "sum" not in ops


def test_a_sum_over_other_axes_stays_as_it_is():
    mod = P.parse("""
def @main(%x: Tensor[(1, 4, 4, 8), int8]) {
  %0 = cast(%x, dtype="int32");
  %1 = sum(%0, axis=[2]);
  qnn.requantize(%1, 0.01f, 0, 0.05f, 0, out_dtype="int8")
}
""")
    from partita.backends.npu.legalize import NPULegalizeSum

    from partita.passes import InferType

    ops = [c.op_name for c in iter_calls(NPULegalizeSum()(InferType()(mod))["main"])]
    assert "sum" in ops and "qnn.conv2d" not in ops
