"""``layout_transform``: Relay's change of a tensor's layout (``NCHW`` -> ``NHWC``, ``OIHW`` ->
``HWIO``), for layouts that name the same axes in another order (a transpose). Split layouts
such as ``NCHW16c`` are refused with the reason."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .registry import Attrs, register_op
from .relations import fail, tensor


@dataclass(frozen=True)
class LayoutTransformAttrs(Attrs):
    src_layout: str
    dst_layout: str

    def validate(self):
        for what in ("src_layout", "dst_layout"):
            layout = getattr(self, what)
            if not layout.isalpha() or not layout.isupper() or len(set(layout)) != len(layout):
                raise ValueError(
                    f"{what} {layout!r}: only layouts of distinct upper-case axes are supported "
                    "(no split axes such as NCHW16c)"
                )
        if sorted(self.src_layout) != sorted(self.dst_layout):
            raise ValueError(
                f"{self.src_layout!r} and {self.dst_layout!r} do not name the same axes"
            )

    def permutation(self) -> tuple[int, ...]:
        """Output axis i is input axis permutation()[i]."""
        return tuple(self.src_layout.index(a) for a in self.dst_layout)


def _layout_transform_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if data.ndim != len(attrs.src_layout):
        fail(f"data {data.shape} has rank {data.ndim}, src_layout {attrs.src_layout!r} does not")
    return TensorType(tuple(data.shape[a] for a in attrs.permutation()), data.dtype)


@register_op(
    "layout_transform",
    inputs=("data",),
    attrs=LayoutTransformAttrs,
    type_rel=_layout_transform_rel,
    kind="injective",
)
def layout_transform(data, attrs):
    """The same values with the axes of ``src_layout`` reordered as ``dst_layout`` names them."""
    return np.ascontiguousarray(np.transpose(data, attrs.permutation()))
