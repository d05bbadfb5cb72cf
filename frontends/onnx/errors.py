"""The ONNX frontend's errors: every one is a PartitaError."""

from __future__ import annotations

from partita.errors import ModelFileError, PartitaError, UnsupportedModelError


class ONNXError(PartitaError):
    """Base class of the ONNX frontend's errors."""


class ONNXFormatError(ONNXError, ModelFileError):
    """Not a readable ONNX model: a corrupt protobuf, a missing initializer, an unsupported opset,
    a node reading a tensor that nothing produces, ..."""


class ONNXConversionError(ONNXError, UnsupportedModelError):
    """A well-formed model that partita cannot convert as written (bad operands of a node)."""


class UnsupportedOperatorError(ONNXError, UnsupportedModelError):
    """Nodes partita has no converter for; ``unsupported`` lists every one of them as
    (node index, op type with domain, node name, reason)."""

    def __init__(self, unsupported: list[tuple[int, str, str, str]]):
        self.unsupported = unsupported
        lines = [f"  #{i} {op} {name!r}: {reason}" for i, op, name, reason in unsupported]
        n = len(unsupported)
        super().__init__(f"the model has {n} unsupported node{'s' if n > 1 else ''}:\n"
                         + "\n".join(lines))
