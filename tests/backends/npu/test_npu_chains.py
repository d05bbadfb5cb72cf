"""Random chains of the NPU's elementwise, LUT, pooling and data-movement operations: the
simulator computes the interpreter's bits, and nothing is left on the CPU."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita.ir import Function, IRModule, TensorType, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32


def step(kind: str, x, first, rng):
    """One operation on ``x`` (shape (1, 6, 6, 4) int8); ``first`` is the chain's input."""
    s = lambda v: F32(v)  # noqa: E731
    if kind in ("qnn.add", "qnn.mul", "qnn.subtract"):
        return get_op(kind)(
            x, first, s(0.05), I32(2), s(0.04), I32(-3), s(0.08 + rng.random() * 0.05), I32(1)
        )
    if kind in ("qnn.sigmoid", "qnn.tanh"):
        return get_op(kind)(
            x,
            s(0.06),
            I32(0),
            s(1 / 256 if kind == "qnn.sigmoid" else 1 / 128),
            I32(-128 if kind == "qnn.sigmoid" else 0),
        )
    if kind == "qnn.hardswish":
        return get_op(kind)(x, s(0.05), I32(3), s(0.04), I32(-1))
    if kind == "clip":
        return get_op("clip")(x, a_min=-60.0, a_max=90.0)
    if kind == "nn.max_pool2d":
        return get_op(kind)(
            x, pool_size=(3, 3), strides=(1, 1), padding=(1, 1, 1, 1), layout="NHWC"
        )
    if kind == "reshape":
        return get_op("reshape")(get_op("reshape")(x, newshape=(1, 36, 4)), newshape=(1, 6, 6, 4))
    raise AssertionError(kind)


KINDS = [
    "qnn.add",
    "qnn.mul",
    "qnn.subtract",
    "qnn.sigmoid",
    "qnn.tanh",
    "qnn.hardswish",
    "clip",
    "nn.max_pool2d",
    "reshape",
]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6), st.integers(0, 1000))
def test_random_chains_run_on_the_npu_bit_exactly(kinds, seed):
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((1, 6, 6, 4), "int8"))
    out = x
    for kind in kinds:
        out = step(kind, out, x, rng)
    mod = IRModule({"main": Function([x], out)})
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"], exe.report
    data = rng.integers(-128, 128, (1, 6, 6, 4), dtype=np.int8)
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])
