"""A dynamic-int8 product computes the float elementwise step after it (lower/dynq_epilogue.py:
ORT's MatMulInteger -> Cast -> Mul -> Add, a residual's Add) as it stores its outputs: on every
kernel family the product has (AMX tiles, VNNI's register tile in zmm and ymm, the generic
tiles of avx2 and plain), at one and two threads, the bits equal the interpreter's and the
unfused build's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower import context
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.lower.dynq_epilogue import dynq_epilogues
from partita.backends.llvm.runtime.jit import runs_isa

import partita as P
from partita import relay
from partita.ir import Function, IRModule, TensorType, Tuple, Var, get_op

MODELS = Path(__file__).resolve().parents[2] / "models" / "transformers"


def _bert(ort_cpu: str):
    from partita.frontends import from_onnx

    return from_onnx(str(MODELS / "bert_tiny.dyn_int8.onnx"), ort_cpu=ort_cpu,
                     input_shapes={"input_ids": (1, 16), "attention_mask": (1, 16)})


def _feeds():
    rng = np.random.default_rng(3)
    mask = np.ones((1, 16), np.int64)
    mask[0, 12:] = 0
    return [rng.integers(0, 100, (1, 16)).astype(np.int64), mask]


@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni", "avx2", "plain"])
@pytest.mark.parametrize("threads", [1, 2])
def test_bert_dynamic_int8_products_take_their_scales_bias_and_residual(
        isa, threads, monkeypatch, tmp_path):
    if not runs_isa(isa):
        pytest.skip(f"{isa} code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    mod = _bert("vnni")
    plan = lower(P.InferType()(mod)["main"], isa, threads=threads)
    dense = [k for k in plan.kernels if k.kind == "DYNQ_DENSE"]
    fused = [k for k in dense if "epi" in k.params]
    # per layer: Q, K, V and the FFN's first product (scales and bias), the attention's
    # output and the FFN's second (with the residual): 6 in each of bert_tiny's 2 layers; the
    # pooler's (tanh: not a vector EWISE step) and the classifier's (3 columns) keep theirs
    assert len(fused) == 12
    assert sum(1 for k in fused for leaf in k.params["epi"]["leaves"] if leaf[0] == "full") == 4
    assert [(k.params["M"], k.params["N"]) for k in dense if "epi" not in k.params] == [
        (1, 64), (1, 3)]
    # Q and V written as [heads, S, H], K as [heads, H, S]: no TRANSPOSE kernel left
    assert sorted(k.params.get("out_perm", ["-"])[0] for k in fused) == [
        "-"] * 6 + ["heads"] * 4 + ["heads_t"] * 2
    assert not any(k.kind == "TRANSPOSE" for k in plan.kernels)
    feeds = _feeds()
    want = P.interpret(mod, feeds)[0]
    exe = P.build(mod, f"llvm -isa={isa} -threads={threads}")
    for r in [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]:
        turns = iter(["pool", "alone"] * 2)
        r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
    for _ in range(3 if threads > 1 else 1):
        assert exe.run(*feeds)[0].tobytes() == want.tobytes()
    monkeypatch.setattr(context, "dynq_epilogues", lambda plan: None)
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "unfused"))
    apart = P.build(mod, f"llvm -isa={isa} -threads={threads}")
    assert apart.run(*feeds)[0].tobytes() == want.tobytes()


def _dense_then(tree_of, n=48, m=5, k=40):
    """qnn.dense of dynamic-int8 operands to int32, then ``tree_of(product)`` in float32."""
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    x = Var("x", TensorType((m, k), "uint8"))
    zx = Var("zx", TensorType((), "int32"))
    c = relay.const
    prod = get_op("qnn.dense")(x, c(w), zx, c(np.zeros(n, np.int32)), c(np.float32(0.5)),
                               c(np.full(n, 0.25, np.float32)), units=n, out_dtype="int32",
                               accumulate="exact")
    r = Var("r", TensorType((m, n), "float32"))
    s = Var("s", TensorType((), "float32"))
    body = tree_of(prod, r, s, rng)
    return P.InferType()(IRModule({"main": Function([x, zx, r, s], body)}))


def _feeds_dense(m=5, n=48, k=40):
    rng = np.random.default_rng(2)
    return [rng.integers(0, 256, (m, k)).astype(np.uint8), np.array(7, np.int32),
            rng.standard_normal((m, n)).astype(np.float32), np.array(0.01, np.float32)]


def _cast(prod):
    return get_op("cast")(prod, dtype="float32")


TREES = {
    # scale (a scalar input), then a bias (a constant per column)
    "scale_bias": lambda p, r, s, rng: get_op("add")(
        get_op("multiply")(_cast(p), s),
        relay.const(rng.standard_normal(48).astype(np.float32))),
    # a residual in the product's layout, GELU's erf
    "residual_erf": lambda p, r, s, rng: get_op("erf")(get_op("add")(
        r, get_op("multiply")(_cast(p), s))),
}


@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni", "avx2", "plain"])
def test_small_products_fold_each_leaf_kind(tree, isa, monkeypatch, tmp_path):
    """5 rows (AMX takes 16 or more: the register tiles here), 48 columns: scalar, column and
    full leaves, the erf step; the interpreter's bits."""
    if not runs_isa(isa):
        pytest.skip(f"{isa} code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    mod = _dense_then(TREES[tree])
    plan = lower(mod["main"], isa)
    assert [k.kind for k in plan.kernels if k.kind in ("DYNQ_DENSE", "EWISE")] == ["DYNQ_DENSE"]
    feeds = _feeds_dense()
    want = P.interpret(mod, feeds)[0]
    assert P.build(mod, f"llvm -isa={isa}").run(*feeds)[0].tobytes() == want.tobytes()


def test_a_product_read_twice_keeps_its_ewise():
    """The int32 sums are also an output: nothing folds."""
    mod = _dense_then(lambda p, r, s, rng: p)
    body = mod["main"].body
    x, zx, r, s = mod["main"].params
    both = Tuple([body, get_op("multiply")(_cast(body), s)])
    mod2 = P.InferType()(IRModule({"main": Function([x, zx, r, s], both)}))
    plan = lower(mod2["main"], "plain")
    assert not any("epi" in k.params for k in plan.kernels)
    dynq_epilogues(plan)  # idempotent on a plan with nothing to fold
    assert not any("epi" in k.params for k in plan.kernels)


UNARY = ["negative", "nn.relu", "erf"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


@st.composite
def _trees(draw, depth=3):
    """A float32 tree over the leaves "p" (the product's cast), "s" (a scalar input), "c" (a
    constant per column), "r" (a full input) and "k" (a scalar constant)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["p", "s", "c", "r", "k"]))
    if draw(st.booleans()):
        return (draw(st.sampled_from(UNARY)), draw(_trees(depth - 1)))
    return (draw(st.sampled_from(BINARY)), draw(_trees(depth - 1)), draw(_trees(depth - 1)))


def _relay_tree(tree, leaves):
    if isinstance(tree, str):
        return leaves[tree]
    op, *kids = tree
    return get_op(op)(*[_relay_tree(k, leaves) for k in kids])


@settings(max_examples=30, deadline=None)
@given(tree=_trees(), m=st.sampled_from([1, 3, 16, 21, 33]), n=st.sampled_from([16, 24, 48, 64]),
       isa=st.sampled_from(["amx", "vnni", "avxvnni", "avx2", "plain"]),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 99))
def test_random_epilogue_trees_keep_the_bits(tree, m, n, isa, threads, seed):
    """Any vector elementwise tree over a dynamic-int8 product and scalar, per-column and
    full-layout operands, folded or not (a tree the fold takes: the product read once, as a
    cast, and N at least a vector): the interpreter's bits on every tier, one or two threads
    (a product this small stays on one thread; the fold's code is the same)."""
    if not runs_isa(isa):
        isa = "plain"
    k = 40
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    x = Var("x", TensorType((m, k), "uint8"))
    zx = Var("zx", TensorType((), "int32"))
    r = Var("r", TensorType((m, n), "float32"))
    s = Var("s", TensorType((), "float32"))
    prod = get_op("qnn.dense")(x, relay.const(w), zx, relay.const(np.zeros(n, np.int32)),
                               relay.const(np.float32(0.5)),
                               relay.const(np.full(n, 0.25, np.float32)), units=n,
                               out_dtype="int32", accumulate="exact")
    leaves = {"p": _cast(prod), "s": s, "r": r,
              "c": relay.const(rng.standard_normal(n).astype(np.float32)),
              "k": relay.const(np.float32(rng.standard_normal()))}
    body = _relay_tree(tree, leaves)
    if not isinstance(tree, str) or tree != "p":
        body = get_op("add")(body, leaves["p"])  # the product read at least once
    mod = P.InferType()(IRModule({"main": Function([x, zx, r, s], body)}))
    feeds = [rng.integers(0, 256, (m, k)).astype(np.uint8), np.array(rng.integers(0, 256),
             np.int32), (rng.standard_normal((m, n)) * 100).astype(np.float32),
             np.array(rng.standard_normal() * 1e-3, np.float32)]
    plan = lower(mod["main"], isa, threads=threads)
    dense = [kk for kk in plan.kernels if kk.kind == "DYNQ_DENSE"]
    assert len(dense) == 1
    if "epi" in dense[0].params:  # the int32 sums feed the tree only: no kernel reads them
        assert plan.buffers[dense[0].output][1] == "float32"
        assert not any(plan.buffers[i] == ((m, n), "int32") for kk in plan.kernels
                       for i in kk.inputs)
    want = P.interpret(mod, feeds)[0]
    got = P.build(mod, f"llvm -isa={isa} -threads={threads}").run(*feeds)[0]
    assert got.tobytes() == want.tobytes()


def heads_module(m: int, perm):
    """scales + bias over a 128-column dynamic-int8 product of ``m`` rows, reshaped to [1, m,
    2 heads, 64] and transposed by ``perm``; (module, feeds)."""
    n, k = 128, 64
    rng = np.random.default_rng(m)
    x = Var("x", TensorType((m, k), "uint8"))
    zx = Var("zx", TensorType((), "int32"))
    s = Var("s", TensorType((), "float32"))
    prod = get_op("qnn.dense")(x, relay.const(rng.integers(-128, 128, (n, k)).astype(np.int8)),
                               zx, relay.const(np.zeros(n, np.int32)),
                               relay.const(np.float32(0.5)),
                               relay.const(np.full(n, 0.25, np.float32)), units=n,
                               out_dtype="int32", accumulate="exact")
    y = get_op("add")(get_op("multiply")(_cast(prod), s),
                      relay.const(rng.standard_normal(n).astype(np.float32)))
    y = get_op("transpose")(get_op("reshape")(y, newshape=(1, m, 2, 64)), axes=list(perm))
    mod = P.InferType()(IRModule({"main": Function([x, zx, s], y)}))
    feeds = [rng.integers(0, 256, (m, k)).astype(np.uint8), np.array(3, np.int32),
             np.array(0.02, np.float32)]
    return mod, feeds


@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni", "avx2", "plain"])
@pytest.mark.parametrize("m", [16, 40])  # amx: one block of 16; blocks of 32, the last overlapping
@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 2, 3, 1)])
def test_products_store_into_attention_heads(isa, m, perm, monkeypatch, tmp_path):
    """scales + bias, reshaped to [1, M, 2 heads, 64] and transposed as BERT's Q / V (0, 2, 1, 3)
    and K (0, 2, 3, 1): the product stores into the heads itself (no TRANSPOSE kernel), K's
    columns a 16 x 16 block at a time on AMX; the interpreter's bits."""
    if not runs_isa(isa):
        pytest.skip(f"{isa} code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    mod, feeds = heads_module(m, perm)
    plan = lower(mod["main"], isa)
    dense = [kk for kk in plan.kernels if kk.kind == "DYNQ_DENSE"]
    assert dense[0].params["out_perm"] == ["heads" if perm == (0, 2, 1, 3) else "heads_t", 64]
    assert not any(kk.kind in ("TRANSPOSE", "EWISE") for kk in plan.kernels)
    assert (dense[0].params["isa"] == "amx") == (isa == "amx")
    want = P.interpret(mod, feeds)[0]
    assert P.build(mod, f"llvm -isa={isa}").run(*feeds)[0].tobytes() == want.tobytes()
