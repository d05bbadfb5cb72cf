"""Whole networks (MobileNet v1/v2/v3, ResNet-style, EfficientNet; int8, uint8 and float I/O) and
the full-size benchmark networks: partita against TFLite's reference kernels and its optimized
builtin kernels, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from partita.frontends import from_tflite
from tflite_cases import SEMANTICS, Oracle, assert_same, model_ids, models, stored_samples

from partita import interpret
from partita.ir import iter_calls

NETS = models("nets")
LARGE = models("large")
pytestmark = pytest.mark.skipif(not NETS, reason="TFLite test networks not generated")


@pytest.fixture(scope="module")
def converted():
    cache = {}

    def get(path, semantics):
        if (path, semantics) not in cache:
            cache[path, semantics] = from_tflite(path, semantics=semantics)
        return cache[path, semantics]

    return get


@pytest.mark.parametrize("kernels", ["ref", "builtin"])
@pytest.mark.parametrize("path", NETS + LARGE, ids=model_ids(NETS + LARGE))
def test_stored_samples(path, kernels, converted):
    mod = converted(path, SEMANTICS[kernels])
    for inputs, want in stored_samples(path):
        assert_same(interpret(mod, inputs), want[kernels], f"{path.stem} vs {kernels}")


@pytest.mark.parametrize("kernels", ["ref", "builtin"])
@pytest.mark.parametrize("path", NETS, ids=model_ids(NETS))
def test_random_inputs(path, kernels, converted):
    """Two fresh inputs over the whole input range per network and kernel set."""
    oracle = Oracle(path, kernels)
    mod = converted(path, SEMANTICS[kernels])
    rng = np.random.default_rng(len(path.stem))
    for _ in range(2):
        x = oracle.random_inputs(rng)
        assert_same(interpret(mod, x), oracle(x), f"{path.stem} vs {kernels}")


@pytest.mark.parametrize("path", NETS, ids=model_ids(NETS))
def test_network_structure(path, converted):
    """Weights are bound constants, every call has a span, and the quantized networks keep
    their arithmetic in qnn ops (no float op between QUANTIZE and DEQUANTIZE)."""
    mod = converted(path, "tflite")
    calls = list(iter_calls(mod["main"]))
    assert all(c.span is not None and c.span.op_type for c in calls)
    convs = [c for c in calls if c.op_name == "qnn.conv2d"]
    assert convs and all(type(c.args[1]).__name__ == "Constant" for c in convs)
    float_ops = {"nn.conv2d", "nn.dense", "add", "multiply", "nn.softmax"}
    assert not [c.op_name for c in calls if c.op_name in float_ops]


def test_text_format_round_trip(converted):
    """Tensor names with ':' and ';' survive printing and parsing (the printer quotes them)."""
    import partita as P

    path = next(p for p in NETS if "v3" in p.stem)
    mod = converted(path, "tflite")
    text, constants = P.astext(mod)
    P.assert_structural_equal(P.parse(text, constants)["main"], mod["main"])


def test_docs_list_every_converted_operator():
    from pathlib import Path

    from partita.frontends.tflite import CONVERTERS

    doc = (Path(__file__).resolve().parents[3] / "docs" / "tflite.md").read_text()
    assert not [name for name in CONVERTERS if f"`{name}`" not in doc]
