"""Neural-network ops (``nn.*``): convolutions, dense, pooling, activations, padding, resize."""

from __future__ import annotations

import numpy as np

from .registry import register_op
from .relations import identity_rel


@register_op("nn.relu", inputs=("data",), type_rel=identity_rel, kind="elemwise")
def relu(data, attrs):
    """max(data, 0)."""
    return np.maximum(data, np.zeros((), data.dtype))
