"""An int8 ResNet-50 TFLite model (keras.applications.ResNet50, 224x224x3, 1000 classes, random
weights) for issue 27's BYOC measurement (tools/relay_compat_byoc.py). About 25 MB: it is written
outside the repository, never committed; nothing is downloaded.

    /work/tfvenv/bin/python tools/gen_resnet50_int8.py OUT.tflite [--calib 8] [--seed 0]

Run from the repository root with the converter environment (tensorflow-cpu 2.21, Keras 3,
ai-edge-litert; never TensorFlow in partita's venv). Weights are random and initialised as the
shared test-model notes say (tools/tflite_net_specs.init_weights: every BatchNorm LSUV-style, a
non-zero classifier bias), so the int8 network neither vanishes nor turns chaotic. The converter
is TFLiteConverter.from_keras_model with Optimize.DEFAULT, TFLITE_BUILTINS_INT8 and int8 input
and output. The script checks the result against float TensorFlow (correlation of the logits)
and TFLite's reference kernels against its builtin ones, and prints both.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402
from keras import applications  # noqa: E402
from tflite_net_specs import init_weights, keras_app  # noqa: E402

warnings.filterwarnings("ignore")

SIZE, CLASSES = 224, 1000


def build(seed: int, n_calib: int):
    rng = np.random.default_rng(seed)
    model, inputs, make = keras_app(applications.ResNet50, SIZE, classes=CLASSES)(rng)
    calib = rng.uniform(-1, 1, (n_calib, SIZE, SIZE, 3)).astype(np.float32)
    init_weights(model, make, calib, rng)
    return model, calib


def convert(model, calib: np.ndarray) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.representative_dataset = lambda: ([c[None]] for c in calib)
    conv.inference_input_type = conv.inference_output_type = tf.int8
    return conv.convert()


def run(model_bytes: bytes, resolver, x: np.ndarray) -> tuple[np.ndarray, dict, dict]:
    it = Interpreter(model_content=model_bytes, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    ind, outd = it.get_input_details()[0], it.get_output_details()[0]
    it.set_tensor(ind["index"], x)
    it.invoke()
    return it.get_tensor(outd["index"]), ind, outd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--calib", type=int, default=8, help="calibration images (uniform noise)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    model, calib = build(args.seed, args.calib)
    data = convert(model, calib)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(data)
    print(f"wrote {args.out}: {len(data)} bytes", flush=True)
    # checks: int8 vs float, and TFLite's reference kernels vs its builtin ones
    x = np.random.default_rng(args.seed + 1).uniform(-1, 1, (1, SIZE, SIZE, 3)).astype(np.float32)
    ref, ind, outd = run(data, OpResolverType.BUILTIN_REF, np.zeros((1, SIZE, SIZE, 3), np.int8))
    s_in, z_in = ind["quantization"]
    q = np.clip(np.round(x / s_in) + z_in, -128, 127).astype(np.int8)
    ref, _, _ = run(data, OpResolverType.BUILTIN_REF, q)
    opt, _, _ = run(data, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, q)
    s_out, z_out = outd["quantization"]
    flt = np.asarray(model((q.astype(np.float32) - z_in) * s_in, training=False))
    deq = (ref.astype(np.float32) - z_out) * s_out
    corr = float(np.corrcoef(deq.ravel(), flt.ravel())[0, 1])
    lsb = int(np.max(np.abs(ref.astype(np.int32) - opt.astype(np.int32))))
    print(
        f"int8 vs float logits: corr {corr:.4f}; output distinct values {len(np.unique(ref))}; "
        f"TFLite reference vs builtin kernels: max {lsb} LSB",
        flush=True,
    )
    if corr < 0.9 or len(np.unique(ref)) < 10:
        print("the int8 model does not track the float one", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
