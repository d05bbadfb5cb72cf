"""Helpers shared by the ``nn.*`` and ``qnn.*`` references: 2-D attribute expansion, layouts,
spatial padding, exact accumulation and the result-dtype rule of conv/dense/matmul.

Layouts are handled by converting to NHWC (data) and OIHW (kernels) at the edges, so every
kernel below is written once, for one layout.
"""

from __future__ import annotations

import numpy as np

from partita.ir.types import TensorType
from partita.limits import check_shape

from .relations import fail, tensor

INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "float32")
# The values an ``out_dtype`` attribute may take; "" means "the data's dtype".
OUT_DTYPES = ("", *INT_DTYPES, *FLOAT_DTYPES)

# Integer products summed in float64 are exact while every partial sum stays below 2**53.
_EXACT_FLOAT64 = 2**53


# ---------------------------------------------------------------------------------------------
# Attribute expansion (raise ValueError: the registry turns it into AttrError naming the op)


def expand_2d(values, what: str) -> tuple[int, int]:
    """Relay's 2-D expansion: ``(a,) -> (a, a)``, ``(a, b)`` stays; anything else is an error."""
    values = tuple(values)
    if len(values) == 1:
        return (values[0], values[0])
    if len(values) != 2:
        raise ValueError(f"{what} must have 1 or 2 values, got {values}")
    return values


def expand_padding(padding) -> tuple[int, int, int, int]:
    """Relay's 2-D padding: ``(p,)`` -> (p, p, p, p); ``(ph, pw)`` -> (ph, pw, ph, pw);
    ``(top, left, bottom, right)`` stays."""
    padding = tuple(padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return padding * 2
    if len(padding) != 4:
        raise ValueError(
            f"padding must have 1, 2 or 4 values (top, left, bottom, right), got {padding}"
        )
    return padding


def check_positive(values, what: str) -> None:
    """Raise ValueError unless every value is >= 1."""
    if any(v < 1 for v in values):
        raise ValueError(f"{what} must be positive, got {tuple(values)}")


def check_non_negative(values, what: str) -> None:
    """Raise ValueError unless every value is >= 0."""
    if any(v < 0 for v in values):
        raise ValueError(f"{what} must be non-negative, got {tuple(values)}")


def set_fields(obj, **values) -> None:
    """Normalise fields of a frozen dataclass in ``__post_init__``."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


# ---------------------------------------------------------------------------------------------
# Layouts


def layout_dims(shape, layout: str, names: str = "NHWC") -> tuple[int, ...]:
    """The sizes of the axes ``names`` of a tensor of ``shape`` in ``layout``:
    ``layout_dims((1, 3, 8, 8), "NCHW")`` -> (1, 8, 8, 3)."""
    return tuple(shape[layout.index(c)] for c in names)


def to_layout(data: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Transpose ``data`` from layout ``src`` to ``dst`` (both permutations of the same letters)."""
    if src == dst:
        return data
    return data.transpose([src.index(c) for c in dst])


def to_nhwc(data: np.ndarray, layout: str) -> np.ndarray:
    """A 4-D tensor in ``layout`` ("NCHW" or "NHWC") as NHWC."""
    return to_layout(data, layout, "NHWC")


def from_nhwc(data: np.ndarray, layout: str) -> np.ndarray:
    """A 4-D NHWC tensor as ``layout``."""
    return to_layout(data, "NHWC", layout)


def pad_input(data: np.ndarray, padding, layout: str = "NHWC", pad_value=0) -> np.ndarray:
    """Pad H and W of a 4-D ``data`` in ``layout`` by ``padding`` (top, left, bottom, right;
    1 or 2 values expand like Relay) with ``pad_value`` (converted to data's dtype)."""
    top, left, bottom, right = expand_padding(padding)
    if not (top or left or bottom or right):
        return data
    widths = [(0, 0)] * 4
    widths[layout.index("H")] = (top, bottom)
    widths[layout.index("W")] = (left, right)
    padded = [d + a + b for d, (a, b) in zip(data.shape, widths)]
    check_shape(padded, data.dtype.itemsize, f"a padded copy of a {list(data.shape)} tensor")
    return np.pad(data, widths, mode="constant", constant_values=np.asarray(pad_value, data.dtype))


# ---------------------------------------------------------------------------------------------
# Accumulation


def accumulator_dtype(dtype) -> np.dtype:
    """float64 for float data, int64 for integer data: the exact-enough accumulators."""
    return np.dtype(np.float64 if np.dtype(dtype).kind == "f" else np.int64)


def exact_matmul(a: np.ndarray, b: np.ndarray, acc_dtype=None) -> np.ndarray:
    """``np.matmul(a, b)`` accumulated in ``acc_dtype`` (default: float64 for float ``a``, int64
    for integer ``a``). Integer results are exact int64 sums (BLAS float64 is used only when it
    is provably exact: K * max|a| * max|b| < 2**53)."""
    acc = np.dtype(acc_dtype) if acc_dtype is not None else accumulator_dtype(a.dtype)
    if acc.kind == "f":
        return np.matmul(a.astype(acc, copy=False), b.astype(acc, copy=False))
    if a.size == 0 or b.size == 0:
        return np.matmul(a.astype(np.int64), b.astype(np.int64))
    amax = max(abs(int(a.max())), abs(int(a.min())))
    bmax = max(abs(int(b.max())), abs(int(b.min())))
    if a.shape[-1] * amax * bmax < _EXACT_FLOAT64:
        out = np.matmul(a.astype(np.float64), b.astype(np.float64))
        return out.astype(np.int64)
    return np.matmul(a.astype(np.int64), b.astype(np.int64))


def cast_result(acc: np.ndarray, dtype: str) -> np.ndarray:
    """An accumulator cast to the result dtype (integers wrap around, two's complement)."""
    return acc.astype(dtype)


def product_dtype(
    data: TensorType,
    weight: TensorType,
    out_dtype: str,
    names: tuple[str, str] = ("data", "weight"),
) -> str:
    """The result dtype of conv/dense/matmul: data and weight both float of one dtype (result
    float) or both integer (result integer); ``out_dtype`` "" means data's dtype."""
    data, weight = tensor(data, names[0]), tensor(weight, names[1])
    d_float, w_float = data.dtype in FLOAT_DTYPES, weight.dtype in FLOAT_DTYPES
    d_int, w_int = data.dtype in INT_DTYPES, weight.dtype in INT_DTYPES
    both = f"{names[0]} and {names[1]}"
    if d_float and w_float:
        if data.dtype != weight.dtype:
            fail(f"{both} must have the same float dtype, got {data.dtype} and {weight.dtype}")
    elif not (d_int and w_int):
        fail(f"{both} must be both float or both integer, got {data.dtype} and {weight.dtype}")
    out = out_dtype or data.dtype
    if (out in FLOAT_DTYPES) != d_float:
        kind = "float" if d_float else "integer"
        fail(f"out_dtype {out} does not suit {kind} data {data.dtype}")
    return out


def sliding_windows(x: np.ndarray, window, strides=(1, 1), dilation=(1, 1)) -> np.ndarray:
    """The windows of an (already padded) NHWC tensor as a read-only view of shape
    (N, OH, OW, C, KH, KW): ``out[n, i, j, c, a, b] = x[n, i*sh + a*dh, j*sw + b*dw, c]`` with
    OH = (H - dh*(KH-1) - 1) // sh + 1 (likewise OW)."""
    (kh, kw), (sh, sw), (dh, dw) = window, strides, dilation
    extent = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    view = np.lib.stride_tricks.sliding_window_view(x, extent, axis=(1, 2))
    return view[:, ::sh, ::sw, :, ::dh, ::dw]
