"""``partita demo``: the main job on the model that ships with partita.

An int8 MobileNetV2 trained on scikit-learn's digits (tools/gen_digits_model.py) is compiled for
``"npu, llvm"``, run on the held-out digits, and checked: placement, accuracy, NPU cycles, CPU
time, and — where ai-edge-litert is installed — that every output equals TFLite's own bit for bit.
"""

from __future__ import annotations

import json
import time

import numpy as np

from partita.errors import PartitaError
from partita.shipped import MODEL, TEST_SET, data_path


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


def run_demo(out, target: str | None = None, limit: int | None = None, say=print,
             as_json: bool = False) -> int:
    """Compile, run, check; write the summary to ``out`` (text, or one JSON document).
    Returns the exit status (1 when an output differs from TFLite's)."""
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
    text = _Lines(out, enabled=not as_json)
    start = time.perf_counter()
    exe = build(from_tflite(str(model)), target)
    compile_s = time.perf_counter() - start
    result = {"model": MODEL, "images": len(images), "target": target, "compile_s": compile_s,
              "placement": exe.report.summary()}
    text(f"model: {MODEL} (int8 MobileNetV2, {len(images)} held-out digits)")
    text(f"target: {target!r}, compiled in {compile_s:.2f} s")
    text(f"placement: {exe.report.summary_line()}")
    start = time.perf_counter()
    logits = np.stack([exe.run(image[None])[0][0] for image in images])
    run_s = time.perf_counter() - start
    accuracy = float(np.mean(logits.argmax(-1) == labels))
    correct = int(np.sum(logits.argmax(-1) == labels))
    result.update(accuracy=accuracy, correct=correct, run_ms_per_image=1e3 * run_s / len(images))
    text(f"accuracy: {100 * accuracy:.1f}% ({correct}/{len(labels)})")
    profile = exe.profile(images[:1], repeat=3)
    result["per_target"] = {}
    for name, totals in profile.totals.items():
        cycles = totals.get("cycles")
        result["per_target"][name] = {
            "host_ms": 1e3 * totals["time_s"], "npu_cycles": cycles or None,
            "ms_at_npu_clock": 1e3 * totals["time_at_clock_s"]
            if totals.get("time_at_clock_s") else None,
        }
        line = f"{name}: {1e3 * totals['time_s']:.3f} ms host time per image"
        if cycles:
            line += f", {cycles:,} NPU cycles"
            if totals.get("time_at_clock_s"):
                line += f" ({1e3 * totals['time_at_clock_s']:.3f} ms at the NPU clock)"
        text(line)
    host = exe.report.host if exe.report is not None else ""
    if not any(step.host for step in exe.steps):
        text(f"{host}: no ops (every op runs on the accelerator)")
    text(f"run: {1e3 * run_s / len(images):.3f} ms per image")
    expected = tflite_outputs(model, images)
    status = 0
    if expected is None:
        result["tflite"] = None
        text("TFLite check skipped: ai-edge-litert is not installed")
    else:
        equal = int(np.sum(np.all(expected == logits, axis=-1)))
        diff = int(np.abs(expected.astype(np.int32) - logits.astype(np.int32)).max())
        result["tflite"] = {"bit_exact": equal, "of": len(images), "max_abs_diff": diff}
        text(
            f"TFLite (reference kernels): {equal}/{len(images)} outputs bit-exact"
            f"{'' if equal == len(images) else f', max |diff| {diff}'}"
        )
        status = 0 if equal == len(images) else 1
    if as_json:
        out.write(json.dumps(result, indent=2) + "\n")
    return status


class _Lines:
    """Text lines written as they come (nothing with --json)."""

    def __init__(self, out, enabled: bool):
        self.out, self.enabled = out, enabled

    def __call__(self, line: str) -> None:
        if self.enabled:
            self.out.write(line + "\n")
            self.out.flush()
