"""from_onnx(match="ort_disable_all"): bit for bit against ONNX Runtime with graph optimizations
disabled — every whole network (QDQ and QOperator), every per-op model whose output is quantized,
and the float Conv / Gemm / MatMul / GlobalAveragePool models — for 1 and 2 ONNX Runtime threads.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx_cases import LEVELS, feeds_for, models, ort
from partita.frontends import from_onnx
from partita.frontends.onnx import ONNXError
from partita.frontends.onnx.frontend import ort_default_threads

import partita as P
from partita.ir import iter_calls

NETS = [p for p in models("nets") if p.name.count(".") == 2]
# float ops whose ONNX Runtime kernels are not emulated (MLAS logistic/tanh/softmax, pooling
# windows, ReduceMean, linear Resize): only quantize_static models with a quantized output count
NOT_EMULATED = {"avg_pool", "avg_pool_ceil", "avg_pool_pad", "reduce_mean", "reduce_mean_c",
                "resize_linear", "resize_linear_ac", "sigmoid", "softmax", "tanh"}
OPS = [p for p in models("ops") if p.name.split(".")[0] not in NOT_EMULATED]


def _ort(path, feeds, threads: int):
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS["disable_all"]
    so.intra_op_num_threads, so.log_severity_level = threads, 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(
        None, feeds)


def _bit_exact(path, threads: int, seeds) -> None:
    mod = from_onnx(path, match="ort_disable_all", ort_threads=threads)
    for seed in seeds:
        feeds = feeds_for(mod, seed)
        got = P.interpret(mod, feeds)
        for want, out in zip(_ort(path, feeds, threads), got):
            assert out.dtype == want.dtype and out.shape == want.shape
            assert out.tobytes() == want.tobytes(), (seed, np.mean(out != want))


@pytest.mark.parametrize("path", NETS, ids=lambda p: p.name[:-5])
def test_net_is_bit_exact_against_disable_all(path):
    _bit_exact(path, 1, seeds=(0, 1))


def test_two_threads():
    # ONNX Runtime's thread count changes MLAS's K blocking for some layers (tests/ops/
    # test_mlas_ops.py shows a convolution whose bits differ); the import records it
    path = models("nets", "mobilenet_v2_035_96.qdq_s8s8_pc.onnx")[0]
    _bit_exact(path, 2, seeds=(0,))
    two = from_onnx(path, match="ort_disable_all", ort_threads=2)
    threads = {c.attrs.threads for c in iter_calls(two["main"]) if c.op.name == "nn.conv2d"}
    assert threads == {2}


@pytest.mark.parametrize("path", OPS, ids=lambda p: p.name[:-5])
def test_op_model_is_bit_exact_against_disable_all(path):
    _bit_exact(path, 1, seeds=(0, 1))


def test_mlas_groups_stay_float_and_other_groups_become_qnn():
    path = models("nets", "mobilenet_v2_035_96.qdq_u8s8_pt.onnx")[0]
    ops = [c.op.name for c in iter_calls(from_onnx(path, match="ort_disable_all")["main"])]
    assert "qnn.conv2d" not in ops and "qnn.add" not in ops and "qnn.mean" not in ops
    assert ops.count("nn.conv2d") == 52 and ops.count("add") == 10 and "nn.gemm" in ops
    calls = iter_calls(from_onnx(path, match="ort_disable_all")["main"])
    assert all(c.attrs.accumulate == "mlas" for c in calls
               if c.op.name in ("nn.conv2d", "nn.gemm", "nn.global_avg_pool2d"))
    sig = models("ops", "sigmoid.qdq_u8s8_pt.onnx")[0]
    names = [c.op.name for c in iter_calls(from_onnx(sig, match="ort_disable_all")["main"])]
    assert "qnn.sigmoid" in names  # its LUT reproduces the unfused float path exactly


def test_default_match_is_unchanged():
    path = models("ops", "conv.qdq_u8s8_pt.onnx")[0]
    calls = list(iter_calls(from_onnx(path)["main"]))
    assert "qnn.conv2d" in [c.op.name for c in calls]
    fconv = [c for c in iter_calls(from_onnx(models("ops", "conv.onnx")[0])["main"])
             if c.op.name == "nn.conv2d"]
    assert fconv[0].attrs.accumulate == "exact"


def test_bad_match_and_threads():
    path = models("ops", "conv.onnx")[0]
    with pytest.raises(ONNXError, match="match must be one of"):
        from_onnx(path, match="ort_extended")
    with pytest.raises(ONNXError, match="ort_threads must be a positive int"):
        from_onnx(path, match="ort_disable_all", ort_threads=0)
    assert ort_default_threads() >= 1
    assert "ort_disable_all" in from_onnx.__doc__


def test_constant_gemm_weight_is_prepacked():
    calls = iter_calls(from_onnx(models("ops", "gemm.onnx")[0], match="ort_disable_all")["main"])
    gemm = [c for c in calls if c.op.name in ("nn.gemm", "nn.dense")]
    assert [c.attrs.accumulate for c in gemm] == ["mlas_packed"]
    net = models("nets", "resnet_mini_64.qdq_u8s8_pt.onnx")[0]  # B is a DequantizeLinear output
    calls = iter_calls(from_onnx(net, match="ort_disable_all")["main"])
    assert [c.attrs.accumulate for c in calls if c.op.name == "nn.gemm"] == ["mlas"]


@pytest.mark.parametrize("path", [p for p in NETS if ".qdq_" in p.name], ids=lambda p: p.name[:-5])
def test_default_import_leaves_float_what_ort_leaves_unfused(path, tmp_path):
    # the oracle: the float Conv / Add nodes left in ONNX Runtime's own optimized graph
    so = ort.SessionOptions()
    so.optimized_model_filepath, so.log_severity_level = str(tmp_path / "opt.onnx"), 3
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    opt = onnx.load(tmp_path / "opt.onnx")
    want = sorted(n.name for n in opt.graph.node if n.domain == "" and n.op_type in ("Conv", "Add"))
    calls = iter_calls(from_onnx(path, ort_threads=1)["main"])
    got = sorted(c.span.source for c in calls if c.op.name in ("nn.conv2d", "add"))
    assert got == want
    # uint8 activations fuse everywhere; int8 ones only where they do not fan out (residuals)
    assert bool(want) == ("s8s8" in path.name and "mobilenet_v1" not in path.name)


def _fan_out_graph(zp_dtype, readers: int, dq_is_output: bool = False):
    """conv0 -> Q -> DQ -> `readers` float Adds (hand-built, never run)."""
    from onnx import TensorProto, helper, numpy_helper

    zp = numpy_helper.from_array(np.zeros((), zp_dtype), "zp")
    sc = numpy_helper.from_array(np.ones((), np.float32), "s")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv0"),
             helper.make_node("QuantizeLinear", ["c", "s", "zp"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["dq"], name="dq")]
    nodes += [helper.make_node("Add", ["dq", "x"], [f"a{i}"], name=f"add{i}")
              for i in range(readers)]
    outs = [f"a{i}" for i in range(readers)] + (["dq"] if dq_is_output else [])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs]
    return helper.make_graph(nodes, "g", [], vi, [zp, sc]), {"zp": np.zeros((), zp_dtype),
                                                            "s": np.ones((), np.float32)}


def test_unfused_rule_on_hand_built_graphs():
    from partita.frontends.onnx.ort_fusion import ort_unfused_nodes

    # int8 read by one node: ONNX Runtime makes the pair uint8 and fuses both groups
    assert ort_unfused_nodes(*_fan_out_graph(np.int8, 1)) == set()
    # fanned out: the producer and both readers stay float (node indices 0, 3, 4)
    assert ort_unfused_nodes(*_fan_out_graph(np.int8, 2)) == {0, 3, 4}
    assert ort_unfused_nodes(*_fan_out_graph(np.int8, 1, dq_is_output=True)) == {0, 3}
    assert ort_unfused_nodes(*_fan_out_graph(np.int8, 0, dq_is_output=True)) == set()
    # uint8 activations fuse whatever their fan-out
    assert ort_unfused_nodes(*_fan_out_graph(np.uint8, 2)) == set()
