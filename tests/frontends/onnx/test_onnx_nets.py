"""Whole networks (tf2onnx exports of Keras MobileNet v1/v2 and a ResNet-style net, and the
torch.onnx.export MobileNetV2, quantized by quantize_static; and the full-size MobileNet v1/v2
1.0 224 benchmark networks) against ONNX Runtime, and their layout conversion to NHWC.

Measured figures (docs/onnx.md): QOperator models are bit-exact at every optimization level.
QDQ models become qnn ops that follow ONNX Runtime's fused QDQ kernels, except the groups it
leaves unfused (int8 activations that fan out), which keep MLAS's float arithmetic: bit-exact
against its default level, within a few LSB of its unfused float path (DISABLE_ALL).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_cases import feeds_for, lsb_diff, models, ort_run, output_scale
from partita.frontends import from_onnx

import partita as P
from partita.ir import Call, iter_calls, post_order
from partita.passes import ConvertLayout, InferType, Sequential, SimplifyExpr

NETS = [p for p in models("nets") + models("large") if p.name.count(".") == 2]
FLOAT_NETS = [p for p in models("nets") if p.name.count(".") == 1]


@pytest.fixture(scope="module")
def imported():
    return {}


def _mod(path, cache, **options):
    key = (path, tuple(options.items()))
    if key not in cache:
        cache[key] = from_onnx(path, ort_threads=1, **options)  # as onnx_cases.ort_run
    return cache[key]


@pytest.mark.parametrize("path", NETS, ids=lambda p: p.name[:-5])
def test_net_against_onnxruntime(path, imported):
    mod = _mod(path, imported)
    feeds = feeds_for(mod, seed=1)
    (got,) = P.interpret(mod, feeds)
    scale = output_scale(path)
    name = path.name[:-5]
    # unoptimized, ONNX Runtime runs QDQ groups in float: exact integer sums come closest
    exact = P.interpret(_mod(path, imported, ort_cpu="vnni"), feeds)[0] if ".qdq_" in name else got
    for level in ("disable_all", "enable_all"):
        (want,) = ort_run(path, feeds, level)
        got = exact if level == "disable_all" else P.interpret(mod, feeds)[0]
        d = lsb_diff(want, got, scale)
        if ".qop_" in name:
            assert got.tobytes() == want.tobytes(), (level, d.max())
        elif level == "enable_all":
            assert got.tobytes() == want.tobytes(), (level, d.max())
        else:
            assert d.max() <= 3, (level, d.max())
    assert np.argmax(got) == np.argmax(want)


@pytest.mark.parametrize("path", FLOAT_NETS, ids=lambda p: p.stem)
def test_float_net(path):
    mod = from_onnx(path)
    feeds = feeds_for(mod)
    (want,) = ort_run(path, feeds)
    np.testing.assert_allclose(P.interpret(mod, feeds)[0], want, rtol=1e-4, atol=1e-4)


def _convs(e):
    return isinstance(e, Call) and e.op.name in ("nn.conv2d", "qnn.conv2d")


def _transposes_between_convs(body) -> list:
    """Transposes with a convolution both above and below them."""
    order = post_order(body)
    above, users = {}, {}
    for e in order:
        kids = [a for a in (e.args if isinstance(e, Call) else getattr(e, "fields", ()))]
        above[id(e)] = any(_convs(k) or above.get(id(k), False) for k in kids)
        for k in kids:
            users.setdefault(id(k), []).append(e)
    below = {}
    for e in reversed(order):
        below[id(e)] = any(_convs(u) or below.get(id(u), False) for u in users.get(id(e), []))
    return [e for e in order if isinstance(e, Call) and e.op.name == "transpose"
            and above[id(e)] and below[id(e)]]


@pytest.mark.parametrize("path", [p for p in NETS if "s8s8" in p.name] + FLOAT_NETS[:1],
                         ids=lambda p: p.name[:-5])
def test_convert_layout_leaves_no_transpose_between_convolutions(path, imported):
    mod = _mod(path, imported)
    layouts = {"nn.conv2d": ("NHWC", "HWIO"), "qnn.conv2d": ("NHWC", "HWIO")}
    nhwc = Sequential([ConvertLayout(desired_layouts=layouts), SimplifyExpr(), InferType()])(mod)
    convs = [c for c in iter_calls(nhwc["main"].body) if _convs(c)]
    assert convs and all(c.attrs.data_layout == "NHWC" for c in convs)
    assert _transposes_between_convs(nhwc["main"].body) == []
    feeds = feeds_for(mod)
    assert P.interpret(nhwc, feeds)[0].tobytes() == P.interpret(mod, feeds)[0].tobytes()
