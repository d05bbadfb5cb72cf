"""qnn.sigmoid / tanh / hardswish / leaky_relu against scalar transcriptions (qnn.softmax:
test_qnn_softmax.py).

The oracles are written independently of partita's kernels: plain Python ints for the
fixed-point code (gemmlowp, TFLite's reference kernels), numpy float32 scalars for float32 code,
exact rationals for fused multiply-adds. Every op is checked on all 256 int8 (and uint8) inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from qnn_helpers import clamp, fma_ref
from qnn_lut_helpers import (
    ALL_INT8,
    F32,
    all_inputs,
    drange,
    expf,
    qmult,
    rdbpot,
    round_away,
    run,
    srdhm,
    wrap,
)
from test_fixedpoint import c_div, mbqm_ref

import partita as P
from partita.ir import var
from partita.ops import get_op

# ---- expected table entries ----------------------------------------------------------------


def quantize_ort(y, s_out, zp_out, dtype):
    lo, hi = drange(dtype)
    v = F32(y) / F32(s_out)
    v = min(max(v, F32(lo - zp_out)), F32(hi - zp_out))
    return int(np.rint(v)) + zp_out


def tflite_lut_entry(q, s_in, zp_in, s_out, zp_out, f, dtype):
    x = F32(s_in) * F32(q - zp_in)
    rescaled = round_away(f(x) * (F32(1) / F32(s_out)))
    return clamp(int(F32(rescaled) + F32(zp_out)), dtype)


def ort_lut_entry(q, s_in, zp_in, s_out, zp_out, f, dtype):
    return quantize_ort(f(F32(s_in) * F32(q - zp_in)), s_out, zp_out, dtype)


def check_elementwise(name, entry, params, **attrs):
    for dtype, s_in, zp_in, s_out, zp_out in params:
        data = all_inputs(dtype)
        got = run(name, data, s_in, zp_in, s_out, zp_out, **attrs)
        want = [entry(int(q), s_in, zp_in, s_out, zp_out, dtype) for q in data]
        assert got.dtype == data.dtype
        assert got.tolist() == want, (dtype, s_in, zp_in, s_out, zp_out)


# ---- sigmoid / tanh -----------------------------------------------------------------------

# Found by search: SIG_TIE and TANH_TIE have table entries exactly at k + 1/2 (sigmoid(s * -94)
# * 256 = 0.5, tanh(s * 10) * 128 = 122.5), MLAS_FMA one where the fused multiply-adds change
# the result.
SIG_TIE, TANH_TIE, MLAS_FMA = 0.06634435802698135, 0.19093553721904755, 0.07168195396661758
SIGMOID = [
    ("int8", 0.05, 3, 1 / 256, -128),
    ("int8", 0.1, -128, 1 / 256, -128),
    ("int8", 0.0234, 17, 1 / 256, -128),
    ("int8", 0.7, 0, 1 / 256, -128),
    ("uint8", 0.06, 128, 1 / 256, 0),
    ("int8", 0.02, 0, 1 / 200, -100),
    ("int8", SIG_TIE, -19, 1 / 256, -128),
    ("int8", MLAS_FMA, -4, 1 / 256, -128),
]
TANH = [
    ("int8", 0.05, 3, 1 / 128, 0),
    ("int8", 0.1, -128, 1 / 128, 0),
    ("int8", 0.011, -7, 1 / 128, 0),
    ("uint8", 0.03, 120, 1 / 128, 128),
    ("int8", 0.02, 5, 1 / 100, -3),
    ("int8", TANH_TIE, 5, 1 / 128, 0),
]


def tfl_sigmoid(x):
    return F32(1) / (F32(1) + expf(-x))


def mlas_logistic(x):
    v = min(max(F32(x), F32(-18)), F32(18))
    v2 = v * v
    p = fma_ref(v2, F32(4.37031012579801e-11), F32(1.15627324459942e-07))
    for c in (6.08574864600143e-05, 8.51377133304701e-03, 2.48287947061529e-01):
        p = fma_ref(p, v2, F32(c))
    q = fma_ref(v2, F32(6.10247389755681e-13), F32(5.76102136993427e-09))
    for c in (
        6.29106785017040e-06,
        1.70198817374094e-03,
        1.16817656904453e-01,
        9.93151921023180e-01,
    ):
        q = fma_ref(q, v2, F32(c))
    return min(max((v * p) / q + F32(0.5), F32(0)), F32(1))


def mlas_tanh(x):
    v = min(max(F32(x), F32(-9)), F32(9))
    v2 = v * v
    p = fma_ref(v2, F32(-2.76076847742355e-16), F32(2.00018790482477e-13))
    for c in (
        -8.60467152213735e-11,
        5.12229709037114e-08,
        1.48572235717979e-05,
        6.37261928875436e-04,
        4.89352455891786e-03,
    ):
        p = fma_ref(p, v2, F32(c))
    q = fma_ref(v2, F32(1.19825839466702e-06), F32(1.18534705686654e-04))
    for c in (2.26843463243900e-03, 4.89352518554385e-03):
        q = fma_ref(q, v2, F32(c))
    return (v * p) / q


@pytest.mark.parametrize("semantics", ["tflite", "tflite_builtin"])
def test_sigmoid_tflite_lut(semantics):
    check_elementwise(
        "qnn.sigmoid",
        lambda *a: tflite_lut_entry(*a[:5], tfl_sigmoid, a[5]),
        SIGMOID,
        semantics=semantics,
    )


def test_sigmoid_onnx_mlas_logistic():
    check_elementwise(
        "qnn.sigmoid",
        lambda *a: ort_lut_entry(*a[:5], mlas_logistic, a[5]),
        SIGMOID,
        semantics="onnx",
    )


def test_tanh_tflite_lut():
    f = lambda x: F32(math.tanh(float(x)))  # noqa: E731
    check_elementwise("qnn.tanh", lambda *a: tflite_lut_entry(*a[:5], f, a[5]), TANH)


def test_tanh_onnx_mlas_tanh():
    check_elementwise(
        "qnn.tanh", lambda *a: ort_lut_entry(*a[:5], mlas_tanh, a[5]), TANH, semantics="onnx"
    )


def test_known_values():
    # sigmoid(0) = 0.5 = 128/256 -> -128 + 128 = 0; sigmoid(+-large) saturates.
    data = np.array([-128, 0, 127], np.int8)
    assert run("qnn.sigmoid", data, 0.5, 0, 1 / 256, -128).tolist() == [-128, 0, 127]
    # tanh(0.5) = 0.4621 -> 59.15 -> 59; tanh(-0.5) -> -59.
    data = np.array([-10, 0, 10], np.int8)
    for sem in ("tflite", "onnx"):
        assert run("qnn.tanh", data, 0.05, 0, 1 / 128, 0, semantics=sem).tolist() == [-59, 0, 59]
    # Ties round away from zero in TFLite's tables.
    assert run("qnn.sigmoid", np.array([-113], np.int8), SIG_TIE, -19, 1 / 256, -128)[0] == -127
    got = run("qnn.tanh", np.array([-5, 15], np.int8), TANH_TIE, 5, 1 / 128, 0)
    assert got.tolist() == [-123, 123]
    # A one-element row has probability 1: 256 - 128 saturates to 127 (ORT overflows float).
    for sem in ("tflite", "tflite_builtin", "onnx"):
        one = np.array([[5]], np.int8)
        assert run("qnn.softmax", one, 0.1, 0, 1 / 256, -128, semantics=sem).tolist() == [[127]]
    # leaky relu: -10 * 0.1 -> -1 in the output scale, 10 -> 10.
    assert run("qnn.leaky_relu", data, 0.1, 0, 0.1, 0, alpha=0.1).tolist() == [-1, 0, 10]


# ---- hardswish ----------------------------------------------------------------------------

HARDSWISH = [
    ("int8", 0.05, 3, 0.04, -10),
    ("int8", 0.1, -20, 0.05, -100),
    ("int8", 0.005, 5, 0.003, -128),
    ("int8", 0.02, 0, 0.0199, -50),
    ("uint8", 0.04, 100, 0.03, 30),
    ("int8", 0.3, 0, 1.0, 0),
]


def tfl_hardswish_entry(q, s_in, zp_in, s_out, zp_out, dtype):
    hires = F32(1 / 128) * F32(s_in)
    out_m, out_e = qmult(hires / F32(s_out))
    rel_m, rel_e = qmult(hires / F32(3 / 32768))
    down = lambda m: 32767 if m >= 2**31 - 1 - 2**15 else (m + 2**15) >> 16  # noqa: E731
    out_m, rel_m = down(out_m), down(rel_m)
    sat16 = lambda v: min(max(v, -32768), 32767)  # noqa: E731
    value = wrap(wrap(q - zp_in, 16) * 128, 16)
    pre = srdhm(value, out_m, 16)
    r = value
    if rel_e > 0:
        r = sat16(r * 2 ** (rel_e - 1))
    r = srdhm(r, rel_m, 16)
    if rel_e > 0:
        r = sat16(r * 2)
    if rel_e < 0:
        r = rdbpot(r, -rel_e, 16)
    r = (r + 2**15) >> 1
    prod = 32767 if r == pre == -32768 else wrap(c_div(r * pre, 2**15), 16)
    return clamp(wrap(rdbpot(prod, -out_e, 16) + zp_out, 16), dtype)


def onnx_hardswish(x):
    t = x * F32(1 / 6) + F32(0.5)
    return x * max(F32(0), min(F32(1), t))


def test_hardswish_tflite_reference():
    check_elementwise("qnn.hardswish", tfl_hardswish_entry, HARDSWISH)


def test_hardswish_onnx():
    check_elementwise(
        "qnn.hardswish",
        lambda *a: ort_lut_entry(*a[:5], onnx_hardswish, a[5]),
        HARDSWISH,
        semantics="onnx",
    )


# ---- leaky relu ---------------------------------------------------------------------------

LEAKY = [
    (0.1, ("int8", 0.05, 3, 0.04, -20)),
    (0.2, ("int8", 0.1, -10, 0.08, 5)),
    (0.01, ("uint8", 0.02, 128, 0.02, 100)),
    (1.5, ("int8", 0.03, 0, 0.05, 0)),
    (-0.5, ("int8", 0.05, 0, 0.05, 0)),
    (0.1, ("int8", 0.05, 0, 3e-5, 0)),
    (0.01, ("uint8", 0.5, 250, 0.08, 200)),
]  # float32 vs double ratio matters here


def tfl_leaky_entry(alpha):
    def entry(q, s_in, zp_in, s_out, zp_out, dtype):
        v = q - zp_in
        ratio = F32(s_in) / F32(s_out) if v >= 0 else F32(s_in) * F32(alpha) / F32(s_out)
        return clamp(zp_out + mbqm_ref(v, *qmult(ratio)), dtype)

    return entry


@pytest.mark.parametrize("alpha, params", LEAKY)
@pytest.mark.parametrize("semantics", ["tflite", "tflite_builtin"])
def test_leaky_relu_tflite(alpha, params, semantics):
    check_elementwise(
        "qnn.leaky_relu", tfl_leaky_entry(alpha), [params], alpha=alpha, semantics=semantics
    )


@pytest.mark.parametrize("alpha, params", LEAKY)
def test_leaky_relu_onnx(alpha, params):
    f = lambda x: x if x >= 0 else F32(alpha) * x  # noqa: E731
    check_elementwise(
        "qnn.leaky_relu",
        lambda *a: ort_lut_entry(*a[:5], f, a[5]),
        [params],
        alpha=alpha,
        semantics="onnx",
    )


def test_leaky_relu_int16_tflite():
    data = np.arange(-32768, 32768, 37, dtype=np.int16)
    got = run("qnn.leaky_relu", data, 0.001, 0, 0.0015, 0, alpha=0.3)
    entry = tfl_leaky_entry(0.3)
    assert got.tolist() == [entry(int(q), 0.001, 0, 0.0015, 0, "int16") for q in data]


def test_fma_emulation_rounds_once():
    from partita.ops.emulation.activation_kernels import fma_f32

    a = F32(1 + 2**-12)  # a * a = 1 + 2**-11 + 2**-24, a float32 midpoint
    tiny = F32(2.0**-70)
    assert fma_f32(a, a, tiny) == F32(1 + 2**-11 + 2**-23)  # fused: rounds up
    assert fma_f32(a, a, -tiny) == F32(1 + 2**-11)
    assert F32(float(a) * float(a) + float(tiny)) == F32(1 + 2**-11)  # double rounding
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(300).astype(F32) * F32(s) for s in (1, 3, 1e-3))
    assert fma_f32(x, y, z).tolist() == [float(fma_ref(*t)) for t in zip(x, y, z)]


# ---- sanity against the real-valued functions ---------------------------------------------


def _relu6_swish(x):
    return x * min(max(x + 3, 0), 6) / 6


FLOAT_FNS = {
    "qnn.sigmoid": (lambda x: 1 / (1 + math.exp(-x)), {}, 1 / 256, -128),
    "qnn.tanh": (math.tanh, {}, 1 / 128, 0),
    "qnn.hardswish": (_relu6_swish, {}, 0.04, -40),
    "qnn.leaky_relu": (lambda x: x if x >= 0 else 0.1 * x, {"alpha": 0.1}, 0.05, -60),
}


@pytest.mark.parametrize("name", sorted(FLOAT_FNS))
@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
def test_close_to_float_formula(name, semantics):
    f, attrs, s_out, zp_out = FLOAT_FNS[name]
    got = run(name, ALL_INT8, 0.05, 3, s_out, zp_out, semantics=semantics, **attrs)
    ideal = [clamp(round(f(0.05 * (q - 3)) / s_out) + zp_out, "int8") for q in range(-128, 128)]
    assert np.abs(got.astype(int) - ideal).max() <= 1


# ---- errors -------------------------------------------------------------------------------


def test_bad_data_dtype_names_the_op():
    with pytest.raises(P.TypeInferenceError, match=r"qnn.sigmoid.*data must be int8 or uint8"):
        run("qnn.sigmoid", np.zeros(4, np.float32), 0.1, 0, 1 / 256, -128)
    with pytest.raises(P.TypeInferenceError, match=r"qnn.softmax.*got int16"):
        run("qnn.softmax", np.zeros((2, 4), np.int16), 0.1, 0, 1 / 256, -128, semantics="onnx")
    # TFLite's 16x8 softmax takes int16, with its output parameters
    with pytest.raises(P.InterpreterError, match=r"int16 softmax needs zero points 0"):
        run("qnn.softmax", np.zeros((2, 4), np.int16), 0.1, 0, 1 / 256, -128)
    with pytest.raises(P.TypeInferenceError, match=r"qnn.leaky_relu.*'onnx', got int16"):
        run("qnn.leaky_relu", np.zeros(4, np.int16), 0.1, 0, 0.1, 0, alpha=0.1, semantics="onnx")


def test_non_scalar_parameters_are_refused():
    x = var("x", (4,), "int8")
    scale = np.array([0.1, 0.2], np.float32)
    for name in ("qnn.sigmoid", "qnn.tanh", "qnn.hardswish", "qnn.softmax"):
        call = get_op(name)(x, scale, 0, 1 / 256, -128)
        with pytest.raises(P.TypeInferenceError, match=rf"{name}.*input_scale must be a scalar"):
            P.interpret(call, [ALL_INT8[:4]])
    call = get_op("qnn.tanh")(x, 0.1, np.float32(0), 1 / 128, 0)
    with pytest.raises(P.TypeInferenceError, match="input_zero_point must be int32"):
        P.interpret(call, [ALL_INT8[:4]])


def test_bad_attributes():
    x = var("x", (2, 4), "int8")
    with pytest.raises(P.AttrError, match="semantics"):
        get_op("qnn.sigmoid")(x, 0.1, 0, 1 / 256, -128, semantics="tvm")
    with pytest.raises(P.AttrError, match="missing required attribute 'alpha'"):
        get_op("qnn.leaky_relu")(x, 0.1, 0, 0.1, 0)
    with pytest.raises(P.AttrError, match="beta"):
        get_op("qnn.softmax")(x, 0.1, 0, 1 / 256, -128, beta=2.0, semantics="onnx")
    with pytest.raises(P.AttrError, match="semantics"):
        get_op("qnn.hardswish")(x, 0.1, 0, 0.1, 0, semantics="tflite_builtin")
    with pytest.raises(P.TypeInferenceError, match="axis 2 is out of range"):
        P.interpret(
            get_op("qnn.softmax")(x, 0.1, 0, 1 / 256, -128, axis=2), [np.zeros((2, 4), np.int8)]
        )


def test_runtime_parameter_errors():
    data = ALL_INT8[:8]
    with pytest.raises(P.InterpreterError, match="scale 1/256 and zero point -128"):
        run("qnn.softmax", data, 0.1, 0, 0.01, -128)
    with pytest.raises(P.InterpreterError, match="input_scale / 128 < output_scale"):
        run("qnn.hardswish", data, 1.0, 0, 0.005, 0)
    with pytest.raises(P.InterpreterError, match="output_zero_point 300 is outside"):
        run("qnn.tanh", data, 0.1, 0, 1 / 128, 300)
    with pytest.raises(P.InterpreterError, match="positive"):
        run("qnn.sigmoid", data, 0.0, 0, 1 / 256, -128)
    with pytest.raises(P.InterpreterError, match="zero points 0"):
        run("qnn.leaky_relu", np.zeros(4, np.int16), 0.1, 3, 0.1, 0, alpha=0.1)
