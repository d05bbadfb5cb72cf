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
MODELS = [
    "sum_hw",
    "sum_axis3",
    "sum_in_graph",
    "sum_h",
    "sum_w",
    "sum_wc",
    "sum_all",
    "sum_hw_tall",
]
# the summed axes of each one-op model (tools/tflite_op_specs.py, tools/tflite_vela_specs.py)
AXES = {
    "sum_hw": (1, 2),
    "sum_axis3": (3,),
    "sum_h": (1,),
    "sum_w": (2,),
    "sum_wc": (2, 3),
    "sum_all": (1, 2, 3),
    "sum_hw_tall": (1, 2),
}


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


@pytest.mark.parametrize(
    "shape, axes, kernel",
    [
        ((1, 4, 6, 8), [2], (1, 6)),
        ((1, 4, 6, 8), [1], (4, 1)),
        ((1, 4, 6, 8), [1, 3], (4, 1)),
        ((1, 4, 6, 8), [0, 1, 2, 3], (4, 6)),
        ((1, 80, 40, 4), [1, 2], (1, 40)),  # transposed to 4 x 80 x 40: W in the window
        ((1, 40, 80, 4), [1, 2], (1, 40)),
        ((1, 4, 80, 4), [2], (1, 1)),  # transposed: the 80 values of W in the channels
        ((1, 80, 4, 4), [1], (1, 1)),
        ((1, 67, 67, 4), [1, 2], (1, 1)),  # 67 x 67: all 4,489 values in the channels
        ((1, 80, 4, 4), [1, 3], None),  # with the channels: at most 64 x 64 (stays a sum)
        ((2, 4, 6, 8), [0, 1], None),  # over the batch
    ],
)
def test_which_sums_become_convolutions(shape, axes, kernel):
    n = int(np.prod([shape[a] for a in axes]))
    mod = P.parse(f"""
def @main(%x: Tensor[{shape}, int8]) {{
  %0 = cast(%x, dtype="int32");
  %1 = sum(%0, axis={axes});
  qnn.requantize(%1, 0.01f, {-3 * n}, 0.05f, 2, out_dtype="int8")
}}
""")
    from partita.backends.npu.legalize import NPULegalizeSum

    from partita.passes import InferType

    mod = InferType()(mod)
    legal = NPULegalizeSum()(mod)
    convs = [c for c in iter_calls(legal["main"]) if c.op_name == "qnn.conv2d"]
    if kernel is None:
        assert not convs and "sum" in [c.op_name for c in iter_calls(legal["main"])]
        return
    assert [tuple(c.attrs.kernel_size) for c in convs] == [kernel]
    x = np.random.default_rng(1).integers(-128, 128, shape).astype(np.int8)
    assert np.array_equal(interpret(legal, [x])[0], interpret(mod, [x])[0])


def _rows_summing_to(sums, n):
    """int8 rows of n values, row k summing to sums[k] (values within 1 of each other)."""
    q, rem = np.divmod(sums, n)
    x = np.repeat(q[:, None], n, axis=1) + (np.arange(n)[None, :] < rem[:, None])
    return x.astype(np.int8)


def _every_sum(shape, axis_len):
    """Inputs whose sums over the last ``axis_len`` positions cover every reachable int8 sum."""
    n = axis_len
    sums = np.arange(-128 * n, 127 * n + 1)
    return sums, _rows_summing_to(sums, n)


@pytest.mark.parametrize("name", sorted(AXES))
def test_every_reachable_sum_equals_tflites_builtin_kernels(name):
    """int32 sums over the whole range the int8 input can reach (65 inputs of consecutive
    sums, one per group of summed values, the ends included), through the interpreter and the
    NPU build, against TFLite's builtin kernels (the previous reference requantize was 1 LSB off
    on 196 of sum_axis3's 1,021 sums: TFLite's double rounding against the builtin set's
    float32; the import checks its scale over every reachable sum)."""
    mod = from_tflite(str(OPS / f"{name}.tflite"))
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    shape = exe.input_types[0].shape
    axes = AXES[name]
    kept = [a for a in range(4) if a not in axes]
    n = int(np.prod([shape[a] for a in axes]))
    groups = int(np.prod([shape[a] for a in kept]))
    sums = np.arange(-128 * n, 127 * n + 1)  # one input per `groups` consecutive sums
    starts = list(range(0, len(sums), groups))
    starts = starts[:: max(1, len(starts) // 64)] + starts[-1:]  # 65 of them, the ends included
    batches = [_rows_summing_to(sums[i : i + groups], n) for i in starts]
    inner = [shape[a] for a in kept] + [shape[a] for a in axes]
    order = np.argsort(kept + list(axes))

    def pack(b):  # groups x n, the summed axes last, back to the model's layout
        b = np.pad(b, ((0, groups - len(b)), (0, 0)))
        return np.transpose(b.reshape(inner), order).astype(np.int8)

    for b in batches:
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


# Vela 5.2's figures (recorded by benchmarks/npu.py --record): the 80 x 40 sum, Vela's
# transpose and ReduceSum against partita's transpose and convolution. Partita's transpose is
# cheaper (u55-256: 3,500 cycles against Vela's 4,800; u65-256: 1,867 against 4,766 for the
# same 12,800 bytes) and so is our convolution since it pays no fixed cost (session 18: 3,428
# and 3,347 against Vela's ReduceSum 3,949 and 4,213): 0.83 and 0.67 of Vela's totals. Since
# session 20 (n30j) the reshape to the output after the convolution costs nothing (regor
# removes it; the convolution writes the output): 0.79 and 0.61. Since n30o (vela_sum.py) the
# SUM is charged as Vela's operations, n30l's hardware transpose of the 1 x 80 x 160 view and a
# ReduceSum (the U65's DRAM read in 32-byte runs): 8,964 and 9,144 cycles, 1.02 and 1.02
SUM_BANDS = {"u55-256": (0.97, 1.07), "u65-256": (0.97, 1.07)}


@pytest.mark.parametrize("preset", sorted(SUM_BANDS))
def test_a_big_sum_costs_about_what_vela_charges(preset):
    import hashlib
    import json

    path = OPS / "sum_hw_tall.tflite"
    record = Path(__file__).resolve().parent / "data" / "vela_cycles.json"
    row = json.loads(record.read_text())[f"tests/models/tflite/ops/sum_hw_tall/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    ours = sum(c["cycles"] for c in exe.steps[0].region.cycles)
    lo, hi = SUM_BANDS[preset]
    assert lo <= ours / row["cycles"] <= hi, ours / row["cycles"]
