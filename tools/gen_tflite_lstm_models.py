"""Generate partita's TFLite LSTM test models in tests/models/tflite/lstm/, deterministically.

    PYTHONPATH=<dir holding tf_keras> TF_USE_LEGACY_KERAS=1 \
        /work/tfvenv/bin/python tools/gen_tflite_lstm_models.py [--only NAME ...] [--out DIR]

TFLite's converter fuses a Keras LSTM layer into UNIDIRECTIONAL_SEQUENCE_LSTM only for the
Keras 2 layer (package ``tf-keras==2.21.0``, the version matching tensorflow 2.21; install it with
``pip install --target DIR --no-deps tf-keras==2.21.0``): Keras 3's LSTM converts to a WHILE loop
of element-wise ops. With full-integer quantization (a representative dataset,
``TFLITE_BUILTINS_INT8``) the fused op is TFLite's "integer LSTM" (lstm_eval's 8x8->16 path:
int8 input and hidden state, int8 weights, int32 biases, an int16 cell state with a
power-of-two scale, gates in Q3.12). Each model gets a `.npz` of test inputs and the outputs of
TFLite's three kernel sets (ref = BUILTIN_REF, builtin, xnnpack = the default); manifest.json
records the operators and how the kernel sets differ. Variants the converter refuses or makes
in float are recorded in the manifest as such ("made": false, with the reason).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

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
import tf_keras as keras  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from gen_tflite_models import (  # noqa: E402
    RESOLVERS,
    _tensor_info,
    compare,
    float_reference,
    log,
    op_summaries,
    sample_inputs,
    save_npz,
    seed_of,
    to_model_dtype,
)
from tflite_op_specs import Inp as In  # noqa: E402
from tflite_readme import fmt_op  # noqa: E402

warnings.filterwarnings("ignore")

N_CALIB, N_TEST, N_STORE = 24, 3, 3
L = keras.layers
INT8 = tf.lite.OpsSet.TFLITE_BUILTINS_INT8
INT16 = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8


@dataclasses.dataclass
class SpecL:
    name: str
    desc: str
    build: Callable  # rng -> (Keras model, [In])
    expect: tuple[str, ...]
    opset: object = INT8
    io: object = tf.int8


def _init(model: keras.Model, rng) -> None:
    """Weights large enough that the gates and the cell state use their ranges."""
    for v in model.weights:
        shape = tuple(v.shape)
        if "bias" in v.name:
            v.assign(rng.normal(0, 0.3, shape).astype(np.float32))
        else:
            fan_in = shape[0] if len(shape) == 2 else int(np.prod(shape[:-1]))
            v.assign(rng.normal(0, 1.5 / np.sqrt(fan_in), shape).astype(np.float32))


def lstm_one(rng, seq=8, feat=8, units=16, last=False):
    x = inp = L.Input((seq, feat), batch_size=1)
    x = L.LSTM(units, return_sequences=not last)(x)
    model = keras.Model(inp, x)
    _init(model, rng)
    return model, [In((1, seq, feat), -2.0, 2.0)]


def lstm_batch(rng):
    """Batch 2: the converter keeps a state row per sequence."""
    x = inp = L.Input((6, 5), batch_size=2)
    x = L.LSTM(8, return_sequences=True)(x)
    model = keras.Model(inp, x)
    _init(model, rng)
    return model, [In((2, 6, 5), -2.0, 2.0)]


def lstm_time_major(rng):
    """A time-major LSTM (input (time, batch, features))."""
    x = inp = L.Input((1, 6), batch_size=5)  # Keras sees (time=5, batch=1, 6) as (batch, ...)
    x = L.LSTM(8, return_sequences=True, time_major=True)(x)
    model = keras.Model(inp, x)
    _init(model, rng)
    return model, [In((5, 1, 6), -2.0, 2.0)]


def lstm_two(rng):
    x = inp = L.Input((12, 6), batch_size=1)
    x = L.LSTM(24, return_sequences=True)(x)
    x = L.LSTM(12, return_sequences=True)(x)
    model = keras.Model(inp, x)
    _init(model, rng)
    return model, [In((1, 12, 6), -2.0, 2.0)]


def lstm_in_graph(rng):
    """A dense before (per time step), the LSTM, a dense on its last output."""
    x = inp = L.Input((10, 12), batch_size=1)
    x = L.Dense(16, activation="relu")(x)
    x = L.LSTM(20)(x)
    x = L.Dense(5)(x)
    model = keras.Model(inp, x)
    _init(model, rng)
    return model, [In((1, 10, 12), -2.0, 2.0)]


def lstm_conv(rng):
    """A 1-D convolution (CONV_2D in TFLite) feeding the LSTM."""
    x = inp = L.Input((16, 4), batch_size=1)
    x = L.Conv1D(8, 3, padding="same", activation="relu")(x)
    x = L.LSTM(8, return_sequences=True)(x)
    model = keras.Model(inp, x)
    _init(model, rng)
    return model, [In((1, 16, 4), -2.0, 2.0)]


SPECS = [
    SpecL(
        "lstm",
        "one LSTM, seq 8, 8 features, 16 units, all outputs",
        lstm_one,
        ("UNIDIRECTIONAL_SEQUENCE_LSTM",),
    ),
    SpecL(
        "lstm_last",
        "one LSTM, seq 4, 8 features, 8 units, last output only",
        lambda rng: lstm_one(rng, seq=4, units=8, last=True),
        ("UNIDIRECTIONAL_SEQUENCE_LSTM",),
    ),
    SpecL(
        "lstm_two_layers",
        "two stacked LSTMs (24 then 12 units), seq 12",
        lstm_two,
        ("UNIDIRECTIONAL_SEQUENCE_LSTM",),
    ),
    SpecL(
        "lstm_in_graph",
        "FULLY_CONNECTED, LSTM (20 units, last output), FULLY_CONNECTED",
        lstm_in_graph,
        ("FULLY_CONNECTED", "UNIDIRECTIONAL_SEQUENCE_LSTM"),
    ),
    SpecL(
        "lstm_conv",
        "a 1-D convolution (CONV_2D) before an LSTM (8 units)",
        lstm_conv,
        ("CONV_2D", "UNIDIRECTIONAL_SEQUENCE_LSTM"),
    ),
    SpecL(
        "lstm_batch2",
        "one LSTM on a batch of 2 sequences (seq 6, 8 units)",
        lstm_batch,
        ("UNIDIRECTIONAL_SEQUENCE_LSTM",),
    ),
    SpecL(
        "lstm_time_major",
        "a time-major LSTM (seq 5, batch 1, 8 units)",
        lstm_time_major,
        ("UNIDIRECTIONAL_SEQUENCE_LSTM",),
    ),
    SpecL(
        "lstm_16x8",
        "one LSTM in TFLite's 16x8 mode (int16 activations)",
        lstm_one,
        ("UNIDIRECTIONAL_SEQUENCE_LSTM",),
        INT16,
        tf.int16,
    ),
]


def convert(model, calib, opset, io) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [opset]
    conv.representative_dataset = lambda: iter(calib)
    conv.inference_input_type = conv.inference_output_type = io
    return conv.convert()


def lstm_tensors(model_bytes: bytes) -> list[dict]:
    """Per UNIDIRECTIONAL_SEQUENCE_LSTM: the types of its input, cell state and output."""
    it = tf.lite.Interpreter(model_content=model_bytes)
    details = {d["index"]: d for d in it._get_ops_details()}
    tensors = {d["index"]: d for d in it.get_tensor_details()}
    out = []
    for op in details.values():
        if op["op_name"] != "UNIDIRECTIONAL_SEQUENCE_LSTM":
            continue
        ins = op["inputs"]
        out.append(
            {
                "input": tensors[ins[0]]["dtype"].__name__,
                "cell_state": tensors[ins[19]]["dtype"].__name__,
                "output": tensors[op["outputs"][0]]["dtype"].__name__,
            }
        )
    return out


def run_fresh(model_bytes: bytes, resolver, samples):
    """run, with the LSTM state reset before every sample: TFLite keeps its variable state
    tensors between invokes; each test input is a sequence of its own."""
    it = Interpreter(
        model_content=model_bytes, experimental_op_resolver_type=resolver, num_threads=1
    )
    it.allocate_tensors()
    ind = sorted(it.get_input_details(), key=lambda d: d["name"])
    outd = sorted(it.get_output_details(), key=lambda d: d["name"])
    res = [[] for _ in outd]
    for sample in samples:
        it.reset_all_variables()
        for d, x in zip(ind, sample):
            it.set_tensor(d["index"], x)
        it.invoke()
        for r, d in zip(res, outd):
            r.append(it.get_tensor(d["index"]).copy())
    return [np.stack(r) for r in res], ind, outd


def generate(spec: SpecL, out_dir: Path) -> dict:
    rng = np.random.default_rng(seed_of(spec.name))
    model, inputs = spec.build(rng)
    calib = sample_inputs(inputs, seed_of(spec.name, 1), N_CALIB)
    model_bytes = convert(model, calib, spec.opset, spec.io)
    ops = op_summaries(model_bytes)
    names = [n for n, _ in ops]
    for want in spec.expect:
        if want not in names:
            raise RuntimeError(f"{spec.name}: no {want}; got {names}")
    floats = sample_inputs(inputs, seed_of(spec.name, 2), N_TEST)
    ind = tf.lite.Interpreter(model_content=model_bytes).get_input_details()
    qsamples = to_model_dtype(floats, sorted(ind, key=lambda d: d["name"]))
    outs = {}
    for key, resolver in RESOLVERS.items():
        outs[key], ind, outd = run_fresh(model_bytes, resolver, qsamples)
    metrics = compare(model_bytes, outs, float_reference(model, qsamples, ind), outd)
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
        "lstm": lstm_tensors(model_bytes),
        "inputs": [_tensor_info(d) for d in ind],
        "outputs": [_tensor_info(d) for d in outd],
        "metrics": metrics,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", metavar="NAME")
    ap.add_argument("--out", type=Path, default=Path("tests/models/tflite/lstm"))
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
        except Exception as exc:  # record what the converter refuses
            msg = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            manifest[spec.name] = {"desc": spec.desc, "made": False, "reason": msg}
            problems.append(f"{spec.name}: {msg}")
    order = {s.name: k for k, s in enumerate(SPECS)}
    manifest = {k: manifest[k] for k in sorted(manifest, key=lambda k: order.get(k, 99))}
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    for p in problems:
        log(f"PROBLEM: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
