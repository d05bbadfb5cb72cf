"""The PyTorch frontend's errors: every one is a PartitaError."""

from __future__ import annotations

from partita.errors import ModelFileError, PartitaError, UnsupportedModelError


class PyTorchError(PartitaError):
    """Base class of the PyTorch frontend's errors (bad arguments, missing torch)."""


class PyTorchFormatError(PyTorchError, ModelFileError):
    """The file or object is not a model partita can read: not a torch.export archive nor a
    TorchScript file, truncated, corrupt, or with a graph whose values are inconsistent."""


class PyTorchConversionError(PyTorchError, UnsupportedModelError):
    """A readable model that partita cannot convert as written (bad operands of a node)."""


class UnsupportedOperatorError(PyTorchError, UnsupportedModelError):
    """Nodes partita has no converter for; ``unsupported`` lists every one of them as
    (index, node name, target, reason)."""

    def __init__(self, unsupported: list[tuple[int, str, str, str]]):
        self.unsupported = unsupported
        lines = [f"  #{i} {name} = {target}: {reason}" for i, name, target, reason in unsupported]
        n = len(unsupported)
        super().__init__(f"the model has {n} unsupported operator{'s' if n > 1 else ''}:\n"
                         + "\n".join(lines))
