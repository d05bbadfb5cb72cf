"""16x8 ABS and LEAKY_RELU at input / output scale pairs the converter does not write (its ABS
keeps the input's scale): every int16 input through TFLite's reference kernels (BUILTIN_REF)
and its builtin kernels, against the interpreter, the NPU and the LLVM host, bit for bit.
ABS rescales |q| by the float32 quotient s_in / s_out (exactly when the scales are equal, the
kernel's no-rescale case); LEAKY_RELU takes two multipliers, s_in / s_out and
s_in * alpha / s_out."""

from __future__ import annotations

import numpy as np
import pytest
from partita.frontends import from_tflite
from tflbuild import Model, Op, T, build
from tflite_cases import Oracle

import partita as P
from partita import interpret

ALL = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256, 1)
# (s_in, s_out): equal, a widening and a narrowing rescale, and a ratio far from one
PAIRS = [(3.05e-05, 3.05e-05), (1.2299e-04, 1.0352e-04), (7.3e-06, 2.0**-12), (1e-03, 3.1e-05)]


def one_op(op: str, s_in: float, s_out: float, alpha: float | None = None) -> bytes:
    options = None if alpha is None else ("LeakyReluOptions", {"Alpha": alpha})
    return build(
        Model(
            [
                T("x", ALL.shape, "int16", scale=[s_in], zp=[0]),
                T("y", ALL.shape, "int16", scale=[s_out], zp=[0]),
            ],
            [Op(op, [0], [1], options)],
            [0],
            [1],
        )
    )


CASES = [("ABS", None, p) for p in PAIRS] + [
    ("LEAKY_RELU", a, p) for a in (0.2, 0.0, 1.0, 0.7) for p in PAIRS[1:3]
]


@pytest.mark.parametrize(("op", "alpha", "pair"), CASES)
def test_every_int16_input_matches_tflite(op, alpha, pair):
    data = one_op(op, *pair, alpha=alpha)
    mod = from_tflite(data)
    got = np.asarray(interpret(mod, [ALL])[0])
    for kernels in ("ref", "builtin"):
        want = Oracle(data, kernels)([ALL])[0]
        assert np.array_equal(got, want), (kernels, int(np.sum(got != want)))


@pytest.mark.parametrize("target", ["npu -config=u55-256, llvm", "llvm"])
@pytest.mark.parametrize(("op", "alpha"), [("ABS", None), ("LEAKY_RELU", 0.2)])
def test_rescaling_abs_and_leaky_relu_on_the_npu_and_the_llvm_host(op, alpha, target):
    data = one_op(op, *PAIRS[1], alpha=alpha)
    mod = from_tflite(data)
    exe = P.build(mod, target)
    assert [s.target for s in exe.steps] == [target.split()[0].rstrip(",")]
    assert np.array_equal(np.asarray(exe.run(ALL)[0]), Oracle(data, "ref")([ALL])[0])


def test_a_leaky_relu_alpha_above_one_stays_on_the_cpu_bit_exact():
    """max(x, alpha * x) is not leaky ReLU for alpha > 1: partita's NPU leaves it to the host."""
    data = one_op("LEAKY_RELU", *PAIRS[1], alpha=1.5)
    mod = from_tflite(data)
    exe = P.build(mod, "npu, llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    assert np.array_equal(np.asarray(exe.run(ALL)[0]), Oracle(data, "ref")([ALL])[0])
