"""Model files for the CLI: pick the frontend by extension, pass its options, or load a saved
executable (``.partita``)."""

from __future__ import annotations

import importlib
from pathlib import Path

from partita.cli.errors import MissingPackageError, UsageError
from partita.errors import ModelFileError, PartitaError, UnsupportedModelError

# extension -> (module, function, what); frontends are imported only when a model needs them.
LOADERS = {
    ".tflite": ("partita.frontends.tflite", "from_tflite", "TFLite"),
    ".onnx": ("partita.frontends.onnx", "from_onnx", "ONNX"),
    ".pt2": ("partita.frontends.pytorch", "from_pytorch", "PyTorch (torch.export)"),
    ".pt": ("partita.frontends.pytorch", "from_pytorch", "PyTorch (TorchScript)"),
    ".relay": ("partita.text", "parse", "Relay text"),
}
EXECUTABLE = ".partita"


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
    """Import a model file with the frontend its extension names."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in LOADERS:
        known = ", ".join(LOADERS)
        raise ModelFileError(
            f"cannot tell the format of {str(path)!r} from its extension (partita reads {known}, "
            f"and saved executables {EXECUTABLE})"
        )
    if not path.is_file():
        raise ModelFileError(f"no such model file: {str(path)!r}")
    module_name, func_name, what = LOADERS[ext]
    kwargs = frontend_kwargs(ext, shapes or {}, semantics, match, ort_cpu)
    if ext == ".relay":
        from partita.text import parse

        return parse(path.read_text())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise UnsupportedModelError(
                f"{what} models ({ext}) are not supported yet: this partita has no {what} frontend"
            ) from None
        extra = {"torch": " (or pip install 'partita[torch]')"}.get(e.name, "")
        raise MissingPackageError(
            f"the {what} frontend needs the {e.name!r} package: pip install {e.name}{extra}"
        ) from None
    loader = getattr(module, func_name, None)
    if loader is None:
        raise UnsupportedModelError(
            f"{what} models ({ext}) are not supported yet: {module_name} has no {func_name}()"
        )
    try:
        return loader(str(path), **kwargs)
    except PartitaError as e:
        if path.name not in str(e):
            raise _named(e, path) from None
        raise


def _named(error: PartitaError, path: Path) -> PartitaError:
    """The same error with the file named in front (the frontends do not always know it)."""
    error.args = (f"{path.name}: {error}",)
    return error


def is_executable(path) -> bool:
    return Path(path).suffix.lower() == EXECUTABLE
