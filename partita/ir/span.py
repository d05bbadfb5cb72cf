"""Source locations: which op of the user's model a node came from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """Where a node came from: the source model's op index, op type and output tensor name."""

    index: int | None = None
    op_type: str | None = None
    tensor: str | None = None
    source: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.op_type is not None:
            parts.append(self.op_type)
        if self.index is not None:
            parts.append(f"#{self.index}")
        text = " ".join(parts)
        if self.tensor is not None:
            text = f"{text} -> {self.tensor!r}" if text else repr(self.tensor)
        if self.source:
            text = f"{text} in {self.source}" if text else self.source
        return text or "<unknown>"
