"""Whole-network TFLite test models (Keras, random weights), used by gen_tflite_models.py.

Random weights need care (see shared notes on test models): the default initialisation makes the
activations vanish and per-channel batch statistics make the network chaotic. `init_weights` sets
every BatchNorm LSUV-style, one layer at a time in topological order: moving mean 0, moving
variance = the mean second moment of the layer's input over the calibration data (one scalar per
layer), gamma ~ U(0.5, 1.5), beta ~ N(0, 0.1); the classifier gets a non-zero bias.
"""

from __future__ import annotations

import numpy as np
from keras import Input, Model, applications, layers
from keras.utils import clear_session, set_random_seed
from tflite_op_specs import Inp, Spec, want

CLASSES = 16


def keras_app(ctor, size: int, classes: int = CLASSES, **kw):
    """A keras.applications network with a static batch of 1 and random weights."""

    def make(batch):
        inp = Input(batch_shape=(batch, size, size, 3))
        return ctor(
            input_tensor=inp, weights=None, classes=classes, classifier_activation=None, **kw
        )

    return _builder(make, size)


def _residual_block(x, filters: int, stride: int):
    y = layers.Conv2D(filters, 3, stride, "same", use_bias=False)(x)
    y = layers.ReLU()(layers.BatchNormalization()(y))
    y = layers.BatchNormalization()(layers.Conv2D(filters, 3, 1, "same", use_bias=False)(y))
    if stride != 1 or x.shape[-1] != filters:
        x = layers.Conv2D(filters, 1, stride, use_bias=False)(x)
        x = layers.BatchNormalization()(x)
    return layers.ReLU()(layers.Add()([x, y]))


def resnet_mini(size: int = 64):
    """A ResNet-style network: conv stem + max pool, four basic blocks, GAP, dense classifier."""

    def make(batch):
        inp = Input(batch_shape=(batch, size, size, 3))
        x = layers.Conv2D(16, 3, 2, "same", use_bias=False)(inp)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.MaxPooling2D(3, 2, "same")(x)
        for filters, stride in ((16, 1), (32, 2), (32, 1), (64, 2)):
            x = _residual_block(x, filters, stride)
        x = layers.Dense(CLASSES)(layers.GlobalAveragePooling2D()(x))
        return Model(inp, x, name="resnet_mini")

    return _builder(make, size)


def big_map(size: int = 288, filters: int = 64):
    """A feature map larger than every preset's SRAM (288x288x64 int8 = 5.3 MB > 4 MiB): a full-
    resolution stem, a stride-2 depthwise, a 1x1 projection, GAP and a classifier."""

    def make(batch):
        inp = Input(batch_shape=(batch, size, size, 3))
        x = layers.Conv2D(filters, 3, 1, "same", use_bias=False)(inp)
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
        x = layers.DepthwiseConv2D(3, 2, "same", use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
        x = layers.BatchNormalization()(layers.Conv2D(16, 1, use_bias=False)(x))
        x = layers.Dense(CLASSES)(layers.GlobalAveragePooling2D()(x))
        return Model(inp, x, name="big_map")

    return _builder(make, size)


def _builder(make, size: int):
    """build(rng) -> (static-batch model, inputs, make); `make(None)` gives a dynamic-batch twin."""

    def build(rng):
        clear_session()  # fresh layer-name counters: names end up in the .tflite
        set_random_seed(int(rng.integers(2**31)))
        return make(1), [Inp((1, size, size, 3))], make

    return build


def init_weights(model, make, calib: np.ndarray, rng: np.random.Generator) -> None:
    """Set BatchNorm statistics and affine parameters LSUV-style, and a non-zero classifier bias.

    calib is a batch of calibration images; the statistics are measured on a dynamic-batch twin
    of the model (built by `make(None)`) that shares the weights.
    """
    twin = make(None)
    twin.set_weights(model.get_weights())
    for layer in twin.layers:
        if isinstance(layer, layers.BatchNormalization):
            m2 = float(np.mean(np.square(Model(twin.inputs, layer.input)(calib, training=False))))
            n = layer.moving_variance.shape[0]
            layer.set_weights(
                [rng.uniform(0.5, 1.5, n), rng.normal(0, 0.1, n), np.zeros(n), np.full(n, m2)]
            )
    head = [ly for ly in twin.layers if getattr(ly, "bias", None) is not None][-1]
    kernel = head.get_weights()[0]
    head.set_weights([kernel, rng.normal(0, 0.5, kernel.shape[-1])])
    model.set_weights(twin.get_weights())


MBV1 = (
    want("CONV_2D", stride="2x2", act="RELU6"),
    want("DEPTHWISE_CONV_2D", act="RELU6"),
    want("MEAN"),
    want("RESHAPE"),
)
MBV2 = (
    want("CONV_2D", act="RELU6"),
    want("CONV_2D", act="NONE"),
    want("DEPTHWISE_CONV_2D"),
    want("ADD"),
    want("MEAN"),
    want("FULLY_CONNECTED", act="NONE"),
)
MBV3 = (
    want("HARD_SWISH"),
    want("MUL"),
    want("MEAN", keep_dims=True),
    want("ADD"),
    want("DEPTHWISE_CONV_2D", stride="2x2"),
    want("CONV_2D", act="RELU"),
    want("RESHAPE"),
)
RESNET = (
    want("CONV_2D", stride="2x2", act="RELU"),
    want("MAX_POOL_2D"),
    want("ADD", act="RELU"),
    want("MEAN"),
    want("FULLY_CONNECTED"),
)
UINT8_IO = (
    want("QUANTIZE", input="uint8", output="int8"),
    want("QUANTIZE", input="int8", output="uint8"),
)
FLOAT_IO = (
    want("QUANTIZE", input="float32", output="int8"),
    want("DEQUANTIZE", input="int8", output="float32"),
)


EFFNET = (
    want("CONV_2D", stride="2x2"),
    want("LOGISTIC"),
    want("MUL"),
    want("MEAN", keep_dims=True),
    want("ADD"),
    want("DEPTHWISE_CONV_2D", stride="2x2"),
    want("FULLY_CONNECTED"),
)


def efficientnet(width: float, depth: float, size: int):
    """EfficientNet (Keras' B0 block list) scaled by width and depth coefficients."""
    from keras.src.applications.efficientnet import EfficientNet

    def ctor(**kw):
        return EfficientNet(width, depth, size, name=f"efficientnet_w{width}_d{depth}", **kw)

    return keras_app(ctor, size)


def _mv2(alpha):
    return keras_app(applications.MobileNetV2, 96, alpha=alpha)


NET_SPECS: list[Spec] = [
    Spec(
        "mobilenet_v1_025_128",
        "MobileNet v1, alpha 0.25, 128x128, 16 classes",
        keras_app(applications.MobileNet, 128, alpha=0.25),
        MBV1,
        group="nets",
    ),
    Spec(
        "mobilenet_v2_035_96",
        "MobileNetV2, alpha 0.35, 96x96, 16 classes",
        _mv2(0.35),
        MBV2,
        group="nets",
    ),
    Spec(
        "mobilenet_v2_035_96_uint8",
        "MobileNetV2 0.35 96x96 (same weights), uint8 in/out",
        _mv2(0.35),
        MBV2 + UINT8_IO,
        group="nets",
        io="uint8",
        extra={"seed_of": "mobilenet_v2_035_96"},
    ),
    Spec(
        "mobilenet_v2_035_96_float_io",
        "MobileNetV2 0.35 96x96 (same weights), float in/out",
        _mv2(0.35),
        MBV2 + FLOAT_IO,
        group="nets",
        io="float32",
        extra={"seed_of": "mobilenet_v2_035_96"},
    ),
    Spec(
        "mobilenet_v3_small_075_96",
        "MobileNetV3Small, alpha 0.75, 96x96, 16 classes",
        keras_app(
            applications.MobileNetV3Small,
            96,
            alpha=0.75,
            minimalistic=False,
            include_preprocessing=False,
        ),
        MBV3,
        group="nets",
    ),
    Spec(
        "resnet_mini_64",
        "ResNet-style: stem + 4 basic blocks (16-64 ch), 64x64, 16 classes",
        resnet_mini(64),
        RESNET,
        group="nets",
    ),
    Spec(
        "big_map_288",
        "a 288x288x64 feature map (5.3 MB, larger than every preset's SRAM), 16 classes",
        big_map(288),
        (
            want("CONV_2D", act="RELU6"),
            want("DEPTHWISE_CONV_2D", stride="2x2"),
            want("MEAN"),
            want("FULLY_CONNECTED"),
        ),
        group="nets",
    ),
    Spec(
        "efficientnet_w050_d050_128",
        "EfficientNet (B0 block list, MBConv + squeeze-excite + swish), width 0.5, depth 0.5, "
        "128x128, 16 classes",
        efficientnet(0.5, 0.5, 128),
        EFFNET,
        group="nets",
    ),
    Spec(
        "mobilenet_v2_100_224",
        "MobileNetV2, alpha 1.0, 224x224, 1000 classes (benchmarks)",
        keras_app(applications.MobileNetV2, 224, classes=1000, alpha=1.0),
        MBV2,
        group="large",
    ),
    Spec(
        "mobilenet_v1_100_224",
        "MobileNet v1, alpha 1.0, 224x224, 1000 classes (benchmarks)",
        keras_app(applications.MobileNet, 224, classes=1000, alpha=1.0),
        MBV1,
        group="large",
    ),
]
