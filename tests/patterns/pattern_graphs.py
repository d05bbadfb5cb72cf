"""Graph builders for the pattern tests: small quantized blocks and a bit-exact oracle."""

from __future__ import annotations

import numpy as np
from same_bits import assert_same_outputs, same_bits  # noqa: F401  (re-exported)

import partita as P
from partita.ir import IRModule, Span, const, var
from partita.ops import get_op

RNG = np.random.default_rng(7)


def op(name):
    return get_op(name)


def qparams(scale: float, zp: int):
    return const(np.float32(scale)), const(np.int32(zp))


def conv_block(
    x, cin: int, cout: int, index: int, clip_after: bool = True, bias: bool = True, pad=False
):
    """[nn.pad] -> qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip], NHWC/HWIO, spans."""
    span = Span(index, "CONV_2D", f"conv{index}")
    w = const(RNG.integers(-20, 20, (3, 3, cin, cout), dtype=np.int8))
    s_in, z_in = qparams(0.05, 2)
    s_w, z_w = qparams(0.02, 0)
    if pad:
        widths = ((0, 0), (1, 1), (1, 1), (0, 0))
        x = op("nn.pad")(x, const(np.int8(2)), pad_width=widths, span=span)
    y = op("qnn.conv2d")(
        x,
        w,
        z_in,
        z_w,
        s_in,
        s_w,
        padding=(0, 0) if pad else (1, 1),
        data_layout="NHWC",
        kernel_layout="HWIO",
        span=span,
    )
    if bias:
        b = const(RNG.integers(-100, 100, (cout,), dtype=np.int32))
        y = op("nn.bias_add")(y, b, axis=3, span=span)
    rs, rz = qparams(0.05 * 0.02, 0)
    os_, oz = qparams(0.1, -3)
    y = op("qnn.requantize")(y, rs, rz, os_, oz, out_dtype="int8", span=span)
    if clip_after:
        y = op("clip")(y, a_min=-128.0, a_max=127.0, span=span)
    return y


def int8_input(shape=(1, 6, 6, 4), name="x"):
    return var(name, shape, "int8")


def random_int8(shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


def module(expr) -> IRModule:
    mod = IRModule.from_expr(expr)
    P.InferType()(mod)
    return mod


def count_ops(expr_or_mod, name: str) -> int:
    from partita.ir import post_order

    root = expr_or_mod["main"] if isinstance(expr_or_mod, IRModule) else expr_or_mod
    return sum(
        1
        for n in post_order(root, enter_functions=False)
        if isinstance(n, P.Call) and getattr(n.op, "name", None) == name
    )
