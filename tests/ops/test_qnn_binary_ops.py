"""qnn.add/subtract/mul and qnn.concatenate, in both semantics.

"tflite" results are checked against scalar Python-int transcriptions of TFLite's reference
kernels (the helpers of test_fixedpoint.py, written from the C++ formulas); "onnx" results
against float32 scalars with an exact (Fraction-based) fused multiply-add. A few golden values
were produced by the real runtimes (TFLite's reference kernels from LiteRT 2.3, ONNX Runtime 1.31
on x86-64 with AVX2) and pin the cases where a plausible-looking formula differs from what they
compute.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qnn_helpers import RANGE, call, clamp, fma_ref, rand
from test_fixedpoint import mbqm_ref, quantize_multiplier_ref, rdbpot_ref, srdhm_ref

import partita as P
from partita.errors import InterpreterError, TypeInferenceError
from partita.ir import const
from partita.ops import get_op

F32 = np.float32

# ---- add, subtract, mul: tflite ----------------------------------------------------------------


def tflite_add_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype, sign=1):
    """TFLite ADD / SUB (input2 multiplier negated) on Python ints."""
    left = 15 if dtype == "int16" else 20
    twice_max = 2 * max(float(s1), float(s2))
    q1, e1 = quantize_multiplier_ref(float(s1) / twice_max)
    q2, e2 = quantize_multiplier_ref(float(s2) / twice_max)
    qo, eo = quantize_multiplier_ref(twice_max / ((1 << left) * float(so)))
    a = rdbpot_ref(srdhm_ref((int(x1) - z1) * (1 << left), q1), -e1)
    b = rdbpot_ref(srdhm_ref((int(x2) - z2) * (1 << left), sign * q2), -e2)
    return clamp(rdbpot_ref(srdhm_ref(a + b, qo), -eo) + zo, dtype)


def tflite_mul_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype):
    """TFLite MUL: the multiplier's expression is evaluated in float32."""
    q, shift = quantize_multiplier_ref(float(F32(F32(s1) * F32(s2)) / F32(so)))
    return clamp(mbqm_ref((int(x1) - z1) * (int(x2) - z2), q, shift) + zo, dtype)


def binary_case(seed, dtype, mul=False):
    rng = np.random.default_rng(seed)
    lhs, rhs = rand(rng, dtype, (2, 3, 4)), rand(rng, dtype, (3, 1))
    s1, s2, so = (F32(10 ** rng.uniform(-3, 0)) for _ in range(3))
    if mul:
        so = F32(s1 * s2 * 10 ** rng.uniform(-0.5, 2) * (256 if dtype == "int16" else 1))
    lo, hi = RANGE[dtype]
    z1, z2, zo = (0, 0, 0) if dtype == "int16" else rng.integers(lo, hi, 3, endpoint=True)
    return lhs, rhs, s1, int(z1), s2, int(z2), so, int(zo)


def run_binary(op, lhs, rhs, s1, z1, s2, z2, so, zo, **attrs):
    return call(op, lhs, rhs, s1, np.int32(z1), s2, np.int32(z2), so, np.int32(zo), **attrs)


@settings(max_examples=20, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(["int8", "uint8", "int16"]),
    st.sampled_from(["qnn.add", "qnn.subtract", "qnn.mul"]),
)
def test_binary_tflite_matches_scalar_reference(seed, dtype, op):
    case = binary_case(seed, dtype, mul=op == "qnn.mul")
    lhs, rhs, s1, z1, s2, z2, so, zo = case
    got = run_binary(op, *case)
    assert got.dtype == dtype and got.shape == (2, 3, 4)
    for idx in np.ndindex(*got.shape):
        x1, x2 = lhs[idx], rhs[idx[1], 0]
        if op == "qnn.mul":
            want = tflite_mul_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype)
        else:
            want = tflite_add_ref(
                x1, x2, s1, z1, s2, z2, so, zo, dtype, -1 if op == "qnn.subtract" else 1
            )
        assert got[idx] == want, (idx, x1, x2)
        # Sanity: within one step of the real-valued result wherever it is not saturated.
        r1, r2 = float(s1) * (int(x1) - z1), float(s2) * (int(x2) - z2)
        real = {"qnn.add": r1 + r2, "qnn.subtract": r1 - r2, "qnn.mul": r1 * r2}[op]
        exact = real / float(so) + zo
        if RANGE[dtype][0] < exact < RANGE[dtype][1]:
            assert abs(int(got[idx]) - exact) <= 1.0


def test_binary_tflite_hand_computed():
    one, zero = F32(1), 0
    a, b = np.array([1, 100, -7], np.int8), np.array([3, 100, -128], np.int8)
    args = (one, zero, one, zero, one, zero)
    assert run_binary("qnn.add", a, b, *args).tolist() == [4, 127, -128]
    assert run_binary("qnn.subtract", a, b, *args).tolist() == [-2, 0, 121]
    # 0.125 * x1 * x2 + 3 = 3.375, 1253, 115; the first rounds twice (TFLite's double
    # rounding): SRDHM(3, 2**30) = 1.5 -> 2, then 2 / 4 = 0.5 -> 1, so 4 and not 3.
    assert run_binary("qnn.mul", a, b, F32(0.5), 0, F32(0.25), 0, F32(1), 3).tolist() == [
        4,
        127,
        115,
    ]


def test_subtract_is_not_the_negated_sum():
    # (-4 * 0.65 - -128 * 0.45) / 2 = 27.5 exactly. TFLite's fixed-point path rounds this tie
    # up and the mirrored -27.5 toward zero (SRDHM's nudge), so b - a is not -(a - b).
    a, b = np.array([-4], np.int8), np.array([-128], np.int8)
    ab = run_binary("qnn.subtract", a, b, F32(0.65), 0, F32(0.45), 0, F32(2.0), 0)
    ba = run_binary("qnn.subtract", b, a, F32(0.45), 0, F32(0.65), 0, F32(2.0), 0)
    assert (ab.tolist(), ba.tolist()) == ([28], [-27])
    assert ab[0] == tflite_add_ref(-4, -128, F32(0.65), 0, F32(0.45), 0, F32(2.0), 0, "int8", -1)


def test_mul_tflite_golden_float32_multiplier():
    # From TFLite's reference MUL: a multiplier computed in double would give 27.
    args = (F32(0.2618977), -45, F32(0.0014611053), 123, F32(0.006358189), -127)
    got = run_binary("qnn.mul", np.array([-120], np.int8), np.array([89], np.int8), *args)
    assert got.tolist() == [26]


def test_add_tflite_refuses_too_small_output_scale():
    with pytest.raises(InterpreterError, match=r"qnn.add.*output multiplier in \(0, 1\)"):
        run_binary(
            "qnn.add",
            np.zeros(2, np.int8),
            np.zeros(2, np.int8),
            F32(1),
            0,
            F32(1),
            0,
            F32(1e-7),
            0,
        )


def test_binary_per_channel_params():
    rng = np.random.default_rng(9)
    lhs, rhs = rand(rng, "int8", (2, 3)), rand(rng, "int8", (2, 3))
    s1 = np.array([0.1, 0.2, 0.3], F32)
    z2 = np.array([1, -1], np.int32)
    got = call(
        "qnn.add", lhs, rhs, s1, np.int32(0), F32(0.2), z2, F32(0.4), np.int32(0), rhs_axis=0
    )
    for i, j in np.ndindex(2, 3):
        want = tflite_add_ref(
            lhs[i, j], rhs[i, j], s1[j], 0, F32(0.2), int(z2[i]), F32(0.4), 0, "int8"
        )
        assert got[i, j] == want


# ---- add, subtract, mul: onnx ------------------------------------------------------------------


def ort_add_ref(a, sa, za, b, sb, zb, sc, zc, dtype):
    """MLAS QLinearAdd (AVX2): fixed part and both terms fused multiply-adds in float32."""
    ra, rb = F32(F32(sa) / F32(sc)), F32(F32(sb) / F32(sc))
    fixed = F32(F32(zc) - fma_ref(ra, F32(za), F32(rb * F32(zb))))
    v = fma_ref(F32(int(a)), ra, fma_ref(F32(int(b)), rb, fixed))
    return clamp(round(float(v)), dtype)


def dq(x, s, z):
    return F32(F32(int(x) - z) * F32(s))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["int8", "uint8", "int16"]))
def test_binary_onnx_matches_float32_formulas(seed, dtype):
    lhs, rhs, s1, z1, s2, z2, so, zo = case = binary_case(seed, dtype)
    add = run_binary("qnn.add", *case, semantics="onnx")
    sub = run_binary("qnn.subtract", *case, semantics="onnx")
    mul_case = binary_case(seed, dtype, mul=True)
    mul = run_binary("qnn.mul", *mul_case, semantics="onnx")
    ms1, mz1, ms2, mz2, mso, mzo = mul_case[2:]
    for idx in np.ndindex(2, 3, 4):
        x1, x2 = lhs[idx], rhs[idx[1], 0]
        # rhs (3, 1) is broadcast along the innermost axis: ORT hands it over as the scalar B.
        d = dq(x1, s1, z1) - dq(x2, s2, z2)
        assert sub[idx] == clamp(round(float(F32(d) / so)) + zo, dtype)
        if dtype == "int16":
            want = clamp(round(float(F32(dq(x1, s1, z1) + dq(x2, s2, z2)) / so)) + zo, dtype)
            assert add[idx] == want
            prod = F32(dq(x1, ms1, mz1) * dq(x2, ms2, mz2))
            assert mul[idx] == clamp(round(float(prod / mso)) + mzo, dtype)
        else:
            assert add[idx] == ort_add_ref(x1, s1, z1, x2, s2, z2, so, zo, dtype)
            scale = F32(F32(ms1 * ms2) / mso)
            p = F32((int(x1) - mz1) * (int(x2) - mz2))
            assert mul[idx] == clamp(round(float(F32(F32(p * scale) + F32(mzo)))), dtype)


def test_add_onnx_goldens_from_onnxruntime():
    # lhs spans, rhs is the per-span scalar; fma(b, r_b, f) is one rounding: unfused gives -109.
    got = run_binary(
        "qnn.add",
        np.array([13, 0], np.int8),
        np.array([59], np.int8),
        F32(0.010052932),
        99,
        F32(0.06940681),
        47,
        F32(0.0012419751),
        -83,
        semantics="onnx",
    )
    assert got[0] == -108
    # lhs is the scalar, so ORT swaps the roles; the fixed part is fma(r_a, zp_a, r_b * zp_b).
    # The exact result is 159.4999956; ORT's float32 arithmetic lands on 159.5 -> 160.
    got = run_binary(
        "qnn.add",
        np.array([108], np.uint8),
        np.array([238, 0], np.uint8),
        F32(0.30187356),
        172,
        F32(0.6563733),
        216,
        F32(0.88721657),
        165,
        semantics="onnx",
    )
    assert got[0] == 160


def test_binary_type_errors():
    add = get_op("qnn.add")
    i8, u8 = const(np.zeros((2, 3), np.int8)), const(np.zeros((2, 3), np.uint8))
    p = [const(F32(1)), const(np.int32(0))]
    with pytest.raises(
        TypeInferenceError, match="qnn.add.*lhs and rhs must share one dtype, got int8 and uint8"
    ):
        P.interpret(add(i8, u8, *p, *p, *p))
    with pytest.raises(
        TypeInferenceError,
        match=r"lhs_scale must be a scalar or shape \(3,\) "
        r"\(one per channel of lhs \(2, 3\)",
    ):
        P.interpret(add(i8, i8, np.ones(2, F32), np.int32(0), *p, *p))
    with pytest.raises(TypeInferenceError, match="output_scale must be a scalar"):
        P.interpret(add(i8, i8, *p, *p, np.ones(3, F32), np.int32(0)))
    with pytest.raises(TypeInferenceError, match="do not broadcast"):
        P.interpret(add(i8, const(np.zeros((4,), np.int8)), *p, *p, *p))
    with pytest.raises(TypeInferenceError, match="lhs must be int8, uint8 or int16, got int32"):
        P.interpret(add(np.zeros(3, np.int32), np.zeros(3, np.int32), *p, *p, *p))


def test_binary_out_dtype_and_commutativity_flags():
    assert get_op("qnn.add").commutative and get_op("qnn.mul").commutative
    assert not get_op("qnn.subtract").commutative
    got = run_binary(
        "qnn.add",
        np.array([-100], np.int8),
        np.array([-100], np.int8),
        F32(1),
        0,
        F32(1),
        0,
        F32(1),
        0,
        out_dtype="int16",
    )
    assert got.dtype == np.int16 and got.tolist() == [-200]


# ---- concatenate -------------------------------------------------------------------------------


def test_concatenate_copies_equal_params_and_rescales_others():
    a = np.array([[10, 11]], np.uint8)
    b = np.array([[10, 11]], np.uint8)
    scales, zps = (F32(0.5), F32(1.0)), (np.int32(10), np.int32(0))
    # a: scale 0.5 * (1 / 1) = 0.5, bias -5: 10 -> 0, 11 -> 0.5 (half away: 1, half even: 0).
    got = call("qnn.concatenate", (a, b), scales, zps, F32(1.0), np.int32(0), axis=0)
    assert got.tolist() == [[0, 1], [10, 11]]
    got = call(
        "qnn.concatenate", (a, b), scales, zps, F32(1.0), np.int32(0), axis=0, semantics="onnx"
    )
    assert got.tolist() == [[0, 0], [10, 11]]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["int8", "uint8"]))
def test_concatenate_matches_float32_formulas(seed, dtype):
    rng = np.random.default_rng(seed)
    xs = tuple(rand(rng, dtype, (2, k)) for k in (3, 4))
    ss = tuple(F32(10 ** rng.uniform(-3, 0)) for _ in xs)
    lo, hi = RANGE[dtype]
    zs = tuple(np.int32(rng.integers(lo, hi, endpoint=True)) for _ in xs)
    so, zo = F32(10 ** rng.uniform(-3, 0)), int(rng.integers(lo, hi, endpoint=True))
    tfl = call("qnn.concatenate", xs, ss, zs, so, np.int32(zo), axis=1)
    ort = call("qnn.concatenate", xs, ss, zs, so, np.int32(zo), axis=1, semantics="onnx")
    col = 0
    for x, s, z in zip(xs, ss, zs):
        scale = F32(s * F32(F32(1) / so))
        bias = F32(F32(-int(z)) * scale)
        for (i, j), v in np.ndenumerate(x):
            t = F32(F32(F32(int(v)) * scale) + bias)
            away = int(np.sign(t) * np.floor(abs(float(t)) + 0.5))
            assert tfl[i, col + j] == clamp(away + zo, dtype)
            assert ort[i, col + j] == clamp(round(float(F32(dq(v, s, int(z)) / so))) + zo, dtype)
        col += x.shape[1]


def test_concatenate_type_errors():
    xs = (np.zeros((2, 3), np.int8), np.zeros((2, 4), np.int8))
    with pytest.raises(TypeInferenceError, match="input_scales has 1 entries but data has 2"):
        call(
            "qnn.concatenate",
            xs,
            (F32(1),),
            (np.int32(0), np.int32(0)),
            F32(1),
            np.int32(0),
            axis=1,
        )
    with pytest.raises(TypeInferenceError, match="differ outside axis"):
        call(
            "qnn.concatenate",
            xs,
            (F32(1), F32(1)),
            (np.int32(0), np.int32(0)),
            F32(1),
            np.int32(0),
            axis=0,
        )
    with pytest.raises(TypeInferenceError, match="data field 1 must be int8, uint8 or int16"):
        call(
            "qnn.concatenate",
            (xs[0], np.zeros((2, 4), F32)),
            (F32(1), F32(1)),
            (np.int32(0), np.int32(0)),
            F32(1),
            np.int32(0),
            axis=1,
        )
