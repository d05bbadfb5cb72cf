"""Per-op ONNX models (tests/models/onnx/ops) against ONNX Runtime.

Float models: within float32 rounding of ONNX Runtime (accumulation order differs). Quantized
models (quantize_static QDQ and QOperator, S8S8 and U8S8, per-tensor and per-channel): bit-exact
against ONNX Runtime with graph optimizations disabled and at its default level.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_cases import feeds_for, models, ort_run
from partita.frontends import from_onnx

import partita as P
from partita.ir import iter_calls

FLOAT = [p for p in models("ops") if p.name.count(".") == 1]
QUANT = [p for p in models("ops") if p.name.count(".") == 2]


@pytest.mark.parametrize("path", FLOAT, ids=lambda p: p.stem)
def test_float_op_matches_onnxruntime(path):
    mod = from_onnx(path)
    feeds = feeds_for(mod)
    (want,) = ort_run(path, feeds)
    (got,) = P.interpret(mod, feeds)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


# quantize_static leaves these ops in float (only their input is quantized)
FLOAT_TAIL = {"reduce_mean", "tanh"}


def imports(path) -> dict:
    """The import to hold against each ONNX Runtime level. QOperator nodes run ONNX Runtime's
    integer kernels at every level: the default import, which follows this machine's kernels.
    Unoptimized, ONNX Runtime runs QDQ groups in float, which the exact integer sums
    (ort_cpu="vnni") reproduce; optimized, it fuses them into its integer kernels, which
    saturate pairs on CPUs without VNNI: the default import again (docs/onnx.md)."""
    here = from_onnx(path)
    return {"disable_all": from_onnx(path, ort_cpu="vnni") if ".qdq_" in path.name else here,
            "enable_all": here}


@pytest.mark.parametrize("path", QUANT, ids=lambda p: p.name[:-5])
def test_quantized_op_is_bit_exact(path):
    mods = imports(path)
    if path.name.split(".")[0] in FLOAT_TAIL:
        feeds = feeds_for(mods["disable_all"])
        np.testing.assert_allclose(P.interpret(mods["disable_all"], feeds)[0],
                                   ort_run(path, feeds)[0], rtol=2e-6, atol=1e-6)
        return
    for seed in range(2):
        feeds = feeds_for(mods["enable_all"], seed)
        for level, mod in mods.items():
            (got,) = P.interpret(mod, feeds)
            (want,) = ort_run(path, feeds, level)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), (level, np.max(np.abs(got - want)))


QDQ_BECOMES = {
    "conv": "qnn.conv2d", "conv_relu6_s2": "qnn.conv2d", "conv_depthwise": "qnn.conv2d",
    "gemm": "qnn.dense", "gemm_notrans": "qnn.dense", "matmul": "qnn.dense", "add": "qnn.add",
    "mul": "qnn.mul", "mul_const": "qnn.mul", "avg_pool": "qnn.avg_pool2d",
    "global_avg_pool": "qnn.mean", "concat": "qnn.concatenate", "sigmoid": "qnn.sigmoid",
    "leaky_relu": "qnn.leaky_relu", "max_pool": "nn.max_pool2d",
}


@pytest.mark.parametrize("name", sorted(QDQ_BECOMES))
def test_qdq_groups_become_qnn_ops(name):
    """The QDQ rewrites leave no float version of the op: it runs on integers."""
    mod = from_onnx(models("ops", f"{name}.qdq_s8s8_pc.onnx")[0])
    ops = [c.op.name for c in iter_calls(mod["main"].body)]
    assert QDQ_BECOMES[name] in ops
    floats = {"nn.conv2d", "nn.dense", "add", "multiply", "nn.avg_pool2d", "mean",
              "nn.global_avg_pool2d", "concatenate", "sigmoid", "nn.leaky_relu"}
    float_ops = [c for c in iter_calls(mod["main"].body)
                 if c.op.name in floats and c.checked_type.dtype == "float32"]
    assert not float_ops, [c.op.name for c in float_ops]
    # quantize at the input and dequantize at the output are all that stays of the QDQ pairs
    assert ops.count("qnn.dequantize") == 1


def test_qoperator_ops_map_to_qnn_ops():
    mod = from_onnx(models("ops", "concat.qop_u8s8_pc.onnx")[0])
    names = [c.op.name for c in iter_calls(mod["main"].body)]
    assert "qnn.concatenate" in names and "qnn.mul" in names
    conv = from_onnx(models("ops", "conv.qop_s8s8_pt.onnx")[0])
    rq = [c for c in iter_calls(conv["main"].body) if c.op.name == "qnn.requantize"]
    assert rq and rq[0].attrs.semantics == "onnx" and rq[0].attrs.axis == 1


def test_shape_arithmetic_is_folded():
    mod = from_onnx(models("ops", "shape_reshape.onnx")[0])
    assert [c.op.name for c in iter_calls(mod["main"].body)] == ["reshape"]


OPSET_CASES = ["reduce_mean", "tensor_ops", "pad", "resize_nearest", "resize_linear", "softmax",
               "conv.qdq_s8s8_pc", "gemm.qdq_u8s8_pt", "max_pool.qdq_u8s8_pt"]


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("name", OPSET_CASES)
def test_other_opsets(name, opset):
    """The same models converted by onnx.version_converter (ReduceMean, Split, Pad and Resize
    changed their operands in opsets 18 and 19)."""
    import onnx
    from onnx import version_converter

    try:
        model = version_converter.convert_version(onnx.load(models("ops", f"{name}.onnx")[0]),
                                                  opset)
    except RuntimeError:
        pytest.skip(f"onnx cannot convert {name} to opset {opset}")
    mod = from_onnx(model, ort_cpu="vnni")  # against the unoptimized (float QDQ) run
    feeds = feeds_for(mod)
    (want,) = ort_run(model.SerializeToString(), feeds)
    np.testing.assert_allclose(P.interpret(mod, feeds)[0], want, rtol=2e-6, atol=1e-6)
