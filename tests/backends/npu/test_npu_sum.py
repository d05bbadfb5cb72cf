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


def test_the_exact_scale_equals_the_builtin_formula_or_is_refused():
    """Random scales and zero points: a scale found gives the builtin float32 formula's output
    for every reachable sum (checked here with the requantize op itself); where none exists the
    import keeps the float32 formula (4% of random choices, mostly sums over 1,024 values)."""
    from types import SimpleNamespace

    from partita.frontends.tflite.ops_pool import _sum_builtin_formula, _sum_exact_scale

    from partita.ops.qnn import RequantizeAttrs, requantize

    rng = np.random.default_rng(7)
    found = 0
    for _ in range(60):
        n = int(rng.choice([3, 4, 9, 49, 64]))
        s_in = np.float32(rng.uniform(0.001, 0.1))
        x = SimpleNamespace(scale=[s_in], zero_point=[int(rng.integers(-128, 128))], dtype="int8")
        out = SimpleNamespace(
            scale=[np.float32(s_in * rng.uniform(0.5, n))],
            zero_point=[int(rng.integers(-128, 128))],
            dtype="int8",
        )
        scale = _sum_exact_scale(n, x, out)
        if scale is None:
            continue
        found += 1
        sums = np.arange(-128 * n, 127 * n + 1, dtype=np.int32)
        got = requantize(
            sums,
            np.asarray(scale, np.float32),
            np.asarray(x.zero_point[0] * n, np.int32),
            np.asarray(out.scale[0], np.float32),
            np.asarray(out.zero_point[0], np.int32),
            RequantizeAttrs(out_dtype="int8", semantics="tflite_double"),
        )
        assert np.array_equal(got, _sum_builtin_formula(sums.astype(np.int64), n, x, out))
    assert found >= 50
    # one that has none (found by the same search, n = 64): refused, so the import keeps the
    # float32 formula (on the CPU)
    x = SimpleNamespace(scale=[np.float32(0.09632359445095062)], zero_point=[-109], dtype="int8")
    out = SimpleNamespace(scale=[np.float32(3.351166248321533)], zero_point=[9], dtype="int8")
    assert _sum_exact_scale(64, x, out) is None
