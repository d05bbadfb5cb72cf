"""PartitionGraph: global functions with Compiler, global_symbol and Primitive; constants inside;
composites inside; the host keeps plain ops."""

from __future__ import annotations

import numpy as np
from partita.partition import PartitionGraph
from partita.patterns import is_constant, is_op, wildcard
from partition_graphs import assert_same_bits, backend, passes, placement

import partita as P
from partita.ir import Call, Constant, Function, GlobalVar, IRModule, Var, post_order

ACC = backend("acc", ["add", "nn.relu", "multiply"])


def test_partitions_are_global_functions_with_the_relay_attributes():
    mod = P.parse("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = nn.relu(%x);
      %1 = tanh(%0);
      add(%1, %1)
    }""")
    out = passes((), [ACC])(mod)
    assert sorted(out.functions) == ["acc_main_0", "acc_main_1", "main"]
    for name in ("acc_main_0", "acc_main_1"):
        assert dict(out[name].attrs) == {"Compiler": "acc", "global_symbol": name, "Primitive": 1}
    callees = [
        n.op.name_hint
        for n in post_order(out["main"].body)
        if isinstance(n, Call) and isinstance(n.op, GlobalVar)
    ]
    assert callees == ["acc_main_0", "acc_main_1"]


def test_constants_stay_inside_each_partition_that_uses_them():
    shared = P.const(np.full((2, 4), 0.5, np.float32))
    x = P.var("x", (2, 4))
    a = P.get_op("multiply")(x, shared)
    t = P.get_op("tanh")(a)
    b = P.get_op("add")(t, shared)
    mod = IRModule.from_expr(b)
    out = passes((), [ACC])(mod)
    for name in ("acc_main_0", "acc_main_1"):
        fn = out[name]
        assert [p.name_hint for p in fn.params] == [f"acc_{name[-1]}_i0"]
        consts = [n for n in post_order(fn.body) if isinstance(n, Constant)]
        assert consts == [shared]
    assert not any(isinstance(n, Constant) for n in post_order(out["main"].body))
    assert_same_bits(mod, out)


def test_composites_go_inside_and_foreign_host_composites_are_inlined():
    table = [
        ("acc.mul", is_op("multiply")(wildcard(), is_constant())),
        ("other.neg", is_op("negative")(wildcard())),
    ]
    mod = P.parse("""
    def @main(%x: Tensor[(2, 4), float32]) {
      %0 = multiply(%x, 2f) /* span=M:0:m */;
      negative(%0) /* span=N:1:n */
    }""")
    out = passes(table, [ACC])(mod)
    assert placement(out) == {"main": ["n"], "acc_main_0": ["m"]}
    inner = out["acc_main_0"].body
    assert isinstance(inner.op, Function) and inner.op.attrs["Composite"] == "acc.mul"
    assert not any(isinstance(n, Function) for n in post_order(out["main"].body))
    assert_same_bits(mod, out)


def test_lifted_names_skip_names_the_module_already_uses():
    mod = P.parse("def @main(%x: Tensor[(4), float32]) { nn.relu(%x) }")
    taken = Function([Var("y", P.TensorType((4,), "float32"))], P.var("y", (4,)))
    mod = mod.with_function("acc_main_0", Function(taken.params, taken.params[0]))
    out = passes((), [ACC])(mod)
    assert "acc_main_1" in out.functions and out["acc_main_0"].attrs == {}


def test_partition_graph_alone_leaves_an_unannotated_graph_as_it_is():
    mod = P.parse("def @main(%x: Tensor[(4), float32]) { nn.relu(%x) }")
    out = PartitionGraph()(mod)
    P.assert_structural_equal(out, mod)
