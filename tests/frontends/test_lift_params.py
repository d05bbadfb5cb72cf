"""frontends/params.py: lift_params turns a module's weights into parameters (TVM's params) on
any frontend's module; build(params=...) binds them back with the same results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from partita.frontends import from_tflite
from partita.frontends.params import lift_params

import partita
from partita.ir import Constant, post_order

MODEL = Path(__file__).resolve().parents[1] / "models" / "transformers" / "bert_tiny_int8.tflite"


def test_lift_params_tflite_npu_ref_same_bits():
    mod = from_tflite(MODEL)
    lifted, params = lift_params(mod)
    main = lifted["main"]
    assert len(main.params) == 2 + len(params)
    big = [n for n in post_order(main.body) if isinstance(n, Constant) and n.data.size >= 2]
    assert not big  # every constant of two or more elements became a parameter
    assert all(isinstance(v, np.ndarray) for v in params.values())
    rng = np.random.default_rng(0)
    x = [
        rng.integers(0, 2, (1, 16)).astype(np.int32),
        rng.integers(1, 100, (1, 16)).astype(np.int32),
    ]
    want = partita.interpret(mod, x)
    got = partita.build(lifted, "npu, ref", params=params).run(*x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_lift_params_min_size_and_names_unique():
    mod = from_tflite(MODEL)
    _, params = lift_params(mod, min_size=1000)
    assert params and all(v.size >= 1000 for v in params.values())
    _, all_params = lift_params(mod, min_size=1)
    assert len(set(all_params)) == len(all_params) > len(params)
