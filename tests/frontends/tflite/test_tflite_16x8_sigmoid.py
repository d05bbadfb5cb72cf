"""TFLite's int16 LOGISTIC and TANH (16x8): partita's interpreter, NPU and llvm host against
TFLite's reference kernels (BUILTIN_REF) over all 65,536 int16 inputs, at several input scales
(one-op models built here with tflbuild, and the converter-made ones in models/tflite/int16).
The kernels' sigmoid table is measured data (tools/gen_int16_sigmoid_table.py)."""

from __future__ import annotations

import numpy as np
import pytest
from partita.frontends import from_tflite
from tflbuild import Model, Op, T, build
from tflite_cases import MODELS, Oracle

import partita as P
from partita import interpret

ALL = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256, 1)
# the converter's scales (models/tflite/int16), the power-of-two ones the kernels single out,
# a tiny and a large one
SCALES = [9.14895863388665e-05, 1.8306901620235294e-04, 2.0**-12, 2.0**-11, 7.3e-06, 1e-03]


def one_op(op: str, scale: float) -> bytes:
    shape = ALL.shape
    return build(
        Model(
            [
                T("x", shape, "int16", scale=[scale], zp=[0]),
                T("y", shape, "int16", scale=[2.0**-15], zp=[0]),
            ],
            [Op(op, [0], [1])],
            [0],
            [1],
        )
    )


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_every_int16_input_matches_the_reference_kernel(op, scale):
    data = one_op(op, scale)
    want = Oracle(data, "ref")([ALL])
    got = interpret(from_tflite(data), [ALL])
    assert np.array_equal(got[0], want[0]), int(np.sum(got[0] != want[0]))


@pytest.mark.parametrize("target", ["npu, ref", "llvm"])
@pytest.mark.parametrize("name", ["logistic", "tanh"])
def test_converter_models_on_the_npu_and_the_llvm_host(name, target):
    path = MODELS / "int16" / f"{name}.tflite"
    exe = P.build(from_tflite(path), target)
    if target == "npu, ref":
        assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    oracle = Oracle(path, "ref")
    shape = exe.input_types[0].shape
    x = np.resize(ALL, shape)
    rng = np.random.default_rng(0)
    for inp in (x, rng.integers(-32768, 32768, shape).astype(np.int16)):
        assert np.array_equal(exe.run(inp)[0], oracle([inp])[0])


def test_a_nonzero_zero_point_is_refused_with_the_reason():
    shape = (1, 4)
    data = build(
        Model(
            [
                T("x", shape, "int16", scale=[1e-4], zp=[0]),
                T("y", shape, "int16", scale=[2.0**-14], zp=[0]),
            ],
            [Op("TANH", [0], [1])],
            [0],
            [1],
        )
    )
    with pytest.raises(Exception, match="output scale 1/32768"):
        interpret(from_tflite(data), [np.zeros(shape, np.int16)])
