"""DeadCodeElimination: functions main cannot reach are dropped; everything else is kept."""

from __future__ import annotations

import numpy as np

import partita as P
from partita.ir import Call, Function, GlobalVar, IRModule, assert_structural_equal, var
from partita.ops import get_op
from partita.passes.dce import DeadCodeElimination, reachable_functions

relu = get_op("nn.relu")


def fn(body_of):
    a = var("a", (2,))
    return Function([a], body_of(a))


def module():
    x = var("x", (2,))
    return IRModule(
        {
            "main": Function([x], Call(GlobalVar("f"), [relu(x)])),
            "f": fn(lambda a: Call(GlobalVar("g"), [a])),
            "g": fn(relu),
            "unused": fn(lambda a: Call(GlobalVar("also_unused"), [a])),
            "also_unused": fn(relu),
        },
        {"origin": "test"},
    )


def test_unreachable_functions_are_removed_in_order():
    mod = module()
    out = DeadCodeElimination()(mod)
    assert list(out) == ["main", "f", "g"] and out.attrs == {"origin": "test"}
    for name in out:
        assert out[name] is mod[name]
    assert list(mod) == ["main", "f", "g", "unused", "also_unused"]  # input untouched


def test_extra_entries_keep_their_callees():
    out = DeadCodeElimination(entries=("main", "unused"))(module())
    assert list(out) == ["main", "f", "g", "unused", "also_unused"]
    assert reachable_functions(module(), "unused") == {"unused", "also_unused"}


def test_parameters_are_kept_even_when_unused():
    x, y = var("x", (2,)), var("y", (2,))
    mod = IRModule({"main": Function([x, y], relu(x))})
    assert_structural_equal(DeadCodeElimination()(mod), mod)


def test_module_without_main_is_unchanged():
    mod = IRModule({"f": fn(relu)})
    assert DeadCodeElimination()(mod) is mod


def test_recursion_free_on_long_call_chains():
    mods = {"main": fn(lambda a: Call(GlobalVar("f0"), [a]))}
    for i in range(2000):
        mods[f"f{i}"] = fn(lambda a, i=i: Call(GlobalVar(f"f{i + 1}"), [a]))
    mods["f2000"] = fn(relu)
    mods["dead"] = fn(relu)
    out = DeadCodeElimination()(IRModule(mods))
    assert len(out) == 2002 and "dead" not in out


def test_result_computes_the_same():
    out = DeadCodeElimination()(module())
    assert np.array_equal(P.interpret(out, [np.float32([-1, 1])])[0], [0, 1])
