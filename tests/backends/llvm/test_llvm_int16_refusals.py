"""Cases the LLVM host refused until session 10, bit for bit against the interpreter:
qnn.concatenate of int16 data whose inputs need rescaling (QRESCALE, each semantics: TFLite's
float32 scale and bias rounded half away, ORT's DequantizeLinear -> QuantizeLinear),
qnn.mean "tflite_legacy" over any axes (QMEANX "legacy": the reference's three paths, chosen
as it chooses them), qnn.mean over no axis or of empty data, qnn.dequantize of int16 (EWISE);
and what stays refused, with its reason."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower.context import LLVMError
from test_llvm_more_refusals import ISAS, check

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Tuple, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32
BASE = {"int8": 0, "uint8": 128, "int16": 0}


def _concat(xs, params, out, axis, semantics):
    """qnn.concatenate of ``xs`` with (scale, zero point) per input and ``out`` the output's."""
    scales = Tuple([Constant(F32(s)) for s, _ in params])
    zps = Tuple([Constant(I32(z)) for _, z in params])
    return get_op("qnn.concatenate")(Tuple(xs), scales, zps, F32(out[0]), I32(out[1]),
                                     axis=axis, semantics=semantics)


# ---- qnn.concatenate of int16 --------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
    dtype=st.sampled_from(["int16", "int16", "int8", "uint8"]),
    semantics=st.sampled_from(["tflite", "onnx"]), isa=st.sampled_from(ISAS),
    seed=st.integers(0, 99),
)  # fmt: skip
def test_qnn_concatenate_rescales_any_dtype(shape, data, dtype, semantics, isa, seed):
    """1-4 inputs along any axis, each with the output's parameters (a copy), another scale,
    another zero point, or both; one may be a constant."""
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    out = (data.draw(st.floats(0.001, 0.5)), BASE[dtype] + data.draw(st.integers(-20, 20)))
    xs, params, fields = [], [], []
    for i in range(data.draw(st.integers(1, 4))):
        sh = list(shape)
        sh[axis] = data.draw(st.integers(1, 4))
        kind = data.draw(st.sampled_from(["same", "scale", "zp", "both"]))
        s = out[0] if kind in ("same", "zp") else data.draw(st.floats(0.0005, 1.0))
        z = out[1] if kind in ("same", "scale") else BASE[dtype] + data.draw(st.integers(-99, 99))
        params.append((s, z))
        if i and data.draw(st.integers(0, 4)) == 0:
            rng = np.random.default_rng(seed + i)
            info = np.iinfo(dtype)
            fields.append(Constant(rng.integers(info.min, info.max + 1, sh).astype(dtype)))
        else:
            xs.append(Var(f"x{i}", TensorType(tuple(sh), dtype)))
            fields.append(xs[-1])
    assume(xs)
    rescaled = any(np.float32(s) != np.float32(out[0]) or z != out[1] for s, z in params)
    kinds = {"GATHER"} | ({"QRESCALE"} if dtype == "int16" and rescaled else set())
    check(xs, _concat(fields, params, out, axis, semantics), kinds, seed, isa)


@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
@pytest.mark.parametrize("ratio, zps", [
    (0.5, (1, -3)),             # every odd value a tie: half away (tflite) or to even (onnx)
    (1.5, (-7, 2)),             # ties again, and saturation at both ends
    (0.0123457, (31, -1000)),   # no simple ratio
    (3e38, (5, 0)),             # x * scale overflows float32: inf, and nan where x - zp = 0
    (3e38, (0, -9)),            # ... INT64_MIN plus a negative zero point wraps (tflite)
    (1e-30, (0, 17)),           # everything rounds to the zero point
])  # fmt: skip
def test_qnn_concatenate_int16_every_value(semantics, ratio, zps):
    """All 65536 int16 values through each input's rescale: ties, saturation, overflow."""
    values = np.arange(-32768, 32768, dtype=np.int16).reshape(2, 128, 256)
    xs = [Var("a", TensorType((2, 128, 256), "int16")), Var("b", TensorType((2, 3, 256), "int16"))]
    s_out = 0.25 if ratio < 1e30 else 1e-30
    params = [(s_out * ratio, zps[0]), (s_out, zps[1] + 1)]
    out = _concat(xs, params, (s_out, zps[1]), 1, semantics)
    with np.errstate(all="ignore"):  # the reference's own float overflow
        check(xs, out, {"GATHER", "QRESCALE"}, feeds=[values, values[:, :3]])


# ---- qnn.mean "tflite_legacy" over any axes ----------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=5), data=st.data(),
    dtype=st.sampled_from(["int8", "uint8"]), keep=st.booleans(), exclude=st.booleans(),
    equal=st.booleans(), long=st.sampled_from([0, 0, 0, 300]), seed=st.integers(0, 99),
)  # fmt: skip
def test_qnn_mean_legacy_over_any_axes(shape, data, dtype, keep, exclude, equal, long, seed):
    """Any axes, negative or not, excluded (all of them: no axis reduced, n = 1), kept or not;
    equal parameters (the truncating path) or not (the float32 path; rank 4 over (1, 2) or
    (2, 1) kept: the 4-D path, unless written negatively)."""
    if long:
        shape = [*shape[:2], long]
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                              unique_by=lambda a: a % rank))  # fmt: skip
    x = Var("x", TensorType(tuple(shape), dtype))
    base = BASE[dtype]
    s_in, zp_in = F32(data.draw(st.floats(0.001, 0.2))), I32(base + data.draw(st.integers(-9, 9)))
    s_out, zp_out = (s_in, zp_in) if equal else (F32(data.draw(st.floats(0.001, 0.2))),
                                                 I32(base + data.draw(st.integers(-9, 9))))
    out = get_op("qnn.mean")(x, s_in, zp_in, s_out, zp_out, axis=tuple(axes), keepdims=keep,
                             exclude=exclude, semantics="tflite_legacy")
    check([x], out, set(), seed)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("axis, kinds", [((1, 2), {"MEAN"}), ((2, 1), {"MEAN"}),
                                         ((-3, -2), {"QMEANX"}), ((0, 2), {"QMEANX"})])
def test_qnn_mean_legacy_picks_the_references_path(dtype, axis, kinds):
    """TFLite's 4-D test reads the axes as written: (-3, -2) takes the float32 path, which
    MEAN's 4-D stage (it normalises the axes) got wrong; QMEANX takes it."""
    x = Var("x", TensorType((2, 5, 6, 7), dtype))
    base = BASE[dtype]
    out = get_op("qnn.mean")(x, F32(0.1), I32(base + 3), F32(0.07), I32(base - 2), axis=axis,
                             keepdims=True, semantics="tflite_legacy")
    check([x], out, kinds)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("zp_in", [0, 3, -3])
@pytest.mark.parametrize("axis", [(0, 2), (1,)])
def test_qnn_mean_legacy_infinite_scale(dtype, zp_in, axis):
    """s_in / s_out overflows float32: +-inf, clipped, and nan (inf * 0) where the reference's
    conversion gives INT64_MIN, stored as 0 (MEAN and QMEANX share the stage)."""
    x = Var("x", TensorType((4, 5, 6), dtype))
    out = get_op("qnn.mean")(x, F32(0.1), I32(zp_in), F32(1e-45), I32(BASE[dtype] - 2),
                             axis=axis, semantics="tflite_legacy")
    feed = np.random.default_rng(0).integers(0, 100, (4, 5, 6)).astype(dtype)
    feed[0] = 0
    with np.errstate(all="ignore"):
        check([x], out, {"QMEANX" if len(axis) == 2 else "MEAN"}, feeds=[feed])


@pytest.mark.parametrize("semantics", ["tflite", "tflite_builtin", "onnx", "tflite_legacy"])
def test_qnn_mean_over_no_axis(semantics):
    """Every axis excluded: "tflite" copies (ReduceIsCopy), the others rescale each element."""
    x = Var("x", TensorType((3, 4), "int8"))
    out = get_op("qnn.mean")(x, F32(0.1), I32(3), F32(0.07), I32(-2), axis=(0, 1), exclude=True,
                             semantics=semantics)
    check([x], out, {"COPY"} if semantics.startswith("tflite_b") or semantics == "tflite"
          else {"QMEANX"})


# ---- qnn.mean of empty data, qnn.dequantize of int16 --------------------------------------------


@pytest.mark.parametrize("semantics", ["tflite", "tflite_builtin", "onnx", "tflite_legacy"])
@pytest.mark.parametrize("shape, axis", [((0, 3), (0,)), ((3, 0), (0,)), ((2, 0, 4), (1,)),
                                         ((1, 0, 0, 3), (1, 2))])
def test_qnn_mean_of_empty_data(semantics, shape, axis):
    """No element: zeros (TFLite), the zero point (ORT's 0 / 0), or an empty output."""
    x = Var("x", TensorType(shape, "int8"))
    out = get_op("qnn.mean")(x, F32(0.1), I32(3), F32(0.07), I32(-2), axis=axis, keepdims=True,
                             semantics=semantics)
    with np.errstate(all="ignore"):
        check([x], out, {"CONST"}, feeds=[np.zeros(shape, np.int8)])


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       isa=st.sampled_from(ISAS), seed=st.integers(0, 99))
def test_qnn_dequantize_int16(shape, data, isa, seed):
    """Per tensor or per channel along any axis: (x - zp) * scale, one float32 rounding."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis] if data.draw(st.booleans()) else 1
    scales = np.asarray(data.draw(st.lists(st.floats(1e-6, 10.0), min_size=n, max_size=n)), F32)
    zps = np.asarray(data.draw(st.lists(st.integers(-2000, 2000), min_size=n, max_size=n)), I32)
    x = Var("x", TensorType(tuple(shape), "int16"))
    out = get_op("qnn.dequantize")(x, scales if n > 1 else scales[0], zps if n > 1 else zps[0],
                                   axis=axis)
    check([x], out, {"EWISE"}, seed, isa)


# ---- still refused, with the reason --------------------------------------------------------------


def _refusal(params, out) -> str:
    with pytest.raises(LLVMError) as info:
        P.build(IRModule({"main": Function(params, out)}), "llvm")
    return str(info.value)


def test_what_stays_refused_names_the_op_and_why():
    """GATHER's index table is made at compile time: 2**24 elements at most."""
    xs = [Var(f"x{i}", TensorType((4097, 2048), "int16")) for i in range(2)]
    msg = _refusal(xs, _concat(xs, [(0.1, 0), (0.2, 0)], (0.2, 0), 0, "tflite"))
    assert msg.startswith("llvm cannot compile qnn.concatenate") and "2**24 elements" in msg
