"""TFLite's int8 SUM on the NPU (backends/npu/legalize.py: a convolution with all-ones weights,
the same int32 sum and requantization as the frontend's reference arithmetic): bit-exact with
partita's interpreter, and against TFLite. BUILTIN_REF's int8 SUM in ai-edge-litert 2.3 is
broken (a constant -1 for every input of sum_hw; up to 177 LSB off on sum_axis3; 108 LSB on
sum_in_graph), so TFLite's oracle here is its builtin kernel set, which rescales the int32 sum
in float32. The frontend imports that as a requantize (one double product) at a scale checked
to give the same bits for every reachable sum: the interpreter and the NPU equal the builtin
kernels bit for bit, over every sum the input type can reach."""

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
    """Imported with the builtin kernels' semantics (the convolutions of sum_in_graph round as
    TFLite's optimized x86 kernels do), the whole model equals the builtin set."""
    mod = from_tflite(str(OPS / f"{name}.tflite"), semantics="tflite_builtin")
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    shape = exe.input_types[0].shape
    worst = 0
    for seed in range(4):
        x = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
        (got,) = exe.run(x)
        assert np.array_equal(got, interpret(mod, [x])[0])
        worst = max(worst, int(np.abs(got.astype(int) - builtin(name, x).astype(int)).max()))
    assert worst == 0


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


def _every_sum(shape, axis_len):
    """Inputs whose sums over the last ``axis_len`` positions cover every reachable int8 sum."""
    n = axis_len
    sums = np.arange(-128 * n, 127 * n + 1)
    q, rem = np.divmod(sums, n)
    x = np.repeat(q[:, None], n, axis=1) + (np.arange(n)[None, :] < rem[:, None])
    return sums, x.astype(np.int8)


@pytest.mark.parametrize("name", ["sum_hw", "sum_axis3"])
def test_every_reachable_sum_equals_tflites_builtin_kernels(name):
    """Every int32 sum the int8 input can reach, through the interpreter and the NPU build,
    against TFLite's builtin kernels (the previous reference requantize was 1 LSB off on 196
    of sum_axis3's 1,021 sums: TFLite's double rounding against the builtin set's float32)."""
    mod = from_tflite(str(OPS / f"{name}.tflite"))
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    _, h, w, c = exe.input_types[0].shape
    if name == "sum_axis3":  # one sum per pixel, over its c channels
        sums, rows = _every_sum(None, c)
        per = h * w
        batches = [rows[i : i + per] for i in range(0, len(rows), per)]
        pack = lambda b: np.pad(b, ((0, per - len(b)), (0, 0))).reshape(1, h, w, c)  # noqa: E731
    else:  # one sum per channel, over the h x w pixels
        sums, rows = _every_sum(None, h * w)
        batches = [rows[i : i + c] for i in range(0, len(rows), c)]
        pack = lambda b: np.pad(b, ((0, c - len(b)), (0, 0))).T.reshape(1, h, w, c)  # noqa: E731
    for b in batches[:: max(1, len(batches) // 256)] + batches[-1:]:
        x = pack(b)
        want = builtin(name, x)
        assert np.array_equal(interpret(mod, [x])[0], want)
        assert np.array_equal(exe.run(x)[0], want)
