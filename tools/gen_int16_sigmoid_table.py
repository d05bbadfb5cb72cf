"""Recover the table behind TFLite's int16 (16x8) LOGISTIC and TANH by probing TFLite's own
interpreter (ai-edge-litert, BUILTIN_REF), and write it to partita/data/tflite_sigmoid_table16.npz.

Run in the converter environment: /work/tfvenv/bin/python tools/gen_int16_sigmoid_table.py

What is measured, not copied. Both int16 kernels rescale the input to x = (q * M + r) >> s (M, s
from the input scale: the input scale times 3 * 4096, doubled until it exceeds 32767 / 2, s the
number of doublings, M its integer part; r = 2**(s-1)), then interpolate linearly in a 256-entry
unsigned 16-bit table T of the sigmoid over [0, 10.7) (TANH with x's top bits above bit 8 as the
index and its low 8 bits as the fraction; LOGISTIC with bits 9 and up, 9 fraction bits).

The probe: a converter-made one-op int16 TANH model whose input scale is set to float32(4/3) *
2**-12. Its multiplier is then 16384 with s = 12, so x = 4q exactly, and the TANH output at q =
64 j (x = 256 j, fraction 0) is T[j] - 32768 with nothing rounded away: entries 0-254 are read
off directly. T[255] appears only as the far end of interval 254: it is the one value for which
every probe in that interval (q = 64 * 254 + k, k = 0..63) matches. Every probe of every interval
(all of q = 0..16383) is then checked against the interpolation, and the script checks the
reconstruction (tflite_int16 in partita, imported from this checkout) against the interpreter
over all 65,536 int16 inputs, for LOGISTIC and TANH, at several input scales (including the
power-of-two ones the kernels treat specially)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "partita" / "data" / "tflite_sigmoid_table16.npz"
PROBE_SCALE = float(np.float32(4.0 / 3.0)) * 2.0**-12
CHECK_SCALES = (
    PROBE_SCALE,
    2.0**-12,
    2.0**-11,
    2.0**-10,
    9.14895863388665e-05,
    1.8306901620235294e-04,
    3.0e-04,
    1.0e-03,
    7.3e-06,
)


def one_op_model(op: str) -> bytes:
    """TensorFlow's converter, 16x8 mode: a one-op int16 model of tf.tanh or tf.sigmoid."""
    import tensorflow as tf

    fn = {"TANH": tf.tanh, "LOGISTIC": tf.sigmoid}[op]
    f = tf.function(fn, input_signature=[tf.TensorSpec((1, 65536), tf.float32)])
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    conv.representative_dataset = lambda: (
        [rng.uniform(-4, 4, (1, 65536)).astype(np.float32)] for _ in range(4)
    )
    conv.target_spec.supported_ops = [
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
    ]
    conv.inference_input_type = conv.inference_output_type = tf.int16
    return conv.convert()


def with_input_scale(model: bytes, scale: float) -> bytes:
    """The same model with its input tensor's scale set to ``scale`` (zero point 0)."""
    from tensorflow.lite.tools import flatbuffer_utils

    m = flatbuffer_utils.read_model_from_bytearray(bytearray(model))
    (g,) = m.subgraphs
    (op,) = g.operators
    q = g.tensors[op.inputs[0]].quantization
    q.scale, q.zeroPoint = [float(np.float32(scale))], [0]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def run(model: bytes, q: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    x = np.zeros((1, 65536), np.int16)
    x[0, : q.size] = q
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).reshape(-1)[: q.size].astype(np.int64)


def tanh_interp(ua: int, ub: int, ut: np.ndarray) -> np.ndarray:
    """The TANH kernel's positive branch for fraction ut in interval [ua, ub] (measured form)."""
    return (((ua << 8) + ut * (ub - ua)) - (1 << 23) + (1 << 7)) >> 8


def recover(tanh_model: bytes) -> np.ndarray:
    q = np.arange(0, 16384)
    out = run(with_input_scale(tanh_model, PROBE_SCALE), q)
    table = np.zeros(256, np.int64)
    table[:255] = out[::64][:255] + 32768
    ut = 4 * np.arange(64)
    last = out[64 * 254 : 64 * 255]
    fits = [
        v for v in range(table[254], 65536) if np.array_equal(tanh_interp(table[254], v, ut), last)
    ]
    if len(fits) != 1:
        raise SystemExit(f"T[255] is not determined by the probes: {len(fits)} candidates")
    table[255] = fits[0]
    for j in range(255):  # every probe of every interval, against the interpolation
        got, want = out[64 * j : 64 * j + 64], tanh_interp(table[j], table[j + 1], ut)
        if not np.array_equal(got, want):
            raise SystemExit(f"interval {j}: the probes do not follow the interpolation")
    return table


def main() -> int:
    tanh_model, logistic_model = one_op_model("TANH"), one_op_model("LOGISTIC")
    table = recover(tanh_model)
    np.savez(OUT, table=table.astype(np.uint16), probe_scale=np.float64(PROBE_SCALE))
    print(f"wrote {OUT.relative_to(ROOT)}: 256 entries, {table[0]}..{table[255]}")
    sys.path.insert(0, str(ROOT))
    from partita.ops.emulation import tflite_int16 as t16

    t16.sigmoid_table16.cache_clear()
    q = np.arange(-32768, 32768)
    bad = 0
    for op, model, fn in (
        ("TANH", tanh_model, t16.tanh16),
        ("LOGISTIC", logistic_model, t16.logistic16),
    ):
        for scale in CHECK_SCALES:
            want = run(with_input_scale(model, scale), q)
            got = fn(q.astype(np.int16), float(np.float32(scale))).astype(np.int64)
            n = int(np.sum(got != want))
            bad += n
            print(f"{op:8s} input scale {float(np.float32(scale)):.9g}: {n} of 65536 differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
