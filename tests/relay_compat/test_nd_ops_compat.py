"""The ops TVM's BYOC pattern tables name that partita added last (nn.conv1d, nn.conv3d,
nn.conv3d_transpose, nn.max_pool3d, nn.avg_pool3d, qnn.conv2d_transpose): built as TVM spells
them, typed, run, and matched by a pattern under both pattern spellings."""

from __future__ import annotations

import numpy as np
import torch

from partita import patterns, relay
from partita.relay.dataflow_pattern import is_constant, is_op, wildcard


def _mod(x, expr):
    return relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], expr)))


def test_tvm_spellings_build_the_ops():
    assert relay.op.nn.conv3d is relay.nn.conv3d
    x = relay.var("x", shape=(1, 2, 4, 4, 4), dtype="float32")
    w = relay.const(np.ones((3, 2, 1, 1, 1), "float32"))
    assert relay.nn.conv3d(x, w, kernel_size=(1, 1, 1), channels=3).op.name == "nn.conv3d"
    assert relay.op.nn.max_pool3d(x, pool_size=(2, 2, 2)).attrs.layout == "NCDHW"
    assert relay.nn.avg_pool3d(x, pool_size=2).attrs["count_include_pad"] is False
    assert (
        relay.nn.conv3d_transpose(x, relay.const(np.ones((2, 1, 1, 1, 1), "float32"))).attrs[
            "kernel_layout"
        ]
        == "IODHW"
    )
    y = relay.var("y", shape=(1, 2, 8), dtype="float32")
    assert relay.nn.conv1d(y, relay.const(np.ones((2, 2, 3), "float32"))).attrs.padding == (0, 0)
    assert relay.qnn.op.conv2d_transpose.__qualname__ == "qnn.conv2d_transpose"


def test_conv3d_pool3d_run_as_torch_under_relay():
    rng = np.random.default_rng(0)
    data = rng.integers(-4, 5, (1, 2, 4, 5, 6)).astype("float32")
    weight = rng.integers(-4, 5, (3, 2, 2, 2, 2)).astype("float32")
    x = relay.var("x", shape=data.shape, dtype="float32")
    conv = relay.op.nn.conv3d(x, relay.const(weight), padding=(1, 1, 1), strides=(1, 2, 1))
    out = relay.nn.max_pool3d(conv, pool_size=(2, 2, 2), strides=(2, 2, 2), ceil_mode=True)
    got = relay.interpret(_mod(x, out), [data])[0]
    t = torch.nn.functional.conv3d(
        torch.from_numpy(data), torch.from_numpy(weight), padding=1, stride=(1, 2, 1)
    )
    want = torch.nn.functional.max_pool3d(t, 2, 2, ceil_mode=True).numpy()
    np.testing.assert_array_equal(got, want)


def _qnn_deconv(x):
    w = relay.const(np.arange(-18, 18, dtype="int8").reshape(2, 2, 3, 3))
    return relay.qnn.op.conv2d_transpose(
        x,
        w,
        relay.const(0, "int32"),
        relay.const(0, "int32"),
        relay.const(0.5),
        relay.const(0.25),
        kernel_size=(3, 3),
        channels=2,
        strides=(2, 2),
        padding=(1, 1),
        output_padding=(1, 1),
    )


def test_a_tvm_style_qnn_conv2d_transpose_pattern_matches():
    """A deconvolution row as BYOC tables write it now matches (it used to build a pattern that
    never matched, partita lacking the op), and partita's strict patterns accept the op."""
    x = relay.var("x", shape=(1, 2, 4, 4), dtype="int8")
    deconv = _qnn_deconv(x)
    consts = [is_constant() for _ in range(5)]  # one pattern object binds one node
    pat = is_op("qnn.conv2d_transpose")(wildcard(), *consts)
    mod = _mod(x, deconv)
    assert pat.match(mod["main"].body)
    assert mod["main"].body.checked_type.shape == (1, 2, 8, 8)
    strict = patterns.is_op("nn.conv1d")(patterns.wildcard(), patterns.is_constant())
    y = relay.var("y", shape=(1, 2, 8), dtype="float32")
    assert strict.match(relay.nn.conv1d(y, relay.const(np.ones((2, 2, 3), "float32"))))
    data = np.random.default_rng(3).integers(-128, 128, (1, 2, 4, 4), dtype=np.int8)
    got = relay.interpret(mod, [data])[0]
    w = np.arange(-18, 18).reshape(2, 2, 3, 3).astype(np.float64)
    want = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(data.astype(np.float64)),
        torch.from_numpy(w),
        stride=2,
        padding=1,
        output_padding=1,
    ).numpy()
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_the_new_ops_print_and_parse_back():
    x = relay.var("x", shape=(1, 2, 4, 4, 4), dtype="float32")
    w = relay.var("w", shape=(3, 2, 1, 1, 1), dtype="float32")
    d = relay.var("d", shape=(1, 2, 4, 4), dtype="int8")
    k = relay.var("k", shape=(2, 2, 3, 3), dtype="int8")
    conv = relay.nn.conv3d(x, w, padding=(1, 0, 0, 0, 1, 1))
    pool = relay.nn.avg_pool3d(conv, pool_size=2, count_include_pad=True, ceil_mode=True)
    qd = relay.qnn.op.conv2d_transpose(
        d,
        k,
        relay.const(1, "int32"),
        relay.const(0, "int32"),
        relay.const(0.5),
        relay.const(0.25),
        strides=(2, 2),
        output_padding=(1, 1),
    )
    fn = relay.Function([x, w, d, k], relay.Tuple([pool, qd]))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    again = relay.transform.InferType()(relay.parse(str(mod)))
    assert relay.structural_equal(again["main"], mod["main"])
