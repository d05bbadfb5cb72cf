"""Model files: the frontend a file's extension names (``load_model_file``). The CLI and scale/
both load models with it (the CLI adds its flags as the frontend's options, cli/models.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

from partita.errors import MissingPackageError, ModelFileError, PartitaError, UnsupportedModelError

# extension -> (module, function, what); frontends are imported only when a model needs them.
LOADERS = {
    ".tflite": ("partita.frontends.tflite", "from_tflite", "TFLite"),
    ".onnx": ("partita.frontends.onnx", "from_onnx", "ONNX"),
    ".pt2": ("partita.frontends.pytorch", "from_pytorch", "PyTorch (torch.export)"),
    ".pt": ("partita.frontends.pytorch", "from_pytorch", "PyTorch (TorchScript)"),
    ".relay": ("partita.text", "parse", "Relay text"),
}
EXECUTABLE = ".partita"



def load_model_file(path, **kwargs):
    """Import a model file with the frontend its extension names; ``kwargs`` go to the
    frontend (``input_shapes``, ``semantics``, ...)."""
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
