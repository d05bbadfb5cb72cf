"""Generate the Keras BERT-style encoder converted to full int8 TFLite, deterministically.

    /work/venv/bin/python tools/gen_transformer_tflite.py [--out DIR]

Needs tensorflow-cpu 2.21 (Keras 3) and ai-edge-litert. The encoder mirrors
tools/gen_transformer_models.py's TinyBert: token and position embeddings (GATHER), an attention
mask (int32, 1 keeps; masked keys get -30 added to their scores, a value int8 can carry next to
the scores), 2 post-LN layers of hidden 64 with 4 heads (FULLY_CONNECTED on 3-D inputs,
BATCH_MATMUL, SOFTMAX, layer norm as the converter lowers it: MEAN, SQUARED_DIFFERENCE, RSQRT,
...), a GELU feed-forward of 128 and mean pooling (MEAN) into 3 classes. Random weights, seeded;
converted with Optimize.DEFAULT, TFLITE_BUILTINS_INT8 and a representative dataset of 16
sequences; the token ids and mask stay int32, the logits are int8.

    bert_tiny_int8.tflite
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
VOCAB, HIDDEN, HEADS, LAYERS, FFN, CLASSES, SEQ = 100, 64, 4, 2, 128, 3, 16
HEAD = HIDDEN // HEADS
SEED, N_CALIB = 1516, 16
MASKED = -30.0


def inputs(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` (ids, mask) pairs, int32 [1, SEQ], the last 0..SEQ/2 positions padded."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        mask = np.ones((1, SEQ), np.int32)
        mask[0, SEQ - int(rng.integers(0, SEQ // 2 + 1)) :] = 0
        ids = rng.integers(1, VOCAB, (1, SEQ)).astype(np.int32) * mask
        out.append((ids, mask))
    return out


def _heads(x):
    """[1, SEQ, HIDDEN] -> [HEADS, SEQ, HEAD] (3-D: the converter keeps 4-D batch matmuls and
    softmaxes of this graph in TF ops)."""
    x = keras.ops.reshape(x, (SEQ, HEADS, HEAD))
    return keras.ops.transpose(x, (1, 0, 2))


def _layer(x, bias, i: int):
    dense = keras.layers.Dense
    q, k, v = (_heads(dense(HIDDEN, name=f"l{i}_{n}")(x)) for n in "qkv")
    scores = keras.ops.matmul(q, keras.ops.transpose(k, (0, 2, 1))) * float(1.0 / np.sqrt(HEAD))
    probs = keras.ops.softmax(scores + bias, axis=-1)
    ctx = keras.ops.transpose(keras.ops.matmul(probs, v), (1, 0, 2))
    ctx = keras.ops.reshape(ctx, (1, SEQ, HIDDEN))
    x = keras.layers.LayerNormalization(epsilon=1e-5)(x + dense(HIDDEN)(ctx))
    ff = dense(HIDDEN)(dense(FFN, activation="gelu")(x))
    return keras.layers.LayerNormalization(epsilon=1e-5)(x + ff)


def build() -> keras.Model:
    keras.utils.set_random_seed(SEED)
    ids = keras.Input(batch_shape=(1, SEQ), dtype="int32", name="input_ids")
    mask = keras.Input(batch_shape=(1, SEQ), dtype="int32", name="attention_mask")
    tok = keras.layers.Embedding(VOCAB, HIDDEN, embeddings_initializer="normal")(ids)
    pos = keras.layers.Embedding(SEQ, HIDDEN, embeddings_initializer="normal")
    x = tok + pos(keras.ops.arange(SEQ)[None])
    x = keras.layers.LayerNormalization(epsilon=1e-5)(x)
    keep = keras.ops.cast(mask, "float32")
    bias = keras.ops.reshape((1.0 - keep) * MASKED, (1, 1, SEQ))
    for i in range(LAYERS):
        x = _layer(x, bias, i)
    pooled = keras.ops.mean(x, axis=1)
    logits = keras.layers.Dense(CLASSES)(keras.layers.Dense(HIDDEN, activation="tanh")(pooled))
    return keras.Model([ids, mask], logits)


def convert(model: keras.Model) -> bytes:
    def representative():
        for ids, mask in inputs(N_CALIB, SEED + 1):
            yield [ids, mask]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_output_type = tf.int8
    return conv.convert()


def op_names(data: bytes) -> dict[str, int]:
    from ai_edge_litert.interpreter import Interpreter

    counts: dict[str, int] = {}
    for op in Interpreter(model_content=data)._get_ops_details():
        counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/models/transformers"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    data = convert(build())
    path = args.out / "bert_tiny_int8.tflite"
    path.write_bytes(data)
    print(f"{path} {len(data)} bytes: {op_names(data)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
