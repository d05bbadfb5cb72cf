"""Generate partita's TFLite test models in tests/models/tflite/, deterministically.

    /work/tfvenv/bin/python tools/gen_tflite_models.py [--only NAME ...] [--no-large] [--out DIR]

Run from the repository root with a separate environment holding the converter: tensorflow-cpu
2.21.0 (Keras 3.15.1), ai-edge-litert 2.3.0, numpy 2.4.6, Python 3.11 (never install TensorFlow
into partita's own venv). Seeds derive from each model's name, so `--only` rebuilds one model
byte-identically. Each model is checked (the intended builtin ops are present, int8 results
correlate with float TensorFlow, the three TFLite kernel sets are compared) and gets a `.npz` of
test inputs and reference outputs; manifest.json and README.md are rewritten from all results.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # bit-stable float references

import argparse  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402
from tensorflow.lite.python import schema_py_generated as schema  # noqa: E402
from tensorflow.lite.tools import flatbuffer_utils  # noqa: E402
from tflite_net_specs import NET_SPECS, init_weights  # noqa: E402
from tflite_op_specs import OP_SPECS, Spec, fmt  # noqa: E402
from tflite_readme import fmt_op, write_readme  # noqa: E402

warnings.filterwarnings("ignore")  # converter and Keras deprecation chatter

N_CALIB = 20
N_TEST = {"ops": 3, "nets": 4, "large": 2}  # inputs the checks run on
N_STORE = {"ops": 3, "nets": 1, "large": 1}  # of those, stored in the .npz
RESOLVERS = {
    "ref": OpResolverType.BUILTIN_REF,
    "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    "xnnpack": OpResolverType.AUTO,
}
IO_TYPES = {"int8": tf.int8, "uint8": tf.uint8, "float32": tf.float32}
_NAMES = {
    kind: {v: k for k, v in vars(cls).items() if not k.startswith("_")}
    for kind, cls in (
        ("op", schema.BuiltinOperator),
        ("type", schema.TensorType),
        ("act", schema.ActivationFunctionType),
        ("pad", schema.Padding),
    )
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def seed_of(name: str, salt: int = 0) -> int:
    """A fixed seed per model name, independent of the order models are generated in."""
    return zlib.crc32(name.encode()) + salt


def sample_inputs(inputs, seed: int, n: int) -> list[list[np.ndarray]]:
    """n float samples, one array per model input, uniform in each input's range."""
    rng = np.random.default_rng(seed)
    return [[rng.uniform(i.lo, i.hi, i.shape).astype(np.float32) for i in inputs] for _ in range(n)]


def build(spec: Spec, calib_seed: int):
    """The float model (tf.function or Keras model) and its inputs, weights initialised."""
    rng = np.random.default_rng(seed_of(spec.extra.get("seed_of", spec.name)))
    built = spec.build(rng)
    if spec.group == "ops":
        body, inputs = built
        sig = [tf.TensorSpec(i.shape, tf.float32, name=f"x{k}") for k, i in enumerate(inputs)]
        return tf.function(body, input_signature=sig), inputs
    model, inputs, make = built
    calib = np.concatenate([s[0] for s in sample_inputs(inputs, calib_seed, N_CALIB)])
    init_weights(model, make, calib, rng)
    return model, inputs


def convert(spec: Spec, fn, calib: list[list[np.ndarray]]) -> bytes:
    """Post-training quantization with the TFLite converter as the spec asks."""
    if isinstance(fn, tf.keras.Model) or hasattr(fn, "get_weights"):
        conv = tf.lite.TFLiteConverter.from_keras_model(fn)
    else:
        conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if spec.quant == "float16":
        conv.target_spec.supported_types = [tf.float16]
        return conv.convert()
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.representative_dataset = lambda: iter(calib)
    conv.inference_input_type = conv.inference_output_type = IO_TYPES[spec.io]
    if spec.quant == "int8_per_tensor":
        conv._experimental_disable_per_channel = True
    return conv.convert()


_SKIP_OPTIONS = ("quantizedBiasType", "asymmetricQuantizeInputs", "potScaleInt16")
_SKIP_DEFAULT = ("weightsFormat", "offset", "ellipsisMask", "newAxisMask")


def _option_items(opts) -> dict[str, str]:
    """Builtin options as snake_case strings, with (H, W) pairs merged into 'HxW'."""
    raw = {k: v for k, v in vars(opts).items() if np.isscalar(v)} if opts is not None else {}
    out = {}
    for h, w, key in (
        ("strideH", "strideW", "stride"),
        ("filterHeight", "filterWidth", "filter"),
        ("dilationHFactor", "dilationWFactor", "dilation"),
    ):
        if h in raw:
            out[key] = f"{raw.pop(h)}x{raw.pop(w)}"
    for k, v in raw.items():
        if k in _SKIP_OPTIONS or (k in _SKIP_DEFAULT and not v):
            continue
        if k == "padding":
            v = _NAMES["pad"][v]
        elif k == "fusedActivationFunction":
            k, v = "act", _NAMES["act"][v]
        out["".join("_" + c.lower() if c.isupper() else c for c in k)] = fmt(v)
    return out


def op_summaries(model_bytes: bytes) -> list[tuple[str, dict[str, str]]]:
    """(builtin name, options) of every operator of the main subgraph, in execution order.

    Options include the first input and output dtypes and, for weighted ops, whether the weights
    are quantized per channel.
    """
    m = flatbuffer_utils.read_model_from_bytearray(bytearray(model_bytes))
    g = m.subgraphs[0]
    out = []
    for op in g.operators:
        code = m.operatorCodes[op.opcodeIndex]
        name = _NAMES["op"][max(code.builtinCode, code.deprecatedBuiltinCode)]
        opts = _option_items(op.builtinOptions)
        data = op.inputs[1] if name == "SPLIT" else op.inputs[0]  # SPLIT's input 0 is the axis
        tin, tout = g.tensors[data], g.tensors[op.outputs[0]]
        opts["input"] = _NAMES["type"][tin.type].lower()
        opts["output"] = _NAMES["type"][tout.type].lower()
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            q = g.tensors[op.inputs[1]].quantization
            n = 0 if q is None or q.scale is None else len(q.scale)
            opts["weights"] = {0: "float"}.get(n, "per-tensor" if n == 1 else "per-channel")
        out.append((name, opts))
    return out


def check_expect(spec: Spec, ops) -> None:
    """The expected operators are there, and an int8 model computes in int8 throughout."""
    for name, want in spec.expect:
        if not any(n == name and all(o.get(k) == v for k, v in want.items()) for n, o in ops):
            raise RuntimeError(f"{spec.name}: no {name} with {want}; got {ops}")
    if spec.quant != "float16":
        inner = [(n, o) for n, o in ops if n not in ("QUANTIZE", "DEQUANTIZE")]
        leaks = [
            (n, o)
            for n, o in inner
            if (o["input"], o["output"]) != ("int8", "int8")
            and not (n == "ARG_MAX" and o["input"] == "int8")  # an index: int32/int64
            and not (n == "TRANSPOSE_CONV" and o["output"] == "int8")  # input 0: its shape
        ]
        if leaks:
            raise RuntimeError(f"{spec.name}: operators not in int8: {leaks}")


def _qparams(detail) -> tuple[float, int]:
    s, z = detail["quantization"]
    return float(s), int(z)


def run(model_bytes: bytes, resolver, samples) -> tuple[list[np.ndarray], list[dict], list[dict]]:
    """Outputs (stacked over samples) of one kernel set; samples are already in the input dtype."""
    it = Interpreter(
        model_content=model_bytes, experimental_op_resolver_type=resolver, num_threads=1
    )
    it.allocate_tensors()
    ind = sorted(it.get_input_details(), key=lambda d: d["name"])
    outd = sorted(it.get_output_details(), key=lambda d: d["name"])
    res = [[] for _ in outd]
    for sample in samples:
        for d, x in zip(ind, sample):
            it.set_tensor(d["index"], x)
        it.invoke()
        for r, d in zip(res, outd):
            r.append(it.get_tensor(d["index"]).copy())
    return [np.stack(r) for r in res], ind, outd


def to_model_dtype(samples, ind) -> list[list[np.ndarray]]:
    """Quantize float samples with each model input's parameters (float inputs pass through)."""
    out = []
    for sample in samples:
        row = []
        for d, x in zip(ind, sample):
            if d["dtype"] == np.float32:
                row.append(x)
                continue
            s, z = _qparams(d)
            info = np.iinfo(d["dtype"])
            row.append(np.clip(np.round(x / s) + z, info.min, info.max).astype(d["dtype"]))
        out.append(row)
    return out


def dequant(x: np.ndarray, detail) -> np.ndarray:
    if detail["dtype"] == np.float32:
        return x.astype(np.float64)
    s, z = _qparams(detail)
    return (x.astype(np.float64) - z) * s


def float_reference(fn, qsamples, ind) -> list[np.ndarray]:
    """The float model on the dequantized test inputs (what the int8 model approximates)."""
    outs = []
    for sample in qsamples:
        args = [dequant(x, d).astype(np.float32) for x, d in zip(sample, ind)]
        y = fn(*args) if not hasattr(fn, "get_weights") else fn(args[0], training=False)
        y = y if isinstance(y, (tuple, list)) else (y,)
        outs.append([np.asarray(t, np.float64) for t in y])
    return [np.stack(o) for o in zip(*outs)]


def _lsb_scale(model_bytes: bytes, detail) -> float | None:
    """Scale of the int8 value behind an output: itself, or the input of a final DEQUANTIZE."""
    if detail["dtype"] != np.float32:
        return _qparams(detail)[0]
    it = Interpreter(model_content=model_bytes)
    for op in it._get_ops_details():
        if op["op_name"] == "DEQUANTIZE" and detail["index"] in op["outputs"]:
            scale = it.get_tensor_details()[op["inputs"][0]]["quantization"][0]
            return float(scale) if scale else None
    return None


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation, 0 when either side is constant."""
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def compare(model_bytes: bytes, outs: dict, ref_float, outd) -> dict:
    """Per kernel set: correlation with float and max float error; and kernel-set differences.

    Errors and differences are in LSB of the int8 output (unit "lsb"), or absolute for float
    models (unit "abs").
    """
    scales = [_lsb_scale(model_bytes, d) for d in outd]
    unit = "lsb" if all(scales) else "abs"
    scales = [s if unit == "lsb" else 1.0 for s in scales]
    flat_f = np.concatenate([x.ravel() for x in ref_float])
    corr, err = {}, {}
    for key, o in outs.items():
        deq = [dequant(x, d) for x, d in zip(o, outd)]
        corr[key] = round(_corr(np.concatenate([x.ravel() for x in deq]), flat_f), 5)
        err[key] = round(
            max(float(np.max(np.abs(q - f))) / s for q, f, s in zip(deq, ref_float, scales)), 3
        )

    def diff(a, b):
        if a not in outs or b not in outs:
            return None  # a kernel set without the op (BUILTIN_REF has no ELU)
        return round(
            max(
                float(np.max(np.abs(dequant(x, d) - dequant(y, d)))) / s
                for x, y, d, s in zip(outs[a], outs[b], outd, scales)
            ),
            4,
        )

    return {
        "unit": unit,
        "corr": corr,
        "float_err": err,
        "distinct_outputs": int(
            len(np.unique(np.concatenate([o.ravel() for o in outs.get("ref", outs["builtin"])])))
        ),
        "ref_vs_builtin": diff("ref", "builtin"),
        "builtin_vs_xnnpack": diff("builtin", "xnnpack"),
        "ref_vs_xnnpack": diff("ref", "xnnpack"),
    }


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed with fixed zip timestamps, so reruns give identical bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.ascontiguousarray(arr), allow_pickle=False)
            zf.writestr(info, npy.getvalue())
    path.write_bytes(buf.getvalue())


def _tensor_info(d) -> dict:
    s, z = _qparams(d)
    info = {
        "name": d["name"],
        "shape": [int(v) for v in d["shape"]],
        "dtype": np.dtype(d["dtype"]).name,
    }
    return info | ({"scale": s, "zero_point": z} if s else {})


def generate(spec: Spec, out_dir: Path) -> dict:
    """Build, convert, check and save one model; returns its manifest entry."""
    t0 = time.time()
    fn, inputs = build(spec, seed_of(spec.name, 1))
    calib = sample_inputs(inputs, seed_of(spec.name, 1), N_CALIB)
    model_bytes = convert(spec, fn, calib)
    if "patch" in spec.extra:
        model_bytes = spec.extra["patch"](model_bytes)
    ops = op_summaries(model_bytes)
    check_expect(spec, ops)
    floats = sample_inputs(inputs, seed_of(spec.name, 2), N_TEST[spec.group])
    ind = Interpreter(model_content=model_bytes).get_input_details()
    qsamples = to_model_dtype(floats, sorted(ind, key=lambda d: d["name"]))
    outs = {}
    for key, resolver in RESOLVERS.items():
        if key not in spec.extra.get("no_kernel", ()):  # e.g. BUILTIN_REF has no ELU
            outs[key], ind, outd = run(model_bytes, resolver, qsamples)
    metrics = compare(model_bytes, outs, float_reference(fn, qsamples, ind), outd)
    rel = Path(spec.group) / f"{spec.name}.tflite"
    (out_dir / rel.parent).mkdir(parents=True, exist_ok=True)
    (out_dir / rel).write_bytes(model_bytes)
    k = N_STORE[spec.group]
    arrays = {f"input_{i}": np.stack([s[i] for s in qsamples[:k]]) for i in range(len(ind))}
    for key, o in outs.items():
        arrays |= {f"{key}_{i}": x[:k] for i, x in enumerate(o)}
    save_npz(out_dir / rel.with_suffix(".npz"), arrays)
    log(f"  {spec.name}: {len(model_bytes)} B, {time.time() - t0:.1f} s, {metrics}")
    return {
        "file": str(rel),
        "group": spec.group,
        "desc": spec.desc,
        "io": spec.io,
        "quant": spec.quant,
        "size": len(model_bytes),
        "npz_size": (out_dir / rel.with_suffix(".npz")).stat().st_size,
        "sha256": hashlib.sha256(model_bytes).hexdigest(),
        "ops": [fmt_op(n, o) for n, o in ops],
        "inputs": [_tensor_info(d) for d in ind],
        "outputs": [_tensor_info(d) for d in outd],
        "metrics": metrics,
    }


def check_quality(spec: Spec, entry: dict) -> list[str]:
    """Problems that make a model useless as test data (whole networks must track float)."""
    m, floor = entry["metrics"], 0.99 if spec.group != "ops" else 0.98
    bad = [
        f"{spec.name}: {k} kernels correlate only {c} with float"
        for k, c in m["corr"].items()
        if c < floor and k not in spec.extra.get("known_bad", ())
    ]
    if spec.group != "ops" and m["distinct_outputs"] < 8:
        bad.append(f"{spec.name}: only {m['distinct_outputs']} distinct output values")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", metavar="NAME", help="generate only NAME")
    ap.add_argument("--no-large", action="store_true", help="skip the large benchmark model")
    ap.add_argument("--out", type=Path, default=Path("tests/models/tflite"))
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    args = ap.parse_args(argv)
    specs = OP_SPECS + NET_SPECS
    if args.list:
        print("\n".join(s.name for s in specs))
        return 0
    unknown = set(args.only or ()) - {s.name for s in specs}
    if unknown:
        ap.error(f"unknown model(s): {sorted(unknown)}")
    todo = [
        s
        for s in specs
        if (not args.only or s.name in args.only) and not (args.no_large and s.group == "large")
    ]
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    problems = []
    for i, spec in enumerate(todo, 1):
        log(f"[{i}/{len(todo)}] {spec.name}")
        try:
            manifest[spec.name] = generate(spec, args.out)
        except Exception as exc:  # report every failing model, not just the first
            problems.append(f"{spec.name}: {type(exc).__name__}: {exc}")
            continue
        problems += check_quality(spec, manifest[spec.name])
    order = {s.name: k for k, s in enumerate(specs)}
    manifest = {k: manifest[k] for k in sorted(manifest, key=lambda k: order.get(k, len(order)))}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    write_readme(args.out / "README.md", manifest)
    for p in problems:
        log(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
