"""Single-operator TFLite models (tools/gen_tflite_models.py): partita's interpreter against
TFLite's reference kernels (BUILTIN_REF) and its optimized builtin kernels, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from partita.frontends import from_tflite
from partita.frontends.tflite.reader import read_model
from tflite_cases import Oracle, assert_same, model_ids, models, stored_samples

from partita import interpret

OPS = models("ops")
pytestmark = pytest.mark.skipif(not OPS, reason="TFLite test models not generated")


def op_names(path) -> set[str]:
    return {op.name for op in read_model(path.read_bytes()).operators}


def is_float_model(path) -> bool:
    """Float arithmetic inside (float16 weights): compared within float tolerance."""
    return "DEQUANTIZE" in op_names(path) and "QUANTIZE" not in op_names(path)


def ref_broken(path) -> bool:
    """LiteRT 2.3's BUILTIN_REF int8 SUM returns values unrelated to its input (a constant for
    some models); test_sum_arithmetic checks partita's SUM against the builtin
    kernel's source formula instead. BUILTIN_REF registers no ELU kernel at all (the builtin
    kernels are ELU's oracle)."""
    return bool({"SUM", "ELU"} & set(op_names(path)))


def check(got, want, path, what):
    if is_float_model(path):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=what)
    else:
        assert_same(got, want, what)


@pytest.mark.parametrize("path", OPS, ids=model_ids(OPS))
def test_stored_samples_match_reference_and_builtin(path):
    """The generator's stored inputs, against the outputs it stored for both kernel sets."""
    mods = {k: from_tflite(path, semantics=s) for k, s in (("ref", "tflite"),
                                                           ("builtin", "tflite_builtin"))}
    for inputs, want in stored_samples(path):
        for kernels, mod in mods.items():
            if kernels == "ref" and ref_broken(path):
                continue
            check(interpret(mod, inputs), want[kernels], path, f"{path.stem} vs {kernels}")


@pytest.mark.parametrize("kernels", ["ref", "builtin"])
@pytest.mark.parametrize("path", OPS, ids=model_ids(OPS))
def test_random_inputs_match_tflite(path, kernels):
    """Inputs over the whole integer range, three per model, against the live interpreter."""
    if kernels == "ref" and ref_broken(path):
        pytest.skip("BUILTIN_REF's int8 SUM is broken (test_sum_arithmetic) or no ELU")
    oracle = Oracle(path, kernels)
    mod = from_tflite(path, semantics={"ref": "tflite", "builtin": "tflite_builtin"}[kernels])
    rng = np.random.default_rng(sum(map(ord, path.stem)))
    for _ in range(3):
        x = oracle.random_inputs(rng)
        check(interpret(mod, x), oracle(x), path, f"{path.stem} vs {kernels}")


SUMS = [p for p in OPS if op_names(p) == {"SUM"}]  # the one-op models


@pytest.mark.parametrize("path", SUMS, ids=model_ids(SUMS))
def test_sum_arithmetic(path):
    """TFLite's builtin 8-bit SUM (optimized_ops::QuantizedMeanOrSum, compute_sum), written out
    with numpy: round_half_away(float32(sum(q)) * scale + bias) + zp_out, saturated, scale =
    float32(s_in) / float32(s_out), bias = float32(-zp_in * scale) * n. Both semantics import it
    (BUILTIN_REF's int8 SUM is broken, so the reference kernel has no oracle to follow; its
    source's MultiplyByQuantizedMultiplier rounds twice and differs by 1 on some sums)."""
    m = read_model(path.read_bytes())
    op = m.operators[0]
    x, axes_t, out = (m.tensors[i] for i in (*op.inputs, op.outputs[0]))
    axes = tuple(sorted({int(a) % len(x.shape) for a in axes_t.data.reshape(-1)}))
    n = math.prod(x.shape[a] for a in axes)
    scale = np.float32(x.scale[0]) / np.float32(out.scale[0])
    bias = np.float32(np.float32(-int(x.zero_point[0])) * scale) * np.float32(n)
    for semantics in ("tflite", "tflite_builtin"):
        mod = from_tflite(path, semantics=semantics)
        for inputs, _ in stored_samples(path):
            sums = inputs[0].astype(np.int64).sum(axis=axes, keepdims=op.options["KeepDims"])
            v = (sums.astype(np.float32) * scale).astype(np.float32) + bias
            want = np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)
            want = np.clip(want + int(out.zero_point[0]), -128, 127).astype(np.int8)
            got = interpret(mod, inputs)[0]
            np.testing.assert_array_equal(got, want.reshape(got.shape))


@pytest.mark.parametrize("path", OPS, ids=model_ids(OPS))
def test_spans_and_names(path):
    """Every call carries (operator index, builtin name, output tensor name); params and outputs
    are named after the model's tensors."""
    m = read_model(path.read_bytes())
    mod = from_tflite(path)
    main = mod["main"]
    assert [p.name_hint for p in main.params] == [m.tensors[i].name for i in m.inputs]
    assert list(mod.attrs["input_names"]) == [m.tensors[i].name for i in m.inputs]
    assert list(mod.attrs["output_names"]) == [m.tensors[i].name for i in m.outputs]
    from partita.ir import iter_calls

    calls = list(iter_calls(main))
    assert calls
    for call in calls:
        span = call.span
        assert span is not None and span.index is not None, call.short()
        op = m.operators[span.index]
        assert span.op_type == op.name
        assert span.tensor in {m.tensors[i].name for i in op.outputs}
