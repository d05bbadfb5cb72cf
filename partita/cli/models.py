"""Model files for the CLI: pick the frontend by extension, pass its options, or load a saved
executable (``.partita``)."""

from __future__ import annotations

from pathlib import Path

from partita.cli.errors import UsageError
from partita.frontends.files import EXECUTABLE, LOADERS, load_model_file


def parse_shapes(items) -> dict[str, tuple[int, ...]]:
    """``["x=1,224,224,3", ...]`` -> ``{"x": (1, 224, 224, 3)}``."""
    shapes = {}
    for item in items or ():
        name, sep, dims = item.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise UsageError(
                f"--input-shape {item!r}: write NAME=D1,D2,... with positive sizes "
                f"(e.g. --input-shape input=1,224,224,3)"
            )
        shapes[name] = shape
    return shapes


def frontend_kwargs(
    ext: str, shapes: dict, semantics: str | None, match: str | None, ort_cpu: str | None = None
) -> dict:
    """The keyword arguments of the frontend for ``ext`` from the CLI's flags."""
    kwargs: dict = {}
    if ext in (".tflite", ".onnx") and shapes:
        kwargs["input_shapes"] = shapes
    if ext in (".pt2", ".pt") and shapes:
        kwargs["example_inputs"] = list(shapes.values())
    if semantics:
        if ext != ".tflite":
            raise UsageError("--semantics applies to TFLite models (tflite or tflite_builtin)")
        kwargs["semantics"] = semantics
    if match:
        if ext not in (".onnx", ".pt2", ".pt"):
            raise UsageError("--match applies to ONNX and PyTorch models")
        modes = ("ort", "ort_disable_all") if ext == ".onnx" else ("qnn", "pytorch_eager")
        if match not in modes:
            raise UsageError(f"--match {match!r}: for {ext} models one of {', '.join(modes)}")
        kwargs["match"] = match
    if ort_cpu:
        if ext != ".onnx":
            raise UsageError("--ort-cpu applies to ONNX models (vnni or avx2)")
        kwargs["ort_cpu"] = ort_cpu
    return kwargs


def load_model(path, shapes=None, semantics=None, match=None, ort_cpu=None):
    """Import a model file with the frontend its extension names, the CLI's flags as the
    frontend's options (frontends/files.py)."""
    ext = Path(path).suffix.lower()
    known = ext in LOADERS and Path(path).is_file()  # else load_model_file says what is wrong
    kwargs = frontend_kwargs(ext, shapes or {}, semantics, match, ort_cpu) if known else {}
    return load_model_file(path, **kwargs)


def is_executable(path) -> bool:
    """A saved executable: named ``.partita``, or any name whose zip comment is partita's
    (``partita compile -o model.bin`` runs as ``partita run model.bin``)."""
    if Path(path).suffix.lower() == EXECUTABLE:
        return True
    import zipfile

    from partita.runtime.writer import COMMENT

    try:
        with zipfile.ZipFile(path) as z:
            return z.comment.startswith(COMMENT)
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
