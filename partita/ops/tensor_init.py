"""Tensors made from nothing or from a shape: ``zeros``, ``ones``, ``zeros_like``, ``ones_like``;
and ``einsum`` (Relay's names, attributes and semantics)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from partita.ir.types import DTYPES, TensorType

from .registry import Attrs, register_op
from .relations import broadcast_shapes, fail, same_dtype, tensor, tuple_of_tensors


@dataclass(frozen=True)
class InitAttrs(Attrs):
    shape: tuple[int, ...]
    dtype: str = field(default="float32", metadata={"choices": DTYPES})

    def validate(self) -> None:
        if any(d < 0 for d in self.shape):
            raise ValueError(f"shape dimensions must be >= 0, got {self.shape}")


def _init_rel(types, attrs) -> TensorType:
    return TensorType(tuple(attrs.shape), attrs.dtype)


def _like_rel(types, attrs) -> TensorType:
    return tensor(types[0], "data")


@register_op("zeros", inputs=(), attrs=InitAttrs, type_rel=_init_rel, kind="elemwise")
def zeros(attrs):
    """A tensor of ``shape`` and ``dtype`` filled with 0."""
    return np.zeros(attrs.shape, attrs.dtype)


@register_op("ones", inputs=(), attrs=InitAttrs, type_rel=_init_rel, kind="elemwise")
def ones(attrs):
    """A tensor of ``shape`` and ``dtype`` filled with 1."""
    return np.ones(attrs.shape, attrs.dtype)


@register_op("zeros_like", inputs=("data",), type_rel=_like_rel, kind="elemwise")
def zeros_like(data, attrs):
    """0 in the shape and dtype of ``data``."""
    return np.zeros_like(data)


@register_op("ones_like", inputs=("data",), type_rel=_like_rel, kind="elemwise")
def ones_like(data, attrs):
    """1 in the shape and dtype of ``data``."""
    return np.ones_like(data)


# ---- einsum ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EinsumAttrs(Attrs):
    equation: str

    def validate(self) -> None:
        terms = self.equation.replace(" ", "").replace("...", "").replace("->", ",").split(",")
        bad = [c for t in terms for c in t if not c.isalpha()]
        if bad:
            raise ValueError(f"equation {self.equation!r}: subscripts are letters, got {bad[0]!r}")


def _einsum_shape(equation: str, shapes: list[tuple]) -> tuple:
    """numpy's einsum output shape (explicit ``->`` or implicit output, ``...`` broadcasting)."""
    lhs, arrow, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        fail(f"equation {equation!r} has {len(terms)} operands, data holds {len(shapes)}")
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    ellipsis: tuple = ()
    for term, shape in zip(terms, shapes):
        head, dots, tail = term.partition("...")
        n = len(shape) - len(head) - len(tail) if dots else 0
        if n < 0 or (not dots and len(term) != len(shape)):
            fail(f"subscripts {term!r} do not fit an operand of shape {shape}")
        if dots:
            ellipsis = broadcast_shapes(ellipsis, tuple(shape[len(head) : len(head) + n]))
        dims = shape[: len(head)] + shape[len(shape) - len(tail) :] if dots else shape
        for label, d in zip(head + tail if dots else term, dims):
            counts[label] = counts.get(label, 0) + 1
            prev = sizes.get(label)
            if prev not in (None, 1) and d not in (1, prev):
                fail(f"subscript {label!r} has sizes {prev} and {d}")
            sizes[label] = d if prev in (None, 1) else prev
    if not arrow:
        once = "".join(sorted(k for k, c in counts.items() if c == 1))
        out = ("..." if "..." in lhs else "") + once
    head, dots, tail = out.partition("...")
    unknown = [c for c in head + tail if c not in sizes]
    if unknown:
        fail(f"output subscript {unknown[0]!r} is not in any operand")
    middle = ellipsis if dots else ()
    return tuple(sizes[c] for c in head) + middle + tuple(sizes[c] for c in tail)


def _einsum_rel(types, attrs) -> TensorType:
    fields = tuple_of_tensors(types[0], "data")
    if not fields:
        fail("data must hold at least one tensor")
    dtype = same_dtype(fields, "the tensors in data")
    if dtype not in ("float16", "float32"):
        fail(f"einsum takes float16 or float32 tensors, got {dtype}")
    return TensorType(_einsum_shape(attrs.equation, [f.shape for f in fields]), dtype)


@register_op("einsum", inputs=("data",), attrs=EinsumAttrs, type_rel=_einsum_rel, kind="opaque")
def einsum(data, attrs):
    """numpy.einsum over the tensors of ``data`` (float16/float32, computed in float32)."""
    arrays = [np.asarray(a, np.float32) for a in data]
    return np.asarray(np.einsum(attrs.equation, *arrays)).astype(data[0].dtype)
