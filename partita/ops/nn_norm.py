"""``nn.batch_norm``: Relay's inference-time batch normalization (a tuple of three results)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType, TupleType

from .registry import Attrs, register_op
from .relations import fail, float_only, normalize_axis, tensor


@dataclass(frozen=True)
class NormAttrs(Attrs):
    """What Relay's normalizations share: the axis, epsilon, and whether beta is added
    (``center``) and gamma multiplied (``scale``)."""

    axis: int = -1
    epsilon: float = 1e-5
    center: bool = True
    scale: bool = True

    def validate(self) -> None:
        if not self.epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0, got {self.epsilon}")


@dataclass(frozen=True)
class BatchNormAttrs(NormAttrs):
    """Relay's BatchNormAttrs: normalize along ``axis`` (the channels) with the given moving
    statistics; ``center`` adds beta, ``scale`` multiplies by gamma."""

    axis: int = 1


def _batch_norm_rel(types, attrs) -> TupleType:
    data = float_only(tensor(types[0], "data"))
    axis = normalize_axis(attrs.axis, data.ndim)
    channels = (data.shape[axis],)
    for i, what in enumerate(("gamma", "beta", "moving_mean", "moving_var"), 1):
        t = tensor(types[i], what)
        if t.shape != channels or t.dtype != data.dtype:
            fail(
                f"{what} must be {data.dtype} of shape {channels} for data {data.shape} "
                f"normalized along axis {axis}, got {t.dtype} {t.shape}"
            )
    stats = TensorType(channels, data.dtype)
    return TupleType([data, stats, stats])


@register_op(
    "nn.batch_norm",
    inputs=("data", "gamma", "beta", "moving_mean", "moving_var"),
    attrs=BatchNormAttrs,
    type_rel=_batch_norm_rel,
    kind="opaque",
)
def batch_norm(data, gamma, beta, moving_mean, moving_var, attrs):
    """``((data - mean) / sqrt(var + epsilon)) * gamma + beta`` along ``axis``, computed in float64
    and rounded to data's dtype once; the tuple's other two fields are the moving mean and
    variance, passed through (inference: Relay's SimplifyInference turns it into this)."""
    axis = attrs.axis % data.ndim
    shape = [1] * data.ndim
    shape[axis] = -1

    def along(v):
        return v.astype(np.float64).reshape(shape)

    eps = np.float64(np.float32(attrs.epsilon))
    y = (data.astype(np.float64) - along(moving_mean)) / np.sqrt(along(moving_var) + eps)
    if attrs.scale:
        y = y * along(gamma)
    if attrs.center:
        y = y + along(beta)
    return (y.astype(data.dtype), moving_mean, moving_var)
