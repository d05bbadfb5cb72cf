"""Generate partita's TFLite 16x8 test models in tests/models/tflite/int16/, deterministically.

    /work/tfvenv/bin/python tools/gen_tflite_16x8_models.py [--only NAME ...] [--out DIR]

16x8 is TFLite's post-training quantization with int16 activations and int8 weights
(``OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``; int64 biases, symmetric
int16 activations with zero point 0). Run from the repository root with the converter's
environment (tools/gen_tflite_models.py names it). Each model is checked (the intended builtin
ops are there and run in int16), and gets a `.npz` of test inputs and the outputs of TFLite's
three kernel sets (ref = BUILTIN_REF, builtin = the optimized builtin kernels, xnnpack = the
default with delegates); manifest.json records what the converter made and how the kernel sets
differ.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from gen_tflite_models import (  # noqa: E402
    RESOLVERS,
    _tensor_info,
    compare,
    float_reference,
    log,
    op_summaries,
    run,
    sample_inputs,
    save_npz,
    seed_of,
    to_model_dtype,
)
from tflite_op_specs import Inp as In  # noqa: E402
from tflite_readme import fmt_op  # noqa: E402

warnings.filterwarnings("ignore")

N_CALIB, N_TEST, N_STORE = 20, 3, 3
OPSET = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8


@dataclasses.dataclass
class Spec16:
    name: str
    desc: str
    build: Callable  # rng -> (tf function body, [In]) or a Keras model
    expect: tuple[str, ...]
    per_tensor: bool = False  # the converter's _experimental_disable_per_channel


def _w(rng, *shape, scale=0.3):
    return tf.constant(rng.normal(0, scale, shape).astype(np.float32))


def conv(rng):
    w, b = _w(rng, 3, 3, 8, 16), _w(rng, 16, scale=0.1)
    return (lambda x: tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME") + b)), [In((1, 8, 8, 8))]


def conv_stride(rng):
    w, b = _w(rng, 3, 3, 4, 8), _w(rng, 8, scale=0.1)
    return (lambda x: tf.nn.conv2d(x, w, 2, "VALID") + b), [In((1, 9, 9, 4))]


def depthwise(rng):
    w, b = _w(rng, 3, 3, 8, 1), _w(rng, 8, scale=0.1)

    def f(x):
        return tf.nn.relu6(tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME") + b)

    return f, [In((1, 8, 8, 8), -3.0, 3.0)]


def fully_connected(rng):
    w, b = _w(rng, 32, 16, scale=0.2), _w(rng, 16, scale=0.1)
    return (lambda x: tf.matmul(x, w) + b), [In((1, 32))]


def add(rng):
    return (lambda x, y: x + y), [In((1, 4, 4, 8)), In((1, 4, 4, 8), -3.0, 3.0)]


def add_relu(rng):
    return (lambda x, y: tf.nn.relu(x + y)), [In((1, 4, 4, 8)), In((1, 4, 4, 8), -0.5, 0.5)]


def sub(rng):
    return (lambda x, y: x - y), [In((1, 4, 4, 8)), In((1, 4, 4, 8), -2.0, 2.0)]


def mul(rng):
    return (lambda x, y: x * y), [In((1, 4, 4, 8)), In((1, 4, 4, 8), -2.0, 2.0)]


def avg_pool(rng):
    return (lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME")), [In((1, 8, 8, 8))]


def max_pool(rng):
    return (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID")), [In((1, 8, 8, 8))]


def mean(rng):
    return (lambda x: tf.reduce_mean(x, axis=(1, 2), keepdims=True)), [In((1, 6, 6, 8))]


def softmax(rng):
    return (lambda x: tf.nn.softmax(x)), [In((1, 16), -4.0, 4.0)]


def logistic(rng):
    return (lambda x: tf.math.sigmoid(x)), [In((1, 4, 4, 8), -6.0, 6.0)]


def tanh(rng):
    return (lambda x: tf.math.tanh(x)), [In((1, 4, 4, 8), -3.0, 3.0)]


def concat(rng):
    return (lambda x, y: tf.concat([x, y], axis=3)), [In((1, 4, 4, 4)), In((1, 4, 4, 8), -2, 2)]


def reshape(rng):
    w = _w(rng, 1, 1, 8, 8)

    def f(x):  # a conv on each side keeps the reshape inside the quantized graph
        y = tf.reshape(tf.nn.conv2d(x, w, 1, "VALID"), (1, 16, 8))
        return tf.reshape(y * 2.0, (1, 128))

    return f, [In((1, 4, 4, 8))]


def pad(rng):
    return (lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]])), [In((1, 4, 4, 8))]


def mobilenet_like(rng, softmax=True):
    """A small MobileNetV2-like network: conv, depthwise, pointwise, residual add, mean, fc,
    softmax (or the logits)."""
    L = tf.keras.layers
    x = inp = L.Input((16, 16, 3), batch_size=1)
    x = L.ReLU(6.0)(L.BatchNormalization()(L.Conv2D(16, 3, 2, "same", use_bias=False)(x)))
    for expand in (2, 2):
        y = L.ReLU(6.0)(L.Conv2D(16 * expand, 1)(x))
        y = L.ReLU(6.0)(L.DepthwiseConv2D(3, 1, "same")(y))
        y = L.Conv2D(16, 1)(y)
        x = L.Add()([x, y])
    x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(32, 1, activation="relu")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    x = L.Softmax()(x) if softmax else x
    model = tf.keras.Model(inp, x)
    for v in model.weights:
        shape = tuple(v.shape)
        if "gamma" in v.path or "variance" in v.path:
            v.assign(rng.uniform(0.5, 1.5, shape).astype(np.float32))
        elif "beta" in v.path or "mean" in v.path or "bias" in v.path:
            v.assign(rng.normal(0, 0.05, shape).astype(np.float32))
        else:
            fan_in = int(np.prod(shape[:-1])) if "depthwise" not in v.path else 9
            v.assign(rng.normal(0, 1.2 / np.sqrt(fan_in), shape).astype(np.float32))
    return model, [In((1, 16, 16, 3))]


def dwconv_m2(rng):
    w, b = _w(rng, 3, 3, 4, 2), _w(rng, 8, scale=0.1)

    def f(x):
        return tf.nn.relu(tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "VALID") + b)

    return f, [In((1, 8, 8, 4))]


def in_graph(inner, channels: int, relu: bool = True):
    """x -> 3x3 conv (+bias, RELU unless ``relu`` is false) -> inner(rng) -> 1x1 conv
    (``channels`` -> 8): the op between two convolutions (every weight drawn before tracing)."""

    def build(rng):
        w1, b1 = _w(rng, 3, 3, 4, 8), _w(rng, 8, scale=0.1)
        op, w2 = inner(rng), _w(rng, 1, 1, channels, 8)

        def f(x):
            y = tf.nn.conv2d(x, w1, 1, "SAME") + b1
            y = op(tf.nn.relu(y) if relu else y)
            return tf.nn.conv2d(y, w2, 1, "SAME")

        return f, [In((1, 8, 8, 4))]

    return build


def _dwconv_m2_of(rng, c=8):
    w, b = _w(rng, 3, 3, c, 2), _w(rng, 2 * c, scale=0.1)
    return lambda x: tf.nn.relu(tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME") + b)


def mean_axis2(rng):
    return (lambda x: tf.reduce_mean(x, axis=[2])), [In((1, 8, 8, 4))]


def transpose(rng):
    return (lambda x: tf.transpose(x, (0, 2, 1, 3))), [In((1, 4, 6, 8))]


def strided_slice(rng):
    return (lambda x: x[:, 1:7:2, 0:6, 2:6]), [In((1, 8, 8, 8))]


def maximum(rng):
    return (lambda x, y: tf.maximum(x, y)), [In((1, 4, 4, 8)), In((1, 4, 4, 8))]


def minimum(rng):
    return (lambda x, y: tf.minimum(x, y)), [In((1, 4, 4, 8)), In((1, 4, 4, 8))]


def resize_nearest(rng):
    return (lambda x: tf.image.resize(x, (8, 8), method="nearest")), [In((1, 4, 4, 8))]


def abs_(rng):
    return (lambda x: tf.abs(x)), [In((1, 4, 4, 8))]


def leaky_relu(rng):
    return (lambda x: tf.nn.leaky_relu(x, alpha=0.2)), [In((1, 4, 4, 8))]


# session 20 (n30i): operators Vela 5.2 runs in 16x8 that partita's NPU had left to the CPU
SESSION_20 = [
    Spec16(
        "dwconv_m2", "DEPTHWISE_CONV_2D 3x3, multiplier 2, RELU", dwconv_m2, ("DEPTHWISE_CONV_2D",)
    ),
    Spec16("mean_axis2", "MEAN over W alone", mean_axis2, ("MEAN",)),
    Spec16(
        "dwconv_m2_in_graph",
        "DEPTHWISE_CONV_2D multiplier 2 between a 3x3 and a 1x1 CONV_2D",
        in_graph(_dwconv_m2_of, 16),
        ("CONV_2D", "DEPTHWISE_CONV_2D"),
    ),
    Spec16(
        "mean_axis2_in_graph",
        "MEAN over W (keepdims) between a 3x3 and a 1x1 CONV_2D",
        in_graph(lambda rng: lambda x: tf.reduce_mean(x, axis=[2], keepdims=True), 8),
        ("CONV_2D", "MEAN"),
    ),
    Spec16("transpose", "TRANSPOSE of H and W", transpose, ("TRANSPOSE",)),
    Spec16("strided_slice", "STRIDED_SLICE, stride 2 over H", strided_slice, ("STRIDED_SLICE",)),
    Spec16("maximum", "MAXIMUM of two inputs", maximum, ("MAXIMUM",)),
    Spec16("minimum", "MINIMUM of two inputs", minimum, ("MINIMUM",)),
    Spec16(
        "resize_nearest", "RESIZE_NEAREST_NEIGHBOR 2x", resize_nearest, ("RESIZE_NEAREST_NEIGHBOR",)
    ),
    # session 20 (n30p): ABS and LEAKY_RELU, which Vela 5.2 runs in 16x8
    Spec16("abs", "ABS", abs_, ("ABS",)),
    Spec16("leaky_relu", "LEAKY_RELU alpha 0.2", leaky_relu, ("LEAKY_RELU",)),
    Spec16(
        "abs_in_graph",
        "ABS between a 3x3 CONV_2D (no activation) and a 1x1 CONV_2D",
        in_graph(lambda rng: tf.abs, 8, relu=False),
        ("CONV_2D", "ABS"),
    ),
    Spec16(
        "leaky_relu_in_graph",
        "LEAKY_RELU alpha 0.2 between a 3x3 CONV_2D (no activation) and a 1x1 CONV_2D",
        in_graph(lambda rng: lambda x: tf.nn.leaky_relu(x, alpha=0.2), 8, relu=False),
        ("CONV_2D", "LEAKY_RELU"),
    ),
]

SPECS = [
    Spec16("conv_relu", "CONV_2D 3x3 8->16, bias, fused RELU", conv, ("CONV_2D",)),
    Spec16("conv_stride2", "CONV_2D 3x3 stride 2 VALID", conv_stride, ("CONV_2D",)),
    Spec16(
        "depthwise_relu6", "DEPTHWISE_CONV_2D 3x3, fused RELU6", depthwise, ("DEPTHWISE_CONV_2D",)
    ),
    Spec16(
        "fully_connected", "FULLY_CONNECTED 32->16, bias", fully_connected, ("FULLY_CONNECTED",)
    ),
    Spec16("conv_per_tensor", "CONV_2D 3x3, per-tensor weights", conv, ("CONV_2D",), True),
    Spec16(
        "fully_connected_per_tensor",
        "FULLY_CONNECTED, per-tensor weights",
        fully_connected,
        ("FULLY_CONNECTED",),
        True,
    ),
    Spec16("add", "ADD of two inputs with different scales", add, ("ADD",)),
    Spec16("add_relu", "ADD with fused RELU", add_relu, ("ADD",)),
    Spec16("sub", "SUB of two inputs", sub, ("SUB",)),
    Spec16("mul", "MUL of two inputs", mul, ("MUL",)),
    Spec16("avg_pool", "AVERAGE_POOL_2D 3x3 stride 2 SAME", avg_pool, ("AVERAGE_POOL_2D",)),
    Spec16("max_pool", "MAX_POOL_2D 2x2 stride 2", max_pool, ("MAX_POOL_2D",)),
    Spec16("mean", "MEAN over H and W", mean, ("MEAN",)),
    Spec16("softmax", "SOFTMAX over 16 classes", softmax, ("SOFTMAX",)),
    Spec16("logistic", "LOGISTIC", logistic, ("LOGISTIC",)),
    Spec16("tanh", "TANH", tanh, ("TANH",)),
    Spec16("concat", "CONCATENATION of two inputs on channels", concat, ("CONCATENATION",)),
    Spec16("reshape", "RESHAPE between a 1x1 CONV_2D and a MUL", reshape, ("RESHAPE",)),
    Spec16("pad", "PAD of H and W", pad, ("PAD",)),
    Spec16(
        "mobilenet_like",
        "a small MobileNetV2-like net (16x16x3, 10 classes)",
        mobilenet_like,
        ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MEAN", "SOFTMAX"),
    ),
    Spec16(
        "mobilenet_like_logits",
        "the same net ending at the logits (no SOFTMAX)",
        lambda rng: mobilenet_like(rng, softmax=False),
        ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MEAN", "FULLY_CONNECTED"),
    ),
    *SESSION_20,
]


def convert(fn, inputs, calib, per_tensor: bool = False) -> bytes:
    if isinstance(fn, tf.keras.Model):
        conv_ = tf.lite.TFLiteConverter.from_keras_model(fn)
    else:
        sig = [tf.TensorSpec(i.shape, tf.float32, name=f"x{k}") for k, i in enumerate(inputs)]
        f = tf.function(fn, input_signature=sig)
        conv_ = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv_.optimizations = [tf.lite.Optimize.DEFAULT]
    conv_.target_spec.supported_ops = [OPSET]
    conv_.representative_dataset = lambda: iter(calib)
    conv_.inference_input_type = conv_.inference_output_type = tf.int16
    if per_tensor:
        conv_._experimental_disable_per_channel = True
    return conv_.convert()


def check_expect(spec: Spec16, ops) -> None:
    names = [n for n, _ in ops]
    for want in spec.expect:
        if want not in names:
            raise RuntimeError(f"{spec.name}: no {want}; got {names}")
    leaks = [(n, o) for n, o in ops if n != "QUANTIZE" and o["input"] != "int16"]
    if leaks:
        raise RuntimeError(f"{spec.name}: operators not in int16: {leaks}")


def generate(spec: Spec16, out_dir: Path) -> dict:
    rng = np.random.default_rng(seed_of(spec.name))
    fn, inputs = spec.build(rng)
    calib = sample_inputs(inputs, seed_of(spec.name, 1), N_CALIB)
    model_bytes = convert(fn, inputs, calib, spec.per_tensor)
    ops = op_summaries(model_bytes)
    check_expect(spec, ops)
    floats = sample_inputs(inputs, seed_of(spec.name, 2), N_TEST)
    ind = Interpreter(model_content=model_bytes).get_input_details()
    qsamples = to_model_dtype(floats, sorted(ind, key=lambda d: d["name"]))
    outs = {}
    for key, resolver in RESOLVERS.items():
        outs[key], ind, outd = run(model_bytes, resolver, qsamples)
    callable_fn = fn if isinstance(fn, tf.keras.Model) else (lambda *a: fn(*a))
    metrics = compare(model_bytes, outs, float_reference(callable_fn, qsamples, ind), outd)
    rel = Path(f"{spec.name}.tflite")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / rel).write_bytes(model_bytes)
    arrays = {f"input_{i}": np.stack([s[i] for s in qsamples[:N_STORE]]) for i in range(len(ind))}
    for key, o in outs.items():
        arrays |= {f"{key}_{i}": x[:N_STORE] for i, x in enumerate(o)}
    save_npz(out_dir / rel.with_suffix(".npz"), arrays)
    log(f"  {spec.name}: {len(model_bytes)} B, {metrics}")
    return {
        "file": str(rel),
        "desc": spec.desc,
        "size": len(model_bytes),
        "sha256": hashlib.sha256(model_bytes).hexdigest(),
        "ops": [fmt_op(n, o) for n, o in ops],
        "inputs": [_tensor_info(d) for d in ind],
        "outputs": [_tensor_info(d) for d in outd],
        "metrics": metrics,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", metavar="NAME")
    ap.add_argument("--out", type=Path, default=Path("tests/models/tflite/int16"))
    args = ap.parse_args(argv)
    unknown = set(args.only or ()) - {s.name for s in SPECS}
    if unknown:
        ap.error(f"unknown model(s): {sorted(unknown)}")
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    problems = []
    for spec in SPECS:
        if args.only and spec.name not in args.only:
            continue
        log(spec.name)
        try:
            manifest[spec.name] = generate(spec, args.out)
        except Exception as exc:  # report every failing model
            problems.append(f"{spec.name}: {type(exc).__name__}: {exc}")
    order = {s.name: k for k, s in enumerate(SPECS)}
    manifest = {k: manifest[k] for k in sorted(manifest, key=lambda k: order.get(k, 99))}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    for p in problems:
        log(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
