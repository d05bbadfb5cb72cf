"""The issue's held-out int8 models (never committed: 2-25 MB each), made by TFLite's converter
from keras.applications with random weights: MobileNet v1/v2/v3 (small and large),
EfficientNet-B0 and ResNet-50, all at 224x224, int8 in and out.

    /work/tfvenv/bin/python tools/gen_heldout_models.py OUT_DIR [NAME ...]

BatchNorm statistics are set LSUV-style on random calibration images (tflite_net_specs.init_weights)
so that activations keep their scale through the network; the converter calibrates on the same
images. Build them with partita and compare with Vela (benchmarks/npu.py --models OUT_DIR/*.tflite).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import applications as A  # noqa: E402
from tflite_net_specs import init_weights, keras_app  # noqa: E402

MODELS = {
    "mobilenet_v1_224": (A.MobileNet, {}),
    "mobilenet_v2_224": (A.MobileNetV2, {}),
    "mobilenet_v3_small_224": (A.MobileNetV3Small, {}),
    "mobilenet_v3_large_224": (A.MobileNetV3Large, {}),
    "efficientnet_b0_224": (A.EfficientNetB0, {}),
    "resnet50_224": (A.ResNet50, {}),
}


def generate(name: str, out: Path) -> Path:
    ctor, kw = MODELS[name]
    rng = np.random.default_rng(0)
    model, _, make = keras_app(ctor, 224, classes=1000, **kw)(rng)
    calib = rng.uniform(-1, 1, (8, 224, 224, 3)).astype(np.float32)
    init_weights(model, make, calib, rng)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    conv.representative_dataset = lambda: ([c[None]] for c in calib)
    path = out / f"{name}.tflite"
    path.write_bytes(conv.convert())
    return path


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in argv[1:] or MODELS:
        print(generate(name, out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
