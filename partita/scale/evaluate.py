"""Dataset validation: run every sample through a compiled model and compare with a reference.

    evaluate("model.tflite", "digits", "npu, llvm") -> {"accuracy": ..., "top1_agreement": ...,
        "bit_exact": ..., "max_abs_diff": ..., "samples_per_s": ..., ...}

The model is compiled once here; its saved bytes and chunks of samples travel to the workers,
which return the outputs and the reference's outputs for their chunk. The reference is TFLite's
interpreter (reference kernels) for a .tflite, ONNX Runtime for a .onnx, when installed, and
partita's own interpreter otherwise (``reference="interpreter"`` forces it).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from partita.errors import PartitaError

_LOADED: dict[str, object] = {}  # per worker process: executables by the hash of their bytes


def load_data(data) -> tuple[np.ndarray, np.ndarray | None]:
    """``"digits"`` (the shipped test set), an .npz path (inputs under ``images``/``inputs``/
    ``x`` or the first array; labels under ``labels``/``y``), ``(inputs, labels)`` or an array
    of inputs."""
    if isinstance(data, np.ndarray):
        return data, None
    if isinstance(data, tuple):
        return np.asarray(data[0]), None if data[1] is None else np.asarray(data[1])
    if data == "digits":
        from partita.shipped import TEST_SET, data_path

        data = data_path(TEST_SET)
    try:
        z = np.load(data, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PartitaError(f"cannot read the data file {str(data)!r}: {exc}") from None
    with z:
        keys = list(z.files)
        x_key = next((k for k in ("images", "inputs", "x") if k in keys), None)
        y_key = next((k for k in ("labels", "y") if k in keys), None)
        x_key = x_key or next((k for k in keys if k != y_key), None)
        if x_key is None:
            raise PartitaError(f"{data}: no input array in the file")
        return z[x_key], (z[y_key] if y_key else None)


def _executable(blob: bytes):
    from partita.runtime import load_bytes

    key = hashlib.sha256(blob).hexdigest()
    if key not in _LOADED:
        _LOADED[key] = load_bytes(blob)
    return _LOADED[key]


def _reference(kind: str, blob: bytes, samples: np.ndarray) -> np.ndarray:
    if kind == "tflite":
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        it = Interpreter(
            model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF
        )
        it.allocate_tensors()
        inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
        outs = []
        for s in samples:
            it.set_tensor(inp, s[None])
            it.invoke()
            outs.append(it.get_tensor(out)[0].copy())
        return np.stack(outs)
    if kind == "onnx":
        import onnxruntime as ort

        session = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return np.stack([session.run(None, {name: s[None]})[0][0] for s in samples])
    exe = _executable(blob)  # the interpreter, as a "ref" executable
    return np.stack([exe.run(s[None])[0][0] for s in samples])


def eval_chunk(exe_blob: bytes, samples: np.ndarray, ref_kind: str, ref_blob: bytes) -> dict:
    """One task: outputs of the compiled model and of the reference on ``samples``."""
    exe = _executable(exe_blob)
    start = time.perf_counter()
    outputs = np.stack([exe.run(s[None])[0][0] for s in samples])
    seconds = time.perf_counter() - start
    return {
        "outputs": outputs,
        "reference": _reference(ref_kind, ref_blob, samples),
        "seconds": seconds,
    }


def _choose_reference(path: Path, reference: str) -> str:
    if reference != "auto":
        return reference
    try:
        if path.suffix == ".tflite":
            import ai_edge_litert.interpreter  # noqa: F401

            return "tflite"
        if path.suffix == ".onnx":
            import onnxruntime  # noqa: F401

            return "onnx"
    except ImportError:
        pass
    return "interpreter"


def evaluate(
    model,
    data="digits",
    target="npu, llvm",
    engine=None,
    limit=None,
    reference="auto",
    chunk=32,
    on_progress=None,
) -> dict:
    """Run every sample; accuracy (with labels), agreement with the reference, throughput."""
    from partita.build import build
    from partita.frontends.files import load_model_file as load_model
    from partita.scale.engines import get_engine

    engine = engine if engine is not None and not isinstance(engine, str) else get_engine(engine)
    path = Path(model)
    inputs, labels = load_data(data)
    if limit:
        inputs = inputs[:limit]
        labels = labels[:limit] if labels is not None else None
    mod = load_model(path)
    exe = build(mod, target)
    want = exe.input_types[0]
    if inputs.dtype != np.dtype(want.dtype) or tuple(inputs.shape[1:]) != tuple(want.shape[1:]):
        raise PartitaError(
            f"the data's samples are {inputs.shape[1:]} {inputs.dtype}; the model takes {want}"
        )
    kind = _choose_reference(path, reference)
    ref_blob = path.read_bytes() if kind in ("tflite", "onnx") else build(mod, "ref").to_bytes()
    blob = exe.to_bytes()
    jobs = {i: (blob, inputs[i : i + chunk], kind, ref_blob) for i in range(0, len(inputs), chunk)}
    results, interrupted, start = {}, False, time.perf_counter()
    try:
        for key, result, error in engine.run(eval_chunk, jobs):
            if error is not None:
                raise PartitaError(f"samples {key}..{key + chunk - 1} failed: {error}")
            results[key] = result
            if on_progress:
                on_progress(len(results[key]["outputs"]))
    except KeyboardInterrupt:
        interrupted = True
    wall = time.perf_counter() - start
    return _metrics(results, labels, kind, wall, interrupted, engine, target, path)


def _metrics(results, labels, kind, wall, interrupted, engine, target, path) -> dict:
    keys = sorted(results)
    record = {
        "model": path.name,
        "target": target,
        "reference": kind,
        "engine": getattr(engine, "name", str(engine)),
        "samples": 0,
        "interrupted": interrupted,
    }
    if not keys:
        return record
    outs = np.concatenate([results[k]["outputs"] for k in keys])
    refs = np.concatenate([results[k]["reference"] for k in keys])
    idx = np.concatenate([np.arange(k, k + len(results[k]["outputs"])) for k in keys])
    diff = np.abs(outs.astype(np.float64) - refs.astype(np.float64))
    flat = outs.reshape(len(outs), -1)
    record.update(
        samples=len(outs),
        top1_agreement=float(np.mean(flat.argmax(-1) == refs.reshape(len(refs), -1).argmax(-1))),
        bit_exact=float(np.mean(np.all(outs == refs, axis=tuple(range(1, outs.ndim))))),
        max_abs_diff=float(diff.max()),
        run_s=sum(results[k]["seconds"] for k in keys),
        wall_s=wall,
    )
    # partita's own runs, not the reference runtime's (which runs in the same tasks)
    record["samples_per_s"] = len(outs) / record["run_s"] if record["run_s"] else None
    if labels is not None:
        record["accuracy"] = float(np.mean(flat.argmax(-1) == labels[idx]))
    return record
