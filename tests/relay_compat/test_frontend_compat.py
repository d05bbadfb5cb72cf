"""relay.frontend.from_tflite gives TVM's TFLite graph (HWIO regular convolution weights, a
scalar 0 for an all-zero kernel zero point) with the same bits as partita's own import."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partita import relay
from partita.ir import Call
from partita.ir.visitor import post_order

MODEL = Path(__file__).parents[1] / "models/tflite/nets/mobilenet_v1_025_128.tflite"


def _convs(mod):
    return [n for n in post_order(mod["main"]) if type(n) is Call and n.op.name == "qnn.conv2d"]


def test_from_tflite_gives_tvms_graph_with_the_same_bits():
    tvm_mod, params = relay.frontend.from_tflite(str(MODEL))
    own, _ = relay.frontend.from_tflite(str(MODEL), layout="tflite")
    assert params == {}
    regular = [c for c in _convs(tvm_mod) if c.attrs.groups == 1]
    assert regular and all(c.attrs["kernel_layout"] == "HWIO" for c in regular)
    assert all(c.args[3].data.ndim == 0 for c in regular)  # the kernel zero point
    own_regular = [c for c in _convs(own) if c.attrs.groups == 1]
    assert all(c.attrs.kernel_layout == "OHWI" for c in own_regular)
    for t, o in zip(regular, own_regular):
        np.testing.assert_array_equal(t.args[1].data, np.transpose(o.args[1].data, (1, 2, 3, 0)))
    data = np.random.default_rng(0).integers(-128, 128, (1, 128, 128, 3), dtype="int8")
    np.testing.assert_array_equal(relay.interpret(tvm_mod, [data]), relay.interpret(own, [data]))


def test_a_non_zero_kernel_zero_point_stays_a_vector():
    x = relay.var("x", shape=(1, 4, 4, 2), dtype="int8")
    w = relay.const(np.ones((3, 1, 1, 2), "int8"))
    conv = relay.qnn.op.conv2d(
        x,
        w,
        relay.const(0),
        relay.const(np.array([0, 1, 0], "int32")),
        relay.const(0.5),
        relay.const(np.array([0.1, 0.2, 0.3], "float32")),
        kernel_size=(1, 1),
        channels=3,
        data_layout="NHWC",
        kernel_layout="OHWI",
    )
    mod = relay.frontend.tvm_graph(relay.IRModule.from_expr(conv))
    out = mod["main"].body
    assert out.args[3].data.shape == (3,) and out.attrs.kernel_layout == "HWIO"
    data = np.random.default_rng(1).integers(-128, 128, (1, 4, 4, 2), dtype="int8")
    ref = relay.IRModule.from_expr(conv)
    np.testing.assert_array_equal(relay.interpret(mod, [data]), relay.interpret(ref, [data]))


# ---- TFLite MEAN in TVM's form --------------------------------------------------------------

MEAN_MODEL = Path(__file__).parents[1] / "models/tflite/ops/mean_hw.tflite"


def _tflite_ref(model: Path, x: np.ndarray) -> np.ndarray:
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(
        model_path=str(model),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
        num_threads=1,
    )
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def _ops(mod):
    return [n.op.name for n in post_order(mod["main"]) if type(n) is Call]


def test_tvm_mean_form_differs_from_tflite_so_the_default_keeps_qnn_mean():
    """TVM's cast -> mean -> qnn.requantize truncates S / n before the rescale; TFLite rescales
    the exact sum. On mean_hw.tflite (8x8 -> 1, s_in / s_out > 1) the two differ, as TFLite's
    own interpreter shows, so the default keeps qnn.mean and "tvm_always" gives TVM's graph."""
    keep, _ = relay.frontend.from_tflite(str(MEAN_MODEL))
    tvm_form, _ = relay.frontend.from_tflite(str(MEAN_MODEL), mean="tvm_always")
    assert "qnn.mean" in _ops(keep) and "mean" not in _ops(keep)
    assert _ops(tvm_form)[-3:] == ["cast", "mean", "qnn.requantize"]
    rng = np.random.default_rng(0)
    differ = 0
    for _ in range(20):
        x = rng.integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
        want = _tflite_ref(MEAN_MODEL, x)
        np.testing.assert_array_equal(relay.interpret(keep, [x])[0], want)
        differ += int(np.sum(relay.interpret(tvm_form, [x])[0] != want))
    assert differ > 0


def _mean_graph(shape, axis, params, keepdims=False):
    x = relay.var("x", shape=shape, dtype="int8")
    s_in, zp_in, s_out, zp_out = params
    mean = relay.qnn.op.mean(
        x,
        relay.const(np.float32(s_in)),
        relay.const(np.int32(zp_in)),
        relay.const(np.float32(s_out)),
        relay.const(np.int32(zp_out)),
        axis=axis,
        keepdims=keepdims,
    )
    return relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], mean)))


def _brute_exact(n, params) -> bool:
    """Independent of the ops: TFLite's formula and TVM's over every sum, in Python integers."""
    from partita.ops.emulation.tflite_fixedpoint import (
        multiply_by_quantized_multiplier,
        quantize_multiplier,
    )

    s_in, zp_in, s_out, zp_out = params
    m, e = quantize_multiplier(float(np.float32(s_in)) / float(np.float32(s_out)))
    k = min(n.bit_length() - 1, 32, 31 + e)
    mk, ek = (m << k) // n, e - k
    sums = np.arange(-128 * n, 127 * n + 1, dtype=np.int64)
    tfl = multiply_by_quantized_multiplier(sums - zp_in * n, mk, ek) + zp_out
    trunc = np.sign(sums) * (np.abs(sums) // n)
    tvm = multiply_by_quantized_multiplier(trunc - zp_in, m, e) + zp_out
    return bool(np.array_equal(np.clip(tfl, -128, 127), np.clip(tvm, -128, 127)))


@pytest.mark.parametrize(
    "n,params",
    [
        (9, (0.02, 0, 0.2, 0)),  # s_in / s_out = 0.1, zero points 0: exact
        (16, (0.0235294122248888, -128, 0.014396238140761852, -128)),  # MobileNet v1's: not
        (49, (0.02, 0, 0.2, 0)),
        (4, (0.02, -128, 0.02, 0)),
    ],
)
def test_tvm_mean_is_exact_agrees_with_a_brute_force_count(n, params):
    from partita.relay.frontend import tvm_mean_is_exact

    p = [np.float32(params[0]), np.int32(params[1]), np.float32(params[2]), np.int32(params[3])]
    assert tvm_mean_is_exact(n, "int8", p) == _brute_exact(n, params)


def test_an_exact_mean_is_rewritten_to_tvms_form_with_the_same_bits():
    from partita.relay.frontend import tvm_graph

    own = _mean_graph((1, 3, 3, 5), (1, 2), (0.02, 0, 0.2, 0))
    tvm_mod = relay.transform.InferType()(tvm_graph(own))
    assert _ops(tvm_mod) == ["cast", "mean", "qnn.requantize"]
    rq = [n for n in post_order(tvm_mod["main"]) if type(n) is Call][-1]
    assert rq.checked_type == own["main"].body.checked_type
    rng = np.random.default_rng(1)
    extremes = [np.full((1, 3, 3, 5), v, np.int8) for v in (-128, 127, 0, -1)]
    for x in extremes + [rng.integers(-128, 128, (1, 3, 3, 5), dtype=np.int8) for _ in range(20)]:
        np.testing.assert_array_equal(relay.interpret(tvm_mod, [x]), relay.interpret(own, [x]))
    # the same MEAN with parameters where truncation shows stays qnn.mean, unless forced
    inexact = _mean_graph((1, 4, 4, 5), (1, 2), (0.0235294122248888, -128, 0.0144, -128))
    assert _ops(tvm_graph(inexact)) == ["qnn.mean"]
    assert _ops(tvm_graph(inexact, mean="tvm_always"))[-1] == "qnn.requantize"
    assert _ops(tvm_graph(inexact, mean="qnn")) == ["qnn.mean"]
    with pytest.raises(ValueError, match="mean must be one of"):
        tvm_graph(inexact, mean="relay")


def test_relays_integer_mean_truncates_toward_zero():
    x = relay.var("x", shape=(2, 3), dtype="int32")
    mod = relay.transform.InferType()(
        relay.IRModule.from_expr(relay.Function([x], relay.mean(x, axis=1)))
    )
    data = np.array([[-1, -1, 0], [5, 0, 0]], np.int32)
    np.testing.assert_array_equal(relay.interpret(mod, [data])[0], np.array([0, 1], np.int32))
