"""The torch.onnx.export network (tools/gen_onnx_torch_models.py: gen_torch_models' MobileNetV2,
dynamo exporter at opset 18, quantize_static QDQ S8S8 per-channel and QOperator U8S8 per-tensor)
against ONNX Runtime on the smooth images it is made for (test_onnx_nets.py and
test_onnx_mlas.py also run it, on uniform inputs, through their glob of nets/).

Measured (docs/onnx.md, 64 images, 2 threads): bit-exact, the QOperator model at both levels,
the QDQ model against the level it is imported for.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_cases import LEVELS, models, ort, smooth_image
from partita.frontends import from_onnx

import partita as P
from partita.ir import iter_calls

NAME = "torch_mobilenetv2_64"
QDQ = models("nets", f"{NAME}.qdq_s8s8_pc.onnx")
QOP = models("nets", f"{NAME}.qop_u8s8_pt.onnx")
FLOAT = models("nets", f"{NAME}.onnx")
pytestmark = pytest.mark.skipif(not (QDQ and QOP and FLOAT), reason="torch_* models missing")
IMAGES = [smooth_image((1, 3, 64, 64), seed) for seed in (0, 1)]


def _ort(path, x, level: str, threads: int) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.intra_op_num_threads, so.log_severity_level = threads, 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


def _assert_bit_exact(mod, path, level: str, threads: int) -> None:
    for x in IMAGES:
        (got,) = P.interpret(mod, {"input": x})
        want = _ort(path, x, level, threads)
        assert got.dtype == want.dtype and got.shape == want.shape == (1, 10)
        assert got.tobytes() == want.tobytes(), (level, np.abs(got - want).max())
        assert np.argmax(got) == np.argmax(want)


@pytest.mark.parametrize("threads", [1, 2])
def test_qdq_is_bit_exact_against_disable_all(threads):
    # the importer's ort_threads must equal the session's: MLAS splits its GEMMs per thread
    mod = from_onnx(QDQ[0], match="ort_disable_all", ort_threads=threads)
    convs = [c for c in iter_calls(mod["main"]) if c.op.name == "nn.conv2d"]
    assert len(convs) == 25 and {c.attrs.threads for c in convs} == {threads}
    _assert_bit_exact(mod, QDQ[0], "disable_all", threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_qdq_default_import_is_bit_exact_against_enable_all(threads):
    # ONNX Runtime fuses the groups of uint8 activations; the int8 residual tensors, which fan
    # out, stay int8, so the 6 convolutions and 3 Adds touching them run unfused in MLAS
    mod = from_onnx(QDQ[0], ort_threads=threads)
    calls = list(iter_calls(mod["main"]))
    ops = [c.op.name for c in calls]
    assert ops.count("qnn.conv2d") == 19 and ops.count("nn.conv2d") == 6
    assert ops.count("add") == 3 and "qnn.add" not in ops
    assert "qnn.mean" in ops and "qnn.dense" in ops
    assert {c.attrs.threads for c in calls if c.op.name == "nn.conv2d"} == {threads}
    _assert_bit_exact(mod, QDQ[0], "enable_all", threads)


@pytest.mark.parametrize("level", ["disable_all", "enable_all"])
def test_qoperator_is_bit_exact_at_both_levels(level):
    _assert_bit_exact(from_onnx(QOP[0]), QOP[0], level, 1)


def test_float_export_agrees_and_classifies_inputs_apart():
    mod = from_onnx(FLOAT[0])
    outs = []
    for x in IMAGES:
        (got,) = P.interpret(mod, {"input": x})
        np.testing.assert_allclose(got, _ort(FLOAT[0], x, "enable_all", 1), rtol=1e-4,
                                   atol=1e-4)
        outs.append(got)
    # smooth inputs move the logits (uniform noise would leave them almost constant)
    assert np.abs(outs[0] - outs[1]).max() > 0.1


def test_spans_name_the_exporter_nodes():
    mod = from_onnx(QDQ[0])
    conv = next(c for c in iter_calls(mod["main"]) if c.op.name == "qnn.conv2d")
    assert conv.span.op_type == "Conv" and conv.span.source.startswith("node_Conv")
