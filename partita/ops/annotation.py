"""Relay's region annotations: ``annotation.compiler_begin`` and ``annotation.compiler_end``.

TVM's hand-written way to mark regions: every input of a region passes through
``compiler_begin(x, compiler="npu")`` and every value leaving it through
``compiler_end(y, compiler="npu")``; the target ``"default"`` is the host. Both are identities.
partita's own AnnotateTarget marks regions with inline functions instead (docs/architecture.md);
MergeCompilerRegions and PartitionGraph accept either form (partition/annotations.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Attrs, register_op


@dataclass(frozen=True)
class CompilerAttrs(Attrs):
    compiler: str

    def validate(self) -> None:
        if not self.compiler:
            raise ValueError("compiler must name a target (or 'default' for the host)")


def _identity_rel(types, attrs):
    return types[0]


@register_op(
    "annotation.compiler_begin", inputs=("data",), attrs=CompilerAttrs, type_rel=_identity_rel
)
def compiler_begin(data, attrs):
    """Marks ``data`` as an input of a region of target ``compiler`` (an identity)."""
    return data


@register_op(
    "annotation.compiler_end", inputs=("data",), attrs=CompilerAttrs, type_rel=_identity_rel
)
def compiler_end(data, attrs):
    """Marks ``data`` as a value leaving a region of target ``compiler`` (an identity)."""
    return data
