"""einsum (EINSUM, backends/llvm/einsum_lower.py) against the interpreter (numpy.einsum):
explicit and implicit outputs, traces and diagonals, ``...`` broadcasting, size-1 axes
broadcast, batched products and permutations; float32 within float32 rounding (the kernel sums
in float64, numpy in float32)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita.ir import Function, IRModule, TensorType, Tuple, Var
from partita.ops import get_op


def _module(equation, shapes, dtype="float32"):
    xs = [Var(f"x{i}", TensorType(s, dtype)) for i, s in enumerate(shapes)]
    body = get_op("einsum")(Tuple(xs), equation=equation)
    return P.InferType()(IRModule({"main": Function(xs, body)}))


def _check(equation, shapes, seed=0):
    mod = _module(equation, shapes)
    rng = np.random.default_rng(seed)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = P.build(mod, "llvm").run(*feeds)[0]
    want = P.interpret(mod, feeds)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("bij,bjk", [(2, 3, 4), (2, 4, 2)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij->", [(3, 4)]),
    ("...i,i", [(2, 3, 4), (4,)]),
    ("ij,ij->ij", [(1, 4), (3, 4)]),
    ("abc->cab", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
])  # fmt: skip
def test_einsum_equals_numpy(equation, shapes):
    _check(equation, shapes)


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_random_two_operand_contractions(data):
    labels = "abcd"
    sizes = {c: data.draw(st.integers(1, 4)) for c in labels}
    left = data.draw(st.lists(st.sampled_from(labels), min_size=1, max_size=3, unique=True))
    right = data.draw(st.lists(st.sampled_from(labels), min_size=1, max_size=3, unique=True))
    present = sorted(set(left) | set(right))
    out = data.draw(st.permutations(present).map(lambda p: p[: data.draw(
        st.integers(0, len(p)))]))
    equation = f"{''.join(left)},{''.join(right)}->{''.join(out)}"
    _check(equation, [tuple(sizes[c] for c in left), tuple(sizes[c] for c in right)])


def test_float16_einsum_runs_as_a_float32_one():
    """Widened between casts (lower/half.py; its tolerance tested in test_llvm_half.py): an
    EINSUM kernel between casts, whose result on small integers (exact products and sums in
    every precision) has the interpreter's bits."""
    mod = _module("ij,jk", [(2, 3), (3, 2)], "float16")
    exe = P.build(mod, "llvm")
    assert "EINSUM" in {k.split()[0] for k in exe.steps[0].region.kernels}
    rng = np.random.default_rng(4)
    feeds = [rng.integers(-4, 5, s).astype(np.float16) for s in ((2, 3), (3, 2))]
    got, want = exe.run(*feeds)[0], P.interpret(mod, feeds)[0]
    assert got.dtype == want.dtype == np.float16
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
