"""``partita demo``: the main job on the model that ships with partita.

An int8 MobileNetV2 trained on scikit-learn's digits (tools/gen_digits_model.py) is compiled for
``"npu, llvm"``, run on the held-out digits, and checked: placement, accuracy, NPU cycles, CPU
time, and — where ai-edge-litert is installed — that every output equals TFLite's own bit for bit.
"""

from __future__ import annotations

import time
from importlib import resources

import numpy as np

from partita.errors import ModelFileError, PartitaError

MODEL = "digits_mobilenetv2.tflite"
TEST_SET = "digits_test.npz"


def data_path(name: str):
    """A file shipped in partita/data (a PartitaError if this installation lacks it)."""
    path = resources.files("partita") / "data" / name
    if not path.is_file():
        raise ModelFileError(f"partita/data/{name} is missing from this installation")
    return path


def choose_target(requested: str | None) -> tuple[str, str]:
    """The target to build and a note when the default had to be replaced."""
    from partita.backends import find_backend

    if requested:
        return requested, ""
    missing = []
    for name in ("npu", "llvm"):
        try:
            backend = find_backend(name)
        except PartitaError:
            backend = None
        if backend is None or not backend.can_compile:
            missing.append(name)
    if not missing:
        return "npu, llvm", ""
    target = "npu, ref" if "npu" not in missing else "ref"
    return target, (
        f"the {' and '.join(missing)} backend{'s are' if len(missing) > 1 else ' is'} not "
        f"available in this partita; running on {target!r} instead of 'npu, llvm'"
    )


def tflite_outputs(model_path, images: np.ndarray) -> np.ndarray | None:
    """TFLite's reference kernels on every image, or None without ai-edge-litert."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None
    it = Interpreter(
        model_path=str(model_path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    results = []
    for image in images:
        it.set_tensor(inp, image[None])
        it.invoke()
        results.append(it.get_tensor(out)[0].copy())
    return np.stack(results)


def run_demo(out, target: str | None = None, limit: int | None = None, say=print) -> int:
    """Compile, run, check; write the summary to ``out``. Returns the exit status."""
    from partita.build import build
    from partita.frontends import from_tflite

    target, note = choose_target(target)
    if note:
        say(note)
    model = data_path(MODEL)
    with np.load(data_path(TEST_SET)) as z:
        images, labels = z["images"], z["labels"]
    if limit:
        images, labels = images[:limit], labels[:limit]
    start = time.perf_counter()
    exe = build(from_tflite(str(model)), target)
    compile_s = time.perf_counter() - start
    out.write(f"model: {MODEL} (int8 MobileNetV2, {len(images)} held-out digits)\n")
    out.write(f"target: {target!r}, compiled in {compile_s:.2f} s\n")
    out.write(f"placement: {exe.report.summary_line()}\n")
    start = time.perf_counter()
    logits = np.stack([exe.run(image[None])[0][0] for image in images])
    run_s = time.perf_counter() - start
    accuracy = float(np.mean(logits.argmax(-1) == labels))
    out.write(f"accuracy: {100 * accuracy:.1f}% ({int(accuracy * len(labels))}/{len(labels)})\n")
    profile = exe.profile(images[:1], repeat=3)
    for name, totals in profile.totals.items():
        cycles = totals.get("cycles")
        line = f"{name}: {1e3 * totals['time_s']:.3f} ms host time per image"
        if cycles:
            line += f", {cycles:,} NPU cycles"
            if totals.get("time_at_clock_s"):
                line += f" ({1e3 * totals['time_at_clock_s']:.3f} ms at the NPU clock)"
        out.write(line + "\n")
    host = exe.report.host if exe.report is not None else ""
    if not any(step.host for step in exe.steps):
        out.write(f"{host}: no ops (every op runs on the accelerator)\n")
    out.write(f"run: {1e3 * run_s / len(images):.3f} ms per image\n")
    expected = tflite_outputs(model, images)
    if expected is None:
        out.write("TFLite check skipped: ai-edge-litert is not installed\n")
        return 0
    equal = int(np.sum(np.all(expected == logits, axis=-1)))
    diff = int(np.abs(expected.astype(np.int32) - logits.astype(np.int32)).max())
    out.write(
        f"TFLite (reference kernels): {equal}/{len(images)} outputs bit-exact"
        f"{'' if equal == len(images) else f', max |diff| {diff}'}\n"
    )
    return 0 if equal == len(images) else 1
