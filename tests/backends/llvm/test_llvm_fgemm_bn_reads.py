"""A per-channel batch norm + relu read by 1 x 1 float products is computed by them as they read
x (lower/float_bn_reads.py; ResNet v2's pre-activation read by conv1 and the strided shortcut):
no EWISE kernel when every reader is such a product; a reader of another kind keeps the EWISE
for every reader. Against the interpreter on every tier forced, bytes equal to the build that
keeps the EWISE (NaN, infinities and -0 included), one and two threads (row chunks fused; a
product split by column panels keeps the EWISE), both drivers, and with x packed per k block
instead of with all of k (gemm.PACK_FLOATS)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from drivers import alternate_drivers
from partita.backends.llvm.emit.float import chunks, gemm
from partita.backends.llvm.lower import float_bn_reads, float_conv

import partita as P
from partita import relay

context = importlib.import_module("partita.backends.llvm.lower.context")
TIERS = ["amx", "vnni", "avxvnni", "avx2", "plain"]


def _preact(h, w, c, o, other=False, seed=0):
    """NHWC: t = relu(x * s + b) per channel, read by a 1 x 1 product (+ bias) and a strided 1 x
    1 one (ResNet v2's shortcut); ``other``: also by a 3 x 3 convolution (not a 1 x 1 product).
    A 1 x 1 product before it makes x a computed buffer, as in ResNet."""
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(1, h, w, c))

    def const(*shape):
        return relay.const(rng.standard_normal(shape).astype(np.float32))

    def conv(v, k, cin, cout, **kw):
        return relay.nn.conv2d(v, const(k, k, cin, cout), data_layout="NHWC",
                               kernel_layout="HWIO", **kw)

    shift = rng.standard_normal(c).astype(np.float32)
    shift[:3] = -0.0  # x * s = +-0 -> -0 + -0: the relu's -0 -> +0
    a = conv(x, 1, c, c)
    t = relay.nn.relu(relay.add(relay.multiply(a, const(c)), relay.const(shift)))
    outs = [relay.nn.bias_add(conv(t, 1, c, o), const(o), axis=3), conv(t, 1, c, o, strides=(2, 2))]
    if other:
        outs.append(conv(t, 3, c, 16, padding=(1, 1, 1, 1)))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))
    return relay.transform.InferType()(mod), (1, h, w, c)


def _labels(exe) -> list[str]:
    return [str(label) for s in exe.steps for label in (getattr(s.region, "kernels", None) or [])]


def _run_both_drivers(exe, a):
    alternate_drivers(exe, 2)  # the worker's driver and the one-thread one, whatever the load
    return [exe.run(a) for _ in range(4)]


def _bytes(outs) -> list[bytes]:
    return [o.tobytes() for o in outs]


# 14 x 14 x 32 -> 48: rows in chunks; 7 x 9 x 40 -> 256: k not a multiple of 16 (a masked
# vector), panel chunks; 5 x 5 x 24 -> 16: a single short row block
SHAPES = {"rows": (14, 14, 32, 48), "panels": (7, 9, 40, 256), "small": (5, 5, 24, 16)}


@pytest.fixture
def small_products(monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(float_bn_reads, "MIN_FLOATS", 0)  # small images fused too
    monkeypatch.setattr(float_conv, "SPLIT_MACS", 1 << 12)  # small products split too,
    monkeypatch.setattr(chunks, "CHUNK_MACS", 1 << 12)  # in many chunks


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_batch_norm_relu_read_by_products(monkeypatch, small_products, tier, shape):
    mod, xs = _preact(*SHAPES[shape])
    a = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    target = f"llvm -isa={tier} -emulate=yes"
    one = P.build(mod, target)
    assert not any("ewise" in label.lower() for label in _labels(one)), _labels(one)
    got = one.run(a)
    for g, want in zip(got, P.interpret(mod, [a])):
        assert float(np.abs(g - want).max()) <= 1e-5 * float(np.abs(want).max())
    two = P.build(mod, target + " -threads=2")
    # a split reader with N >= M may go by column panels: "panels" keeps the EWISE at two
    # threads ("small"'s strided reader, 9 rows, is too small to split)
    kept = any("ewise" in label.lower() for label in _labels(two))
    assert kept == (shape == "panels"), _labels(two)
    assert all(_bytes(o) == _bytes(got) for o in _run_both_drivers(two, a))
    monkeypatch.setattr(gemm, "PACK_FLOATS", 0)  # packed per k block
    assert _bytes(P.build(mod, target).run(a)) == _bytes(got)
    monkeypatch.setattr(context, "float_bn_reads", lambda plan: None)
    kept = P.build(mod, target)
    assert any("ewise" in label.lower() for label in _labels(kept))
    assert _bytes(kept.run(a)) == _bytes(got)


def test_special_values_keep_the_ewise_bits(monkeypatch, small_products):
    """NaN stays NaN, -0 becomes +0, infinities pass: the bytes of the EWISE's build."""
    mod, xs = _preact(*SHAPES["rows"])
    a = np.random.default_rng(4).standard_normal(xs).astype(np.float32)
    a[0, 0, 0] = np.nan
    a[0, 1] = 0.0
    a[0, 2, 3] = np.inf
    a[0, 3, 5] = -np.inf
    got = P.build(mod, "llvm -isa=amx -emulate=yes").run(a)
    assert np.isnan(got[0]).any()
    monkeypatch.setattr(context, "float_bn_reads", lambda plan: None)
    assert _bytes(P.build(mod, "llvm -isa=amx -emulate=yes").run(a)) == _bytes(got)


def test_a_reader_of_another_kind_keeps_the_ewise(monkeypatch, small_products):
    """Read also by a 3 x 3 convolution: the EWISE stays, and the 1 x 1 products read it (a
    packing of theirs would save nothing)."""
    mod, xs = _preact(*SHAPES["rows"], other=True)
    plans = []
    run = float_bn_reads.float_bn_reads

    def spy(plan):
        run(plan)
        plans.append(plan)

    monkeypatch.setattr(context, "float_bn_reads", spy)
    exe = P.build(mod, "llvm -isa=amx -emulate=yes -threads=2")
    assert any("ewise" in label.lower() for label in _labels(exe))
    fused = [k for p in plans for k in p.kernels if k.params.get("x_affine")]
    assert plans and not fused
    a = np.random.default_rng(2).standard_normal(xs).astype(np.float32)
    got = exe.run(a)
    for g, want in zip(got, P.interpret(mod, [a])):
        assert float(np.abs(g - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_small_batch_norms_stay_separate(monkeypatch, tmp_path):
    """At most MIN_FLOATS (the default): the EWISE pass stays, its image in L2."""
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    mod, xs = _preact(*SHAPES["rows"])
    exe = P.build(mod, "llvm -isa=amx -emulate=yes")
    assert any("ewise" in label.lower() for label in _labels(exe))
