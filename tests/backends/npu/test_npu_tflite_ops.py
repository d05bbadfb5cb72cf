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


@pytest.mark.parametrize("name", ON_THE_NPU)
def test_one_op_model_runs_on_the_npu_bit_exact_with_tflite(name):
    path = OPS / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    for seed in range(3):
        rng = np.random.default_rng(seed)
        inputs = [
            rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, t.shape, t.dtype, True)
            for t in exe.input_types
        ]
        for got, want in zip(exe.run(*inputs), reference(path, inputs)):
            assert np.array_equal(got, want)


def test_a_strided_slice_with_a_stride_over_channels_stays_on_the_cpu_with_vela_s_reason():
    mod = P.parse("""
def @main(%x: Tensor[(1, 4, 4, 8), int8]) {
  strided_slice(%x, begin=[0, 0, 0, 0], end=[1, 4, 4, 8], strides=[1, 1, 1, 2])
}""")
    exe = P.build(mod, "npu, ref")
    (row,) = exe.report.host_rows
    assert "other than 1 only over H and W" in row.reason
