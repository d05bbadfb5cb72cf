"""Tensors and example inputs as numpy: shapes and dtypes partita can take."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from partita.frontends.errors import PyTorchConversionError, PyTorchError

DTYPES = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")


@dataclass(frozen=True)
class InputSpec:
    """The static shape and dtype of one model input."""

    shape: tuple[int, ...]
    dtype: str


def to_numpy(tensor, what: str) -> np.ndarray:
    """A plain (not quantized) torch tensor as a numpy array of a partita dtype."""
    if getattr(tensor, "is_quantized", False):
        raise PyTorchConversionError(f"{what} is a quantized tensor where a plain one is expected")
    try:
        data = tensor.detach().cpu().contiguous().numpy()
    except (TypeError, RuntimeError) as e:
        raise PyTorchConversionError(f"{what} ({tensor.dtype}) cannot be read: {e}") from None
    if data.dtype == np.float64:
        data = data.astype(np.float32)  # partita's float ops are float16/float32
    if data.dtype.name not in DTYPES:
        raise PyTorchConversionError(f"{what} has dtype {data.dtype}, which partita does not take")
    return data


def example_specs(example_inputs) -> list[InputSpec] | None:
    """example_inputs (a tensor, an array, a shape, or a tuple/list of those) as InputSpecs;
    a shape means float32."""
    if example_inputs is None:
        return None
    items = example_inputs
    if not isinstance(items, (tuple, list)) or _is_shape(items):
        items = (items,)
    return [_spec(x, i) for i, x in enumerate(items)]


def _is_shape(x) -> bool:
    return isinstance(x, (tuple, list)) and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in x
    )


def _spec(x, i: int) -> InputSpec:
    if _is_shape(x):
        shape = tuple(int(d) for d in x)
        dtype = "float32"
    elif hasattr(x, "shape") and hasattr(x, "dtype"):
        shape = tuple(int(d) for d in x.shape)
        dtype = str(x.dtype).replace("torch.", "")
    else:
        raise PyTorchError(
            f"example_inputs[{i}] must be a tensor, an array or a shape, got {type(x).__name__}"
        )
    if min(shape, default=1) < 0:
        raise PyTorchError(f"example_inputs[{i}] has a negative dimension: {list(shape)}")
    if dtype not in DTYPES:
        raise PyTorchError(f"example_inputs[{i}] has dtype {dtype}, which partita does not take")
    return InputSpec(shape, dtype)
