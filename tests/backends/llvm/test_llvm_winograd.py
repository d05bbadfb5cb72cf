"""Float32 3 x 3 convolutions as Winograd's F(2 x 2, 3 x 3) (lower/float_winograd.py,
emit/float/winograd.py): against the reference interpreter's float64 sums on every tier forced
(``-emulate=yes`` where this CPU lacks one), one and two threads (blocks of tiles, or a block's
halves of the output channels) giving the same bits, ``-winograd=no`` keeping the direct product
(and its own cache entry), and the convolutions it leaves alone."""

from __future__ import annotations

import numpy as np
import pytest
from drivers import alternate_drivers
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower import float_winograd
from partita.backends.llvm.lower.context import lower

import partita as P
from partita import relay

TIERS = ["amx", "vnni", "avxvnni", "avx2", "plain"]
# the transforms' sums are not one FMA chain per output: ~1e-6 of the output's scale on these
# shapes (a wrong transform coefficient is off by the scale itself)
TOLERANCE = 3e-6


def conv3x3(h, w, c, o, stride=1, pad=(1, 1, 1, 1), relu=True, seed=0, n=1):
    """NHWC conv 3 x 3 (He-scaled weights) + bias (+ relu) of ``n`` images."""
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(n, h, w, c))
    wt = (rng.standard_normal((3, 3, c, o)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    y = relay.nn.conv2d(x, relay.const(wt), strides=(stride, stride), padding=list(pad),
                        data_layout="NHWC", kernel_layout="HWIO")
    y = relay.nn.bias_add(y, relay.const(rng.standard_normal(o).astype(np.float32)), axis=3)
    if relu:
        y = relay.nn.relu(y)
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    return relay.transform.InferType()(mod), (n, h, w, c)


def kinds(exe) -> list[str]:
    return [str(label).split()[0] for s in exe.steps
            for label in (getattr(s.region, "kernels", None) or [])]


def check(mod, xs, target, seed=1):
    """The build's output against the interpreter's; (executable, output)."""
    exe = P.build(mod, target)
    x = np.random.default_rng(seed).standard_normal(xs).astype(np.float32)
    got, want = exe.run(x)[0], P.interpret(mod, [x])[0]
    scale = float(np.abs(want).max())
    assert float(np.abs(got - want).max()) <= TOLERANCE * scale, target
    return exe, x


# (h, w, c, o, pad[, images]): odd sizes; a batch; one block, parts 2 with two threads (8 x 8,
# 64 -> 128); several blocks
# (20 x 24, made small below); no padding border (valid: pad 0); channels not a multiple of
# a full panel (48 -> 80)
SHAPES = {
    "odd": (7, 9, 32, 64, (1, 1, 1, 1)),  # the last tiles' outside row / column not stored
    "batch": (5, 6, 32, 32, (1, 1, 1, 1), 3),  # three images' tiles in one product
    "halves": (8, 8, 64, 128, (1, 1, 1, 1)),
    "blocks": (20, 24, 32, 32, (1, 1, 1, 1)),
    "valid": (18, 10, 32, 48, (0, 0, 0, 0)),
    "panels": (12, 10, 48, 80, (1, 1, 1, 1)),
}


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_winograd_equals_the_interpreter_on_every_tier(monkeypatch, tmp_path, tier, shape):
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(float_winograd, "BLOCK_FLOATS", 1 << 14)  # 20 x 24: blocks of 15 tiles
    h, w, c, o, pad, *n = SHAPES[shape]
    mod, xs = conv3x3(h, w, c, o, pad=pad, n=n[0] if n else 1)
    one, x = check(mod, xs, f"llvm -isa={tier} -emulate=yes")
    assert "FWINO" in kinds(one) and "FDENSE" not in kinds(one)
    two, _ = check(mod, xs, f"llvm -isa={tier} -emulate=yes -threads=2")
    alternate_drivers(two, 2)  # the worker's driver and the one-thread one
    for _ in range(4):  # each output computed by one chunk: one thread's bits
        assert np.array_equal(two.run(x)[0], one.run(x)[0])


def test_block_and_part_plans():
    """Blocks divide the tiles evenly, within the scratch budget; few blocks split channels."""
    assert float_winograd.block_tiles(784, 64, 64) == 196  # 56 x 56: 4 blocks
    assert float_winograd.block_tiles(196, 128, 128) == 98  # 28 x 28: 2 blocks
    assert float_winograd.block_tiles(49, 256, 256) == 49  # 14 x 14: 1 block
    for tiles, c, o in [(784, 64, 64), (196, 128, 128), (49, 256, 256), (143, 512, 512)]:
        per = float_winograd.block_tiles(tiles, c, o)
        assert tiles % per == 0 and (per >= 6 or per == tiles)


def test_no_even_block_near_the_budget_stays_direct():
    """A tile count whose divisors jump past the scratch budget (1,009 x 1,009 tiles, 1,009
    prime): the convolution stays direct rather than take a block of 10 MB (planned only)."""
    assert float_winograd.block_tiles(1009 * 1009, 80, 80) == 1009
    mod, _ = conv3x3(2018, 2018, 80, 80)
    plan = lower(mod["main"], "plain")
    assert "FWINO" not in {k.kind for k in plan.kernels}
    small, _ = conv3x3(18, 18, 80, 80)  # 81 tiles: one block
    assert "FWINO" in {k.kind for k in lower(small["main"], "plain").kernels}


def test_winograd_no_keeps_the_direct_product_and_its_own_cache_entry(monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))  # the region cache on
    mod, xs = conv3x3(16, 16, 32, 64)
    wino, x = check(mod, xs, "llvm")
    direct, _ = check(mod, xs, "llvm -winograd=no")
    assert kinds(wino) == ["FPAD", "FWINO"] and kinds(direct) == ["FPAD", "FDENSE"]
    again, _ = check(mod, xs, "llvm")  # from the cache: still the Winograd region
    assert kinds(again) == ["FPAD", "FWINO"]
    assert np.array_equal(again.run(x)[0], wino.run(x)[0])
    with pytest.raises(P.PartitaError, match="-winograd=maybe is not one of yes, no"):
        P.build(mod, "llvm -winograd=maybe")


@pytest.mark.parametrize("why, args", [
    ("stride 2", dict(h=16, w=16, c=32, o=32, stride=2)),
    ("input channels not a multiple of 16", dict(h=16, w=16, c=24, o=32)),
    ("few tiles", dict(h=6, w=6, c=32, o=32)),
    ("few tiles for 16 MB of weights", dict(h=7, w=7, c=512, o=512)),
])
def test_other_convolutions_stay_direct(why, args):
    mod, xs = conv3x3(**args)
    exe, _ = check(mod, xs, "llvm")
    assert "FWINO" not in kinds(exe), why


def test_the_kernel_reports_its_own_multiply_adds():
    """profile's GMAC/s counts the 16 products' multiply-adds (16 x tiles x C x O), not the
    direct sum's (2.25x more)."""
    mod, xs = conv3x3(16, 16, 32, 64)
    exe = P.build(mod, "llvm")
    x = np.random.default_rng(0).standard_normal(xs).astype(np.float32)
    ops = [op for step in exe.profile(x).steps for op in step.ops
           if op.metrics.get("kernel") == "FWINO"]
    assert [op.metrics["macs"] for op in ops] == [16 * 64 * 32 * 64]


@settings(max_examples=20, deadline=None)
@given(
    oh=st.integers(7, 24),
    ow=st.integers(7, 24),
    c=st.sampled_from([32, 48, 64, 96]),
    o=st.sampled_from([32, 48, 64, 80, 128]),
    pad=st.sampled_from([(1, 1, 1, 1), (0, 0, 0, 0), (2, 1, 0, 1)]),
    bias=st.booleans(),
    residual=st.booleans(),
    relu=st.booleans(),
    threads=st.sampled_from([1, 2]),
    n=st.sampled_from([1, 2]),
)
def test_random_winograd_convolutions(oh, ow, c, o, pad, bias, residual, relu, threads, n):
    """Any output of 4 x 4 tiles or more (odd sizes too) of one or two images, any pads
    summing to 2 (or none), a bias, a residual (a 1 x 1 convolution of the same input,
    computed first) and a relu in the epilogue or not: FWINO, within TOLERANCE of the
    interpreter."""
    h, w = oh + 2 - pad[0] - pad[2], ow + 2 - pad[1] - pad[3]
    rng = np.random.default_rng(oh * 100 + ow)
    x = relay.var("x", shape=(n, h, w, c))
    if pad == (0, 0, 0, 0) and residual:
        residual = False  # the shortcut has the input's size, not the output's
    wt = (rng.standard_normal((3, 3, c, o)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    y = relay.nn.conv2d(x, relay.const(wt), padding=list(pad), data_layout="NHWC",
                        kernel_layout="HWIO")
    if bias:
        y = relay.nn.bias_add(y, relay.const(rng.standard_normal(o).astype(np.float32)), axis=3)
    if residual and (h, w) == (oh, ow):
        short = relay.nn.conv2d(x, relay.const(rng.standard_normal((1, 1, c, o)).astype(
            np.float32)), data_layout="NHWC", kernel_layout="HWIO")
        y = relay.add(y, short)
    if relu:
        y = relay.nn.relu(y)
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], y)))
    exe, _ = check(mod, (n, h, w, c), f"llvm -threads={threads}")
    assert "FWINO" in kinds(exe)
