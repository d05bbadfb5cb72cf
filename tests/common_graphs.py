"""Graph builders and backend registration shared by the partition and backend tests.

tests/conftest.py puts this folder on sys.path, so any test folder can ``import common_graphs``.
"""

from __future__ import annotations

import contextlib

from partita.backends import register_backend, unregister_backend


@contextlib.contextmanager
def registered(*backends):
    """Register backends for the duration of a ``with`` block."""
    for b in backends:
        register_backend(b, override=True)
    try:
        yield
    finally:
        for b in backends:
            unregister_backend(b.name)


def int8_convnet(strides=((1, 1), (4, 4))):
    """x -> one CONV_2D (conv, bias, requantize, clip) per stride -> MEAN, every node with the
    span of its source op (index, type, name ``conv<i>`` / ``mean``)."""
    import numpy as np

    import partita as P
    from partita.ir import Span

    rng = np.random.default_rng(0)
    op = P.get_op
    x = P.var("x", (1, 8, 8, 4), "int8")
    y = x
    for i, stride in enumerate(strides):
        s = Span(i, "CONV_2D", f"conv{i}")
        w = P.const(rng.integers(-8, 8, (4, 3, 3, 4), dtype=np.int8))
        zero, scale = P.const(np.int32(0)), P.const(np.float32(0.05))
        y = op("qnn.conv2d")(
            y,
            w,
            zero,
            zero,
            scale,
            P.const(np.float32(0.02)),
            strides=stride,
            padding=(1, 1),
            data_layout="NHWC",
            kernel_layout="OHWI",
            span=s,
        )
        bias = P.const(rng.integers(-50, 50, (4,), dtype=np.int32))
        y = op("nn.bias_add")(y, bias, axis=3, span=s)
        y = op("qnn.requantize")(
            y, P.const(np.float32(0.001)), zero, scale, zero, out_dtype="int8", span=s
        )
        y = op("clip")(y, a_min=-128.0, a_max=127.0, span=s)
    n = len(strides)
    y = op("qnn.mean")(
        y,
        P.const(np.float32(0.05)),
        P.const(np.int32(0)),
        P.const(np.float32(0.05)),
        P.const(np.int32(0)),
        axis=(1, 2),
        keepdims=True,
        span=Span(n, "MEAN", "mean"),
    )
    return P.IRModule.from_expr(y)
