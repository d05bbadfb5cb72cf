"""Random graphs and accelerator op sets: a built executable computes the interpreter's bits."""

from __future__ import annotations

import numpy as np
from common_graphs import registered
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends import Backend
from partita.backends.ref import InterpretedRegion

import partita as P

UNARY = ("tanh", "sigmoid", "negative")
BINARY = ("add", "multiply", "maximum")


@st.composite
def graphs(draw):
    """A DAG of unary and binary float ops over two inputs, with one to three outputs."""
    n = draw(st.integers(1, 14))
    lines, names = [], ["%x", "%y"]
    for i in range(n):
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            a = draw(st.sampled_from(names))
            lines.append(f"  %{i} = {op}({a});")
        else:
            op = draw(st.sampled_from(BINARY))
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            lines.append(f"  %{i} = {op}({a}, {b});")
        names.append(f"%{i}")
    outs = draw(st.lists(st.sampled_from(names[2:]), min_size=1, max_size=3, unique=True))
    result = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
    text = (
        "def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) {\n"
        + "\n".join(lines)
        + f"\n  {result}\n}}"
    )
    accelerated = draw(st.sets(st.sampled_from(UNARY + BINARY)))
    return text, accelerated


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_random_partitioned_graphs_run_the_same_bits(case):
    text, accelerated = case
    acc = Backend(
        "racc",
        ops={op: True for op in accelerated},
        compile=lambda fn, opts: InterpretedRegion(fn, backend="racc"),
        load=InterpretedRegion.loader("racc"),
    )
    mod = P.parse(text)
    x = np.linspace(-2, 2, 3, dtype=np.float32)
    y = np.array([0.5, -1.5, 3.0], np.float32)
    with registered(acc):
        exe = P.build(mod, "racc, ref")
    want = P.interpret(mod, [x, y])
    got = exe.run(x, y)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    targets = [s.target for s in exe.steps]
    # host segments never follow each other: they are merged
    assert all(not (a == b == "ref") for a, b in zip(targets, targets[1:]))
