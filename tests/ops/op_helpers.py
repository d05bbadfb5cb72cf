"""Helpers shared by the tensor and nn op tests: build an op call, run it in the interpreter,
infer its type, and expect a precise failure."""

from __future__ import annotations

import numpy as np
import pytest

import partita as P
from partita import IRModule, const, get_op, var


def op(name, *args, **attrs):
    """The call of op ``name`` on ``args``."""
    return get_op(name)(*args, **attrs)


def run(name, *arrays, **attrs):
    """Apply op ``name`` to variables bound to ``arrays``; return the result."""
    args = [var(f"a{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    return P.interpret(IRModule.from_expr(op(name, *args, **attrs)), list(arrays))[0]


def run_expr(expr, *inputs):
    """Interpret ``expr`` with its free variables bound (in use order) to ``inputs``."""
    out = P.interpret(IRModule.from_expr(expr), list(inputs))
    return out[0] if len(out) == 1 else out


def run_const(name, *arrays, **attrs):
    """Apply op ``name`` to constants and return (result, inferred type)."""
    call = op(name, *[const(np.asarray(a)) for a in arrays], **attrs)
    return run_expr(call), P.infer_type(call)


def type_of(name, *types, **attrs):
    """The inferred type of op ``name`` on variables of ``types`` ((shape, dtype) or a node)."""
    args = [var(f"a{i}", *t) if isinstance(t, tuple) else t for i, t in enumerate(types)]
    return P.infer_type(op(name, *args, **attrs))


def type_error(*patterns):
    """Expect a TypeInferenceError whose message matches ``patterns`` in order."""
    return pytest.raises(P.TypeInferenceError, match="(?s)" + ".*".join(patterns))


def attr_error(pattern):
    """Expect an AttrError whose message matches ``pattern``."""
    return pytest.raises(P.AttrError, match="(?s)" + pattern)


def assert_same(actual, expected):
    """Equal dtype, shape and values (NaNs compare equal)."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def small_ints(rng: np.random.Generator):
    """``ints(shape, lo=-4, hi=5, dtype=float32)`` drawing from ``rng`` (each test module keeps
    its own stream)."""

    def ints(shape, lo=-4, hi=5, dtype=np.float32):
        """Small integer values: float sums of their products are exact in any order."""
        return rng.integers(lo, hi, shape).astype(dtype)

    return ints


def i8(*v):
    return np.array(v, np.int8)


def f32(*v):
    return np.array(v, np.float32)
