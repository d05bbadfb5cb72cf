"""The main job's model: an int8 MobileNetV2 trained on scikit-learn's digits (no download).

    python tools/gen_digits_model.py [--epochs 40]

Writes partita/data/digits_mobilenetv2.tflite (full-integer int8, int8 input and output) and
partita/data/digits_test.npz (the held-out split: ``images`` int8, already quantized with the
model's input scale and zero point; ``float_images``; ``labels``; and the accuracies measured
here: ``float_accuracy``, ``int8_accuracy``). Needs tensorflow-cpu and scikit-learn (tools only).

The 8x8 digits (values 0..16) are scaled to [-1, 1], upscaled to 32x32 (nearest neighbour) and
repeated over 3 channels; keras.applications.MobileNetV2(alpha=0.35, weights=None, classes=10) is
trained from scratch with a fixed seed and split (75% train, 25% test, stratified), then
converted by TFLiteConverter with a representative dataset of 100 training images.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "partita" / "data"
SIZE = 32
SEED = 0


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images.astype(np.float32) / 8.0) - 1.0  # 0..16 -> -1..1
    x = np.repeat(np.repeat(x, SIZE // 8, axis=1), SIZE // 8, axis=2)
    x = np.repeat(x[..., None], 3, axis=-1)
    return train_test_split(
        x, data.target, test_size=0.25, random_state=SEED, stratify=data.target
    )


def train(x_train, y_train, epochs: int):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()
    inputs = keras.Input(batch_shape=(1, SIZE, SIZE, 3))
    base = keras.applications.MobileNetV2(
        input_shape=(SIZE, SIZE, 3), alpha=0.35, weights=None, include_top=True,
        classes=10, classifier_activation=None,
    )
    model = keras.Model(inputs, base(inputs))
    trainer = keras.applications.MobileNetV2(
        input_shape=(SIZE, SIZE, 3), alpha=0.35, weights=None, include_top=True,
        classes=10, classifier_activation=None,
    )
    for layer in trainer.layers:  # Keras' 0.999 would leave the moving statistics near their
        if isinstance(layer, keras.layers.BatchNormalization):  # initial values on 1.3k images
            layer.momentum = 0.9
    trainer.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    trainer.fit(x_train, y_train, batch_size=32, epochs=epochs, verbose=2, shuffle=True)
    base.set_weights(trainer.get_weights())
    return model


def convert(model, x_train) -> bytes:
    import tensorflow as tf

    def representative():
        for x in x_train[:100]:
            yield [x[None]]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter.convert()


def int8_accuracy(tflite_model: bytes, images: np.ndarray, labels: np.ndarray) -> float:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=tflite_model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    hits = 0
    for image, label in zip(images, labels):
        it.set_tensor(inp, image[None])
        it.invoke()
        hits += int(it.get_tensor(out)[0].argmax() == label)
    return hits / len(labels)


def quantize_input(tflite_model: bytes, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite_model)
    scale, zero_point = it.get_input_details()[0]["quantization"]
    return np.clip(np.round(x / scale) + zero_point, -128, 127).astype(np.int8)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    x_train, x_test, y_train, y_test = digits()
    model = train(x_train, y_train, args.epochs)
    logits = model.predict(x_test, batch_size=1, verbose=0)
    float_accuracy = float(np.mean(logits.argmax(-1) == y_test))
    tflite_model = convert(model, x_train)
    images = quantize_input(tflite_model, x_test)
    accuracy = int8_accuracy(tflite_model, images, y_test)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "digits_mobilenetv2.tflite").write_bytes(tflite_model)
    np.savez_compressed(
        OUT / "digits_test.npz", images=images, float_images=x_test.astype(np.float16),
        labels=y_test.astype(np.int64), float_accuracy=float_accuracy, int8_accuracy=accuracy,
    )
    print(f"float accuracy {float_accuracy:.4f}, int8 accuracy {accuracy:.4f}, "
          f"{len(tflite_model):,} bytes, {len(y_test)} test images")


if __name__ == "__main__":
    main()
