"""The bit-exact oracle every rewrite and partition test uses: the reference interpreter gives
the same output bits (dtype, shape and bytes) before and after."""

from __future__ import annotations

import numpy as np

import partita as P


def same_bits(a, b) -> bool:
    """Equal dtype, shape and bytes."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def random_inputs(mod, seed=0) -> list:
    """One random array per parameter of ``@main``: integers over the dtype's whole range,
    floats from a standard normal."""
    rng = np.random.default_rng(seed)
    out = []
    for p in mod["main"].params:
        t = p.type_annotation
        if t.dtype.startswith("int") or t.dtype.startswith("uint"):
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max, t.shape, dtype=t.dtype, endpoint=True))
        else:
            out.append(rng.standard_normal(t.shape).astype(t.dtype))
    return out


def assert_same_outputs(before, after, inputs) -> None:
    """The interpreter gives the same output bits for both (``inputs`` by name or position)."""
    want, got = P.interpret(before, inputs), P.interpret(after, inputs)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert same_bits(w, g), f"outputs differ:\n{w}\n{g}"


def assert_same_bits(before, after, seed=0) -> None:
    """``assert_same_outputs`` on random inputs for ``before``'s parameters."""
    assert_same_outputs(before, after, random_inputs(before, seed))
