"""The shipped main-job model: imports, equals TFLite bit for bit, and classifies digits."""

from __future__ import annotations

import io

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P
from partita.build import build
from partita.cli.demo import MODEL, TEST_SET, data_path, run_demo


def test_the_model_equals_tflite_and_keeps_its_recorded_accuracy():
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    with np.load(data_path(TEST_SET)) as z:
        images, recorded = z["images"], float(z["int8_accuracy"])
    assert recorded > 0.9
    mod = from_tflite(str(data_path(MODEL)))
    it = litert.Interpreter(
        model_path=str(data_path(MODEL)),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
    )
    it.allocate_tensors()
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    for image in images[:20]:
        it.set_tensor(inp, image[None])
        it.invoke()
        assert np.array_equal(P.interpret(mod, [image[None]])[0], it.get_tensor(out))


def test_demo_runs_and_reports(capsys):
    out = io.StringIO()
    status = run_demo(out, target="ref", limit=30, say=lambda m: None)
    text = out.getvalue()
    assert status == 0, text
    assert "accuracy:" in text and "placement: 66 source ops" in text
    if "TFLite (reference kernels)" in text:
        assert "30/30 outputs bit-exact" in text


@pytest.mark.slow
def test_partita_reaches_the_recorded_accuracy_on_the_whole_test_split():
    """All 450 held-out digits through the main job's build ("npu, llvm"): the int8 accuracy
    equals the one tools/gen_digits_model.py measured with TFLite's reference kernels, to the
    image. (The interpreter is held to TFLite bit for bit above; the interpreter takes ~0.2 s an
    image, the build milliseconds.)"""
    with np.load(data_path(TEST_SET)) as z:
        images, labels, recorded = z["images"], z["labels"], float(z["int8_accuracy"])
    exe = build(from_tflite(str(data_path(MODEL))), "npu, llvm")
    hits = sum(int(exe.run(x[None])[0].argmax() == y) for x, y in zip(images, labels))
    assert len(labels) == 450
    assert hits == round(recorded * len(labels))
