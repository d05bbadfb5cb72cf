"""The frontends' errors, for all three formats: every one is a PartitaError.

Each format has the same family: a base (``TFLiteError``), a file that cannot be read
(``...FormatError``, a ModelFileError), a readable model that cannot be converted as written
(``...ConversionError``, an UnsupportedModelError), and operators without a converter, all listed
in one error (``...UnsupportedOperatorError``, also an ``UnsupportedOperatorError``). Each frontend
package re-exports its family, its unsupported-operator error as ``UnsupportedOperatorError``.
"""

from __future__ import annotations

from partita.errors import ModelFileError, PartitaError, UnsupportedModelError


class UnsupportedOperatorError(UnsupportedModelError):
    """Operators partita has no converter for; ``unsupported`` lists every one of them (rows as
    the frontend records them; ``line`` formats one)."""

    noun = "operator"

    def __init__(self, unsupported: list[tuple]):
        self.unsupported = unsupported
        n = len(unsupported)
        summary = self.summary()
        head = f"the model has {n} unsupported {self.noun}{'s' if n > 1 else ''}"
        lines = "\n".join("  " + self.line(row) for row in unsupported)
        super().__init__(f"{head}{' (' + summary + ')' if summary else ''}:\n{lines}")

    def line(self, row: tuple) -> str:
        return " ".join(map(str, row))

    def summary(self) -> str:
        return ""


class TFLiteError(PartitaError):
    """Base class of the TFLite frontend's errors."""


class TFLiteFormatError(TFLiteError, ModelFileError):
    """The bytes are not a readable TFLite model: not a flatbuffer, truncated, corrupt, or with
    tensors whose declared shapes, types or buffers disagree."""


class TFLiteConversionError(TFLiteError, UnsupportedModelError):
    """A well-formed model that partita cannot convert as written (bad operands of an operator)."""


class TFLiteUnsupportedOperatorError(TFLiteError, UnsupportedOperatorError):
    """Rows: (operator index, builtin name, reason, input tensor names, output tensor names)."""

    def line(self, row) -> str:
        i, name, reason, ins, outs = row
        return f"#{i} {name}: {reason} (inputs {list(ins)}, outputs {list(outs)})"

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for _, name, *_ in self.unsupported:
            counts[name] = counts.get(name, 0) + 1
        return ", ".join(f"{c} {name}" for name, c in counts.items())


class ONNXError(PartitaError):
    """Base class of the ONNX frontend's errors."""


class ONNXFormatError(ONNXError, ModelFileError):
    """Not a readable ONNX model: a corrupt protobuf, a missing initializer, an unsupported opset,
    a node reading a tensor that nothing produces, ..."""


class ONNXConversionError(ONNXError, UnsupportedModelError):
    """A well-formed model that partita cannot convert as written (bad operands of a node)."""


class ONNXUnsupportedOperatorError(ONNXError, UnsupportedOperatorError):
    """Rows: (node index, op type with domain, node name, reason)."""

    noun = "node"

    def line(self, row) -> str:
        i, op, name, reason = row
        return f"#{i} {op} {name!r}: {reason}"


class PyTorchError(PartitaError):
    """Base class of the PyTorch frontend's errors (bad arguments, missing torch)."""


class PyTorchFormatError(PyTorchError, ModelFileError):
    """The file or object is not a model partita can read: not a torch.export archive nor a
    TorchScript file, truncated, corrupt, or with a graph whose values are inconsistent."""


class PyTorchConversionError(PyTorchError, UnsupportedModelError):
    """A readable model that partita cannot convert as written (bad operands of a node)."""


class PyTorchUnsupportedOperatorError(PyTorchError, UnsupportedOperatorError):
    """Rows: (node index, node name, target, reason)."""

    def line(self, row) -> str:
        i, name, target, reason = row
        return f"#{i} {name} = {target}: {reason}"
