"""The TFLite frontend's errors: every one is a PartitaError."""

from __future__ import annotations

from partita.errors import ModelFileError, PartitaError, UnsupportedModelError


class TFLiteError(PartitaError):
    """Base class of the TFLite frontend's errors."""


class TFLiteFormatError(TFLiteError, ModelFileError):
    """The bytes are not a readable TFLite model: not a flatbuffer, truncated, corrupt, or with
    tensors whose declared shapes, types or buffers disagree."""


class TFLiteConversionError(TFLiteError, UnsupportedModelError):
    """A well-formed model that partita cannot convert as written (bad operands of an operator)."""


class UnsupportedOperatorError(TFLiteError, UnsupportedModelError):
    """Operators partita has no converter for; ``unsupported`` lists every one of them."""

    def __init__(self, unsupported: list[tuple[int, str, str, tuple[str, ...], tuple[str, ...]]]):
        self.unsupported = unsupported
        lines = [f"  #{i} {name}: {reason} (inputs {list(ins)}, outputs {list(outs)})"
                 for i, name, reason, ins, outs in unsupported]
        n = len(unsupported)
        counts: dict[str, int] = {}
        for _, name, *_ in unsupported:
            counts[name] = counts.get(name, 0) + 1
        kinds = ", ".join(f"{c} {name}" for name, c in counts.items())
        super().__init__(f"the model has {n} unsupported operator{'s' if n > 1 else ''} "
                         f"({kinds}):\n" + "\n".join(lines))
