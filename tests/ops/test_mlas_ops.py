"""accumulate="mlas" on nn.conv2d, nn.dense, nn.batch_matmul, nn.gemm and nn.global_avg_pool2d:
hand-computed float32 orders, exact-rational FMA, bad attributes, and ONNX Runtime (MLAS) itself
as the oracle on single-node models (bit for bit, 1 and 2 threads)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_helpers import attr_error, run, type_error, type_of

from partita.ops.emulation.onnxruntime_mlas import fma_f32

F32 = np.float32
E11, E12 = 2.0 ** -11, 2.0 ** -12


def round_f32(exact: Fraction) -> np.float32:
    """``exact`` rounded to float32, nearest, ties to even (decided on the rational value)."""
    x = F32(float(exact))
    cands = [x, np.nextafter(x, F32(np.inf)), np.nextafter(x, F32(-np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - exact),
                                     int(np.array(c).view(np.int32)) & 1))


def test_fma_rounds_once_where_float64_double_rounds():
    a, b, c = F32(1 + 2.0 ** -23), F32(2.0 ** -24 * (1 - 2.0 ** -23)), F32(1 + 2.0 ** -23)
    naive = F32(np.float64(a) * np.float64(b) + np.float64(c))  # lands on a float32 tie
    assert naive == F32(1 + 2.0 ** -22)
    assert fma_f32(np.array(a), np.array(b), np.array(c)) == F32(1 + 2.0 ** -23)


finite = st.floats(-1e6, 1e6, width=32, allow_subnormal=False)


@settings(max_examples=300, deadline=None)
@given(finite, finite, finite)
def test_fma_matches_exact_rational_rounding(a, b, c):
    want = round_f32(Fraction(a) * Fraction(b) + Fraction(c))
    got = fma_f32(np.array(a, F32), np.array(b, F32), np.array(c, F32))
    assert got == want or (got == 0 and want == 0)


def _orders():
    # k0: -1 * (1 + 2^-11) = -(1 + 2^-11) exactly; k1: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24
    data = np.array([[-1.0, 1 + E12]], F32)
    weight = np.array([[1 + E11], [1 + E12]], F32)  # [K, N] with N = 1
    return data, weight


def test_m1_kernel_multiplies_and_adds_separately():
    data, weight = _orders()
    zero = np.zeros((), F32)
    # M = 1: MLAS's AVX M=1 kernel rounds the product (1 + 2^-11 + 2^-24 -> 1 + 2^-11) first
    got = run("nn.gemm", data, weight, zero, transpose_b=False, accumulate="mlas")
    assert got.tolist() == [[0.0]]
    assert run("nn.gemm", data, weight, zero, transpose_b=False).tolist() == [[2.0 ** -24]]


def test_blocked_kernel_chains_fmas_in_k_order():
    data, weight = _orders()
    data2 = np.repeat(data, 2, axis=0)  # M = 2 takes the FMA kernel: fma(k1, acc = k0 product)
    weight2 = np.repeat(weight, 2, axis=1)
    got = run("nn.gemm", data2, weight2, np.zeros((2,), F32), transpose_b=False,
              accumulate="mlas")
    assert got.tolist() == [[2.0 ** -24] * 2] * 2
    # k order reversed: the first product is rounded before the chain starts
    got = run("nn.gemm", data2[:, ::-1].copy(), weight2[::-1].copy(), np.zeros((2,), F32),
              transpose_b=False, accumulate="mlas")
    assert got.tolist() == [[0.0] * 2] * 2


def test_gemm_bias_joins_m1_sum_after_the_first_four_products():
    # products 2^24, 1, 1, 1 then 1: ((2^24 + 1) + 1) + 1 = 2^24 in float32, + C, then + 1
    data = np.ones((1, 5), F32)
    weight = np.array([[2.0 ** 24], [1], [1], [1], [1]], F32)
    got = run("nn.gemm", data, weight, np.array([2.0], F32), transpose_b=False,
              accumulate="mlas")
    assert got.tolist() == [[2.0 ** 24 + 4]]  # (2^24 + 2) + 1 rounds to even
    # (C added after all products would give 2^24 + 2)
    exact = run("nn.gemm", data, weight, np.array([2.0], F32), transpose_b=False)
    assert exact.tolist() == [[2.0 ** 24 + 6]]


def test_global_avg_pool_lane_order():
    x = np.array([2.0 ** 24, 1, 1, 1, 2], F32).reshape(1, 1, 1, 5)
    got = run("nn.global_avg_pool2d", x, accumulate="mlas")
    # lanes [2^24, 1, 1, 1]: (2^24 + 1) + (1 + 1) = 2^24 + 2, + 2 = 2^24 + 4, / 5
    assert got.reshape(-1)[0] == F32(2.0 ** 24 + 4) / F32(5)
    assert run("nn.global_avg_pool2d", x).reshape(-1)[0] == F32((2.0 ** 24 + 5) / 5)
    nhwc = run("nn.global_avg_pool2d", x.transpose(0, 2, 3, 1).copy(), layout="NHWC",
               accumulate="mlas")
    assert nhwc.reshape(-1)[0] == got.reshape(-1)[0]


def test_bad_mlas_attributes():
    with type_error('accumulate="mlas" needs float32'):
        type_of("nn.conv2d", ((1, 2, 4, 4), "int8"), ((2, 2, 1, 1), "int8"),
                out_dtype="int32", accumulate="mlas")
    with attr_error("threads must be positive"):
        type_of("nn.dense", ((2, 3), "float32"), ((4, 3), "float32"), accumulate="mlas",
                threads=0)
    with attr_error("transpose_a"):
        type_of("nn.batch_matmul", ((2, 3, 4), "float32"), ((2, 3, 5), "float32"),
                transpose_a=True, transpose_b=False, accumulate="mlas")
    with type_error("equal batch sizes"):
        type_of("nn.batch_matmul", ((2, 3, 4), "float32"), ((1, 5, 4), "float32"),
                accumulate="mlas")
    with type_error("bias", r"\(3,\)", "does not broadcast", r"\(2, 4\)"):
        type_of("nn.gemm", ((2, 5), "float32"), ((4, 5), "float32"), ((3,), "float32"))
    with type_error("share one float dtype"):
        type_of("nn.gemm", ((2, 5), "float32"), ((4, 5), "float32"), ((4,), "float64"))
    with type_error('accumulate="mlas" needs float32 data'):
        type_of("nn.global_avg_pool2d", ((1, 2, 3, 3), "float64"), accumulate="mlas")


# ---- ONNX Runtime as the oracle ----------------------------------------------------------------


def _ort(node, inputs: dict, threads: int) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    vis = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in
           inputs.items()]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([node], "g", vis, [out]), ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads, so.log_severity_level = threads, 3
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def _data(rng, shape) -> np.ndarray:
    """Dequantized-like values: int8 steps times varied scales (many rounding boundaries)."""
    q = rng.integers(-127, 128, shape).astype(F32)
    return (q * F32(0.0137) * rng.uniform(0.5, 2, shape).astype(F32)).astype(F32)


CONVS = [  # data, weight, strides, pads (t, l, b, r), groups, dilation
    ((1, 3, 24, 24), (8, 3, 3, 3), (2, 2), (0, 0, 1, 1), 1, (1, 1)),
    ((1, 16, 12, 12), (16, 1, 3, 3), (1, 1), (1, 1, 1, 1), 16, (1, 1)),
    ((2, 12, 9, 9), (12, 1, 3, 3), (2, 2), (0, 0, 1, 1), 12, (2, 2)),
    ((1, 192, 12, 12), (32, 192, 1, 1), (1, 1), (0, 0, 0, 0), 1, (1, 1)),
    ((1, 112, 3, 3), (300, 112, 1, 1), (1, 1), (0, 0, 0, 0), 1, (1, 1)),
    ((1, 64, 1, 1), (70, 64, 1, 1), (1, 1), (0, 0, 0, 0), 1, (1, 1)),
    ((1, 40, 6, 6), (80, 40, 3, 3), (1, 1), (1, 1, 1, 1), 1, (1, 1)),
    ((1, 8, 10, 10), (16, 4, 3, 3), (1, 1), (1, 1, 1, 1), 2, (1, 1)),
    ((1, 1, 8, 8), (3, 1, 3, 8), (1, 1), (0, 0, 0, 0), 1, (1, 1)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CONVS, ids=lambda c: f"{c[0]}x{c[1]}g{c[4]}")
def test_conv2d_matches_onnxruntime(case, threads):
    from onnx import helper

    xs, ws, strides, pads, groups, dil = case
    rng = np.random.default_rng(len(xs) + ws[0])
    x, w = _data(rng, xs), _data(rng, ws)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=strides, group=groups,
                            pads=[pads[0], pads[1], pads[2], pads[3]], dilations=dil)
    want = _ort(node, {"x": x, "w": w}, threads)
    got = run("nn.conv2d", x, w, strides=strides, padding=pads, groups=groups, dilation=dil,
              accumulate="mlas", threads=threads)
    assert got.tobytes() == want.tobytes()
    # NHWC / HWIO give the same bits
    got = run("nn.conv2d", x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy(),
              strides=strides, padding=pads, groups=groups, dilation=dil, data_layout="NHWC",
              kernel_layout="HWIO", accumulate="mlas", threads=threads)
    assert got.transpose(0, 3, 1, 2).tobytes() == want.tobytes()


GEMMS = [(1, 300, 10), (1, 37, 21), (3, 200, 50), (40, 300, 40), (2, 130, 2), (30, 257, 1),
         (9, 160, 200)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("mkn", GEMMS, ids=str)
def test_gemm_and_dense_match_onnxruntime(mkn, trans_b, threads):
    from onnx import helper

    m, k, n = mkn
    rng = np.random.default_rng(m * k + n)
    a, b, c = _data(rng, (m, k)), _data(rng, (n, k) if trans_b else (k, n)), _data(rng, (n,))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=int(trans_b))
    want = _ort(node, {"a": a, "b": b, "c": c}, threads)
    got = run("nn.gemm", a, b, c, transpose_b=trans_b, accumulate="mlas", threads=threads)
    assert got.tobytes() == want.tobytes()
    if trans_b:
        node = helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)
        want = _ort(node, {"a": a, "b": b}, threads)
        assert run("nn.dense", a, b, accumulate="mlas", threads=threads).tobytes() == \
            want.tobytes()


def test_thread_count_changes_k_blocking():
    # 192 -> 32 channels on 12x12 pixels: 2 threads split the 144 pixels 80 + 64; for the
    # 64-pixel part StrideK doubles to 256, so K = 192 is one FMA chain instead of 128 + 64
    rng = np.random.default_rng(0)
    x, w = _data(rng, (1, 192, 12, 12)), _data(rng, (32, 192, 1, 1))
    one = run("nn.conv2d", x, w, accumulate="mlas", threads=1)
    two = run("nn.conv2d", x, w, accumulate="mlas", threads=2)
    assert np.mean(one != two) > 0.1


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_matmul_and_global_pool_match_onnxruntime(threads):
    from onnx import helper

    rng = np.random.default_rng(threads)
    x, y = _data(rng, (3, 20, 150)), _data(rng, (3, 150, 30))
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    want = _ort(node, {"x": x, "w": y}, threads)
    got = run("nn.batch_matmul", x, y, transpose_b=False, accumulate="mlas", threads=threads)
    assert got.tobytes() == want.tobytes()
    for shape in [(1, 24, 7, 7), (2, 5, 3, 3), (1, 3, 48, 48)]:
        p = _data(rng, shape)
        want = _ort(helper.make_node("GlobalAveragePool", ["x"], ["y"]), {"x": p}, threads)
        assert run("nn.global_avg_pool2d", p, accumulate="mlas").tobytes() == want.tobytes()


@pytest.mark.parametrize("trans_b", [False, True])
def test_prepacked_constant_weight_matches_onnxruntime(trans_b):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    a, c = _data(rng, (1, 300)), _data(rng, (12,))
    b = _data(rng, (12, 300) if trans_b else (300, 12))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=int(trans_b))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    packed = run("nn.gemm", a, b, c, transpose_b=trans_b, accumulate="mlas_packed")
    assert packed.tobytes() == want.tobytes()
    # a computed B would take the M=1 kernel instead, which sums differently here
    assert run("nn.gemm", a, b, c, transpose_b=trans_b, accumulate="mlas").tobytes() != \
        want.tobytes()
