"""Per-op ONNX test models for gen_onnx_models.py: small float graphs built with onnx.helper.

Each spec is (name, builder, quantize) where builder(rng) returns (nodes, initializers, inputs,
outputs) and quantize lists the quantize_static configurations to derive from it ("" = float
only). Inputs are float32, uniform in [-1, 1] unless the spec says otherwise.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
ALL_Q = ("qdq_s8s8_pc", "qdq_u8s8_pt", "qop_u8s8_pc", "qop_s8s8_pt")
QDQ_ONLY = ("qdq_s8s8_pc", "qdq_u8s8_pt")


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def w(rng, *shape, scale=None):
    """Random float32 weights with fan-in scaling (activations keep their magnitude)."""
    fan_in = int(np.prod(shape[1:])) or 1
    s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
    return (rng.standard_normal(shape) * s).astype(np.float32)


def conv(
    name="conv",
    shape=(1, 8, 12, 12),
    out=16,
    k=3,
    stride=1,
    pads=1,
    group=1,
    dilation=1,
    act=None,
    bias=True,
):
    def build(rng):
        c = shape[1]
        inits = [init("W", w(rng, out, c // group, k, k))]
        ins = ["x", "W"]
        if bias:
            inits.append(init("B", (rng.standard_normal(out) * 0.1).astype(np.float32)))
            ins.append("B")
        nodes = [
            helper.make_node(
                "Conv",
                ins,
                ["c" if act else "y"],
                name=name,
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[pads] * 4,
                group=group,
                dilations=[dilation] * 2,
            )
        ]
        if act == "Relu":
            nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
        elif act == "Relu6":
            nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="relu6"))
            inits += [init("lo", np.float32(0)), init("hi", np.float32(6))]
        return nodes, inits, [vi("x", shape)], [vi("y", None)]

    return build


def unary(op, shape=(1, 8, 10, 10), **attrs):
    def build(rng):
        nodes = [helper.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)]
        return nodes, [], [vi("x", shape)], [vi("y", None)]

    return build


def clip(lo, hi, shape=(1, 8, 10, 10)):
    def build(rng):
        nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")]
        inits = [init("lo", np.float32(lo)), init("hi", np.float32(hi))]
        return nodes, inits, [vi("x", shape)], [vi("y", None)]

    return build


def binary(op, a=(1, 8, 6, 6), b=(1, 8, 6, 6), const_b=False):
    def build(rng):
        inputs = [vi("a", a)]
        inits = []
        if const_b:
            inits.append(init("b", (rng.uniform(0.5, 1.5, b)).astype(np.float32)))
        else:
            inputs.append(vi("b", b))
        nodes = [helper.make_node(op, ["a", "b"], ["y"], name=op.lower())]
        return nodes, inits, inputs, [vi("y", None)]

    return build


def pool(op, shape=(1, 8, 11, 11), **attrs):
    return unary(op, shape, **attrs)


def gemm(shape=(2, 32), units=10, trans_b=1):
    def build(rng):
        wt = w(rng, units, shape[1]) if trans_b else w(rng, units, shape[1]).T.copy()
        inits = [init("W", wt), init("B", (rng.standard_normal(units) * 0.1).astype(np.float32))]
        nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["y"], name="gemm", transB=trans_b)]
        return nodes, inits, [vi("x", shape)], [vi("y", None)]

    return build


def matmul(shape=(1, 4, 32), units=12):
    def build(rng):
        inits = [init("W", w(rng, units, shape[-1]).T.copy())]
        nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul")]
        return nodes, inits, [vi("x", shape)], [vi("y", None)]

    return build


def concat():
    def build(rng):
        nodes = [
            helper.make_node("Mul", ["a", "two"], ["a2"], name="scale_a"),
            helper.make_node("Concat", ["a2", "b"], ["y"], name="concat", axis=1),
        ]
        inits = [init("two", np.float32(2.0))]
        return nodes, inits, [vi("a", (1, 4, 6, 6)), vi("b", (1, 6, 6, 6))], [vi("y", None)]

    return build


def shape_reshape():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the exporter idiom for flattening."""

    def build(rng):
        nodes = [
            helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
            helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"),
            helper.make_node("Concat", ["n1", "minus1"], ["newshape"], name="cat", axis=0),
            helper.make_node("Reshape", ["x", "newshape"], ["y"], name="reshape"),
        ]
        inits = [
            init("zero", np.int64(0)),
            init("axes0", np.array([0], np.int64)),
            init("minus1", np.array([-1], np.int64)),
        ]
        return nodes, inits, [vi("x", (1, 4, 3, 3))], [vi("y", None)]

    return build


def tensor_ops():
    """Transpose, Flatten, Squeeze, Unsqueeze, Slice, Split, Identity, Cast, Constant."""

    def build(rng):
        mk = helper.make_node
        nodes = [
            mk("Transpose", ["x"], ["t"], name="transpose", perm=[0, 2, 3, 1]),
            mk("Slice", ["t", "starts", "ends", "axes", "steps"], ["s"], name="slice"),
            mk("Split", ["s", "split"], ["p0", "p1"], name="split", axis=3),
            mk("Identity", ["p0"], ["i0"], name="identity"),
            mk("Cast", ["p1"], ["c1"], name="cast", to=TensorProto.FLOAT),
            mk(
                "Constant",
                [],
                ["k"],
                name="const",
                value=numpy_helper.from_array(np.float32(0.5), "k"),
            ),
            mk("Mul", ["c1", "k"], ["m1"], name="mul"),
            mk("Concat", ["i0", "m1"], ["cat"], name="concat", axis=3),
            mk("Unsqueeze", ["cat", "ax"], ["u"], name="unsqueeze"),
            mk("Squeeze", ["u", "ax"], ["q"], name="squeeze"),
            mk("Flatten", ["q"], ["y"], name="flatten", axis=1),
        ]
        inits = [
            init("starts", np.array([1, 0], np.int64)),
            init("ends", np.array([7, 8], np.int64)),
            init("axes", np.array([1, 3], np.int64)),
            init("steps", np.array([2, 1], np.int64)),
            init("split", np.array([3, 5], np.int64)),
            init("ax", np.array([0], np.int64)),
        ]
        return nodes, inits, [vi("x", (1, 8, 8, 8))], [vi("y", None)]

    return build


def pad(mode="constant", value=0.0):
    def build(rng):
        pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
        inits = [init("pads", pads)]
        ins = ["x", "pads"]
        if mode == "constant":
            inits.append(init("v", np.float32(value)))
            ins.append("v")
        nodes = [helper.make_node("Pad", ins, ["y"], name="pad", mode=mode)]
        return nodes, inits, [vi("x", (1, 4, 6, 6))], [vi("y", None)]

    return build


def resize(mode="nearest", ctm="asymmetric", nearest="floor", scales=(1, 1, 2, 2)):
    def build(rng):
        inits = [init("scales", np.array(scales, np.float32))]
        nodes = [
            helper.make_node(
                "Resize",
                ["x", "", "scales"],
                ["y"],
                name="resize",
                mode=mode,
                coordinate_transformation_mode=ctm,
                nearest_mode=nearest,
            )
        ]
        return nodes, inits, [vi("x", (1, 4, 5, 5))], [vi("y", None)]

    return build


def reduce_mean(axes=(2, 3), keepdims=1):
    def build(rng):
        nodes = [
            helper.make_node(
                "ReduceMean", ["x"], ["y"], name="mean", axes=list(axes), keepdims=keepdims
            )
        ]
        return nodes, [], [vi("x", (1, 8, 7, 7))], [vi("y", None)]

    return build


def after_conv(builder):
    """The op fed by a 1x1 convolution, so that quantize_static quantizes its input."""

    def build(rng):
        nodes, inits, inputs, outputs = builder(rng)
        (x,) = inputs
        c = x.type.tensor_type.shape.dim[1].dim_value
        weight = np.eye(c, dtype=np.float32) + w(rng, c, c, scale=0.2)
        pre = helper.make_node("Conv", ["x0", "Wpre"], ["x"], name="pre", kernel_shape=[1, 1])
        shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
        return (
            [pre, *nodes],
            [init("Wpre", weight.reshape(c, c, 1, 1)), *inits],
            [vi("x0", shape)],
            outputs,
        )

    return build


OP_SPECS = [
    ("conv", conv(), ALL_Q),
    ("conv_relu", conv(act="Relu"), ALL_Q),
    ("conv_relu6_s2", conv(act="Relu6", stride=2), ALL_Q),
    ("conv_nobias_dil2", conv(bias=False, dilation=2, pads=2), ALL_Q),
    ("conv_depthwise", conv(shape=(1, 8, 12, 12), out=8, group=8, act="Relu6"), ALL_Q),
    ("conv_1x1", conv(k=1, pads=0, out=12), ALL_Q),
    ("gemm", gemm(), ALL_Q),
    ("gemm_notrans", gemm(trans_b=0), ALL_Q),
    ("matmul", matmul(), ALL_Q),
    ("add", binary("Add"), ALL_Q),
    ("add_broadcast", binary("Add", b=(1, 8, 1, 1)), ALL_Q),
    ("mul", binary("Mul"), ALL_Q),
    ("mul_const", binary("Mul", b=(1, 8, 1, 1), const_b=True), ALL_Q),
    ("sub", binary("Sub"), ()),
    ("div_const", binary("Div", b=(1, 8, 1, 1), const_b=True), ()),
    ("relu", after_conv(unary("Relu")), ALL_Q),
    ("clip", after_conv(clip(-0.5, 0.5)), ALL_Q),
    ("leaky_relu", unary("LeakyRelu", alpha=0.1), ALL_Q),
    ("sigmoid", unary("Sigmoid"), ALL_Q),
    ("tanh", after_conv(unary("Tanh")), ALL_Q),
    ("hard_sigmoid", unary("HardSigmoid", alpha=0.2, beta=0.5), ()),
    ("hard_swish", unary("HardSwish"), QDQ_ONLY),
    ("softmax", unary("Softmax", shape=(2, 10), axis=-1), ()),
    (
        "max_pool",
        after_conv(pool("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
        ALL_Q,
    ),
    ("avg_pool", pool("AveragePool", kernel_shape=[3, 3], strides=[2, 2]), ALL_Q),
    (
        "avg_pool_pad",
        pool(
            "AveragePool",
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),
        ALL_Q,
    ),
    ("avg_pool_ceil", pool("AveragePool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), ()),
    ("global_avg_pool", after_conv(pool("GlobalAveragePool")), ALL_Q),
    ("reduce_mean", after_conv(reduce_mean()), ALL_Q),
    ("reduce_mean_c", reduce_mean(axes=(1,), keepdims=0), ()),
    ("concat", concat(), ALL_Q),
    ("shape_reshape", shape_reshape(), ()),
    ("tensor_ops", tensor_ops(), ()),
    ("pad", pad(), QDQ_ONLY),
    ("pad_reflect", pad("reflect"), ()),
    ("pad_edge", pad("edge"), ()),
    ("resize_nearest", resize(), QDQ_ONLY),
    ("resize_linear", resize("linear", "half_pixel", "round_prefer_floor"), ()),
    ("resize_linear_ac", resize("linear", "align_corners", scales=(1, 1, 1.6, 1.6)), ()),
]
