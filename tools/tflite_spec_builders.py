"""Building blocks of the TFLite test model specs (tflite_op_specs.py, tflite_net_specs.py).

`Spec` and `Inp` describe one model; the builders return `build(rng) -> (body, inputs)` for common
operator shapes; `want` spells an expected operator in the summary form of
gen_tflite_models.op_summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf


@dataclass(frozen=True)
class Inp:
    """One model input: static shape and the uniform range calibration and test data come from."""

    shape: tuple[int, ...]
    lo: float = -1.0
    hi: float = 1.0


@dataclass(frozen=True)
class Spec:
    """One model to generate: what it is, how to build it and what the converter must emit."""

    name: str
    desc: str
    build: Callable[[np.random.Generator], Any]
    expect: tuple[tuple[str, dict[str, str]], ...] = ()
    io: str = "int8"  # dtype of the model's inputs and outputs: int8, uint8 or float32
    quant: str = "int8"  # int8 (per-channel weights), int8_per_tensor or float16
    group: str = "ops"
    extra: dict[str, Any] = field(default_factory=dict)


ACTS = {None: lambda y: y, "relu": tf.nn.relu, "relu6": tf.nn.relu6}


def _c(a) -> tf.Tensor:
    return tf.constant(np.asarray(a, np.float32))


def _w(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> tf.Tensor:
    return _c(rng.normal(size=shape) / np.sqrt(fan_in))


def conv(pad="SAME", stride=1, dil=1, bias=True, act=None, hw=8, cin=4, cout=8, k=3):
    """CONV_2D of a (1, hw, hw, cin) input with a k x k kernel."""

    def build(rng):
        w, b = _w(rng, (k, k, cin, cout), k * k * cin), _c(rng.normal(0, 0.5, cout))

        def body(x):
            y = tf.nn.conv2d(x, w, stride, pad, dilations=dil)
            return ACTS[act](tf.nn.bias_add(y, b) if bias else y)

        return body, [Inp((1, hw, hw, cin))]

    return build


def dwconv(pad="SAME", stride=1, mult=1, act=None, hw=8, cin=4, k=3):
    """DEPTHWISE_CONV_2D with bias of a (1, hw, hw, cin) input, depth multiplier `mult`."""

    def build(rng):
        w, b = _w(rng, (k, k, cin, mult), k * k), _c(rng.normal(0, 0.5, cin * mult))

        def body(x):
            y = tf.nn.depthwise_conv2d(x, w, [1, stride, stride, 1], pad)
            return ACTS[act](tf.nn.bias_add(y, b))

        return body, [Inp((1, hw, hw, cin))]

    return build


def dense(shape=(1, 32), units=16, bias=True, act=None):
    """x @ W (+ b) with a constant W; a rank-3 x keeps its leading dimensions."""

    def build(rng):
        w, b = _w(rng, (shape[-1], units), shape[-1]), _c(rng.normal(0, 0.5, units))

        def body(x):
            y = tf.matmul(x, w)
            return ACTS[act](y + b if bias else y)

        return body, [Inp(shape)]

    return build


def unary(fn, shape=(1, 8, 8, 4), lo=-1.0, hi=1.0):
    """fn(x) of one input drawn from [lo, hi]."""
    return lambda rng: (fn, [Inp(shape, lo, hi)])


def binary(fn, sx=(1, 8, 8, 4), sy=(1, 8, 8, 4), ry=2.0):
    """fn(x, y) with x in [-1, 1] and y in [-ry, ry] so that the two scales differ."""
    return lambda rng: (fn, [Inp(sx), Inp(sy, -ry, ry)])


def with_const(fn, cshape):
    """fn(x, c) with a random constant c of shape cshape."""

    def build(rng):
        c = _c(rng.normal(0, 1, cshape))
        return (lambda x: fn(x, c)), [Inp((1, 8, 8, 4))]

    return build


def conv_fc(rng):
    """CONV_2D + RELU, then FULLY_CONNECTED: a small float network for fp16 weights."""
    w, b = _w(rng, (3, 3, 4, 8), 36), _c(rng.normal(0, 0.5, 8))
    wf, bf = _w(rng, (8 * 4 * 4, 10), 128), _c(rng.normal(0, 0.5, 10))

    def body(x):
        y = tf.nn.relu(tf.nn.conv2d(x, w, 2, "SAME") + b)
        return tf.matmul(tf.reshape(y, (1, 128)), wf) + bf

    return body, [Inp((1, 8, 8, 4))]


def resize(kind, align, half):
    """tf.compat.v1 resize of (1, 8, 8, 4) to 13 x 11 (non-integer scale factors)."""
    fn = {
        "bilinear": tf.compat.v1.image.resize_bilinear,
        "nearest": tf.compat.v1.image.resize_nearest_neighbor,
    }[kind]
    return unary(lambda x: fn(x, (13, 11), align_corners=align, half_pixel_centers=half))


def hard_swish(x):
    return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)


def concat_diff(x, y):
    # Branches with different ranges feed the concatenation, which needs one shared scale.
    return tf.concat([tf.nn.relu6(x * 6.0), tf.tanh(y)], axis=3)


def fmt(v) -> str:
    """The summary form of one option value (shared with gen_tflite_models.op_summaries)."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def want(name, **opts):
    """An expected operator: builtin name and the options (summary form) it must have."""
    return (name, {k: fmt(v) for k, v in opts.items()})


def reshape_to_squeeze(model_bytes: bytes) -> bytes:
    """Rewrite the model's single RESHAPE into SQUEEZE(squeeze_dims=[1, 2]).

    The converter always lowers tf.squeeze with static shapes to RESHAPE; older converters and
    other tools emit SQUEEZE, so the frontend must read it. The shape tensor stays unused.
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    m = flatbuffer_utils.read_model_from_bytearray(bytearray(model_bytes))
    (op,) = m.subgraphs[0].operators
    code = m.operatorCodes[op.opcodeIndex]
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.SQUEEZE
    op.inputs = op.inputs[:1]
    op.builtinOptionsType = schema.BuiltinOptions.SqueezeOptions
    op.builtinOptions = schema.SqueezeOptionsT()
    op.builtinOptions.squeezeDims = [1, 2]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


_POOL = dict(avg=tf.nn.avg_pool2d, max=tf.nn.max_pool2d)


def pool(kind, k, s, pad):
    return unary(lambda x: _POOL[kind](x, k, s, pad), shape=(1, 9, 9, 4))
