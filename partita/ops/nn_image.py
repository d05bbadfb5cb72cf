"""Image ops: ``image.resize2d`` (the nearest-neighbour and bilinear resizes of TFLite and ONNX).

``resize_coordinates`` and ``nearest_indices`` are public so quantized resizes can reuse the
exact float32 coordinate arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .nn_common import FLOAT_DTYPES, INT_DTYPES, OUT_DTYPES, from_nhwc, layout_dims, to_nhwc
from .registry import Attrs, choice, register_op
from .relations import fail, tensor

_F32 = np.float32


@dataclass(frozen=True)
class Resize2DAttrs(Attrs):
    """Relay's Resize2DAttrs (roi only all zeros; without cubic and extrapolation settings)."""

    size: tuple[int, int]
    layout: str = choice("NCHW", "NCHW", "NHWC")
    method: str = choice("linear", "linear", "nearest_neighbor")
    coordinate_transformation_mode: str = choice(
        "half_pixel",
        "half_pixel",
        "align_corners",
        "asymmetric",
        "pytorch_half_pixel",
        "tf_half_pixel_for_nn",
    )
    rounding_method: str = choice(
        "round", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil"
    )
    out_dtype: str = choice("", *OUT_DTYPES)
    # Relay's region of interest (start_h, start_w, end_h, end_w), read only by its
    # tf_crop_and_resize mode, which partita does not have: all zeros
    roi: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)

    def validate(self):
        if len(self.size) != 2 or min(self.size) < 1:
            raise ValueError(f"size must be two positive ints (height, width), got {self.size}")
        if len(self.roi) != 4 or any(self.roi):
            raise ValueError(f"roi must be four zeros (no tf_crop_and_resize), got {self.roi}")


def resize_coordinates(out_size: int, in_size: int, mode: str) -> np.ndarray:
    """The float32 input coordinate of each output index 0..out_size-1, computed as TFLite does
    (scale = float32(in) / float32(out), then float32 products)."""
    x = np.arange(out_size, dtype=_F32)
    half = _F32(0.5)
    if mode == "align_corners" or (mode == "pytorch_half_pixel" and out_size == 1):
        if out_size == 1:
            return np.zeros(1, _F32)
        return x * (_F32(in_size - 1) / _F32(out_size - 1))
    scale = _F32(in_size) / _F32(out_size)
    if mode == "asymmetric":
        return x * scale
    if mode == "tf_half_pixel_for_nn":
        return (x + half) * scale
    return (x + half) * scale - half  # half_pixel, pytorch_half_pixel


def nearest_indices(coords: np.ndarray, in_size: int, rounding: str) -> np.ndarray:
    """Round float32 coordinates to input indices (exactly, in float64) and clamp to
    [0, in_size - 1]. "round" is half away from zero (TfLiteRound)."""
    v = coords.astype(np.float64)
    if rounding == "round":
        idx = np.where(v >= 0, np.floor(v + 0.5), -np.floor(0.5 - v))
    elif rounding == "round_prefer_ceil":
        idx = np.floor(v + 0.5)
    elif rounding == "round_prefer_floor":
        idx = np.ceil(v - 0.5)
    elif rounding == "floor":
        idx = np.floor(v)
    else:
        idx = np.ceil(v)
    return np.clip(idx, 0, in_size - 1).astype(np.int64)


def _linear_taps(coords: np.ndarray, in_size: int):
    """TFLite's ComputeInterpolationValues: lower index, upper index and float32 fraction."""
    lo = np.clip(np.floor(coords), 0, in_size - 1).astype(np.int64)
    hi = np.clip(np.ceil(coords), 0, in_size - 1).astype(np.int64)
    return lo, hi, coords - lo.astype(_F32)


def _resize_linear(x: np.ndarray, oh: int, ow: int, mode: str) -> np.ndarray:
    """Bilinear resize of NHWC float32 data with TFLite's exact float32 expression order."""
    y0, y1, dy = _linear_taps(resize_coordinates(oh, x.shape[1], mode), x.shape[1])
    x0, x1, dx = _linear_taps(resize_coordinates(ow, x.shape[2], mode), x.shape[2])
    dy, dx = dy.reshape(1, oh, 1, 1), dx.reshape(1, 1, ow, 1)
    one = _F32(1)
    rows0, rows1 = x[:, y0], x[:, y1]
    return (
        rows0[:, :, x0] * (one - dy) * (one - dx)
        + rows1[:, :, x0] * dy * (one - dx)
        + rows0[:, :, x1] * (one - dy) * dx
        + rows1[:, :, x1] * dy * dx
    )


def _resize_rel(types, attrs):
    data = tensor(types[0], "data")
    if data.ndim != 4:
        fail(f"data must be 4-D ({attrs.layout}), got shape {data.shape}")
    is_float = data.dtype in FLOAT_DTYPES
    if not is_float and data.dtype not in INT_DTYPES:
        fail(f"data must be a float or integer tensor, got {data.dtype}")
    if attrs.method == "linear" and not is_float:
        fail(
            f"linear resize needs float data, got {data.dtype} (quantized data resizes in "
            f"nearest_neighbor mode, or through dequantize/quantize)"
        )
    out = attrs.out_dtype or data.dtype
    if (out in FLOAT_DTYPES) != is_float:
        fail(f"out_dtype {out} does not suit {data.dtype} data")
    n, _, _, c = layout_dims(data.shape, attrs.layout)
    dims = {"N": n, "C": c, "H": attrs.size[0], "W": attrs.size[1]}
    return TensorType(tuple(dims[a] for a in attrs.layout), out)


@register_op(
    "image.resize2d", inputs=("data",), attrs=Resize2DAttrs, type_rel=_resize_rel, kind="injective"
)
def resize2d(data, attrs):
    """Resize H and W of 4-D data to ``size``. Output index x maps to an input coordinate, in
    float32 with scale = in / out: half_pixel (x + 0.5) * scale - 0.5; pytorch_half_pixel the
    same but 0 when out == 1; align_corners x * (in - 1) / (out - 1) (0 when out == 1);
    asymmetric x * scale; tf_half_pixel_for_nn (x + 0.5) * scale.

    nearest_neighbor (any dtype) rounds the coordinate with rounding_method ("round": half away
    from zero; round_prefer_floor/ceil: ties down/up; floor; ceil), clamps it to [0, in - 1] and
    copies that pixel. linear (float data) is TFLite's reference in float32: y0 = max(floor(y), 0),
    y1 = min(ceil(y), in - 1), dy = y - y0, out = v00*(1-dy)*(1-dx) + v10*dy*(1-dx) +
    v01*(1-dy)*dx + v11*dy*dx, evaluated left to right (ONNX Resize and Relay agree up to float
    rounding). The result is cast to out_dtype ("" = data's dtype).

    TFLite (align_corners, half_pixel_centers): RESIZE_BILINEAR (F, F) -> asymmetric,
    (T, F) -> align_corners, (F, T) -> half_pixel. RESIZE_NEAREST_NEIGHBOR (F, F) -> asymmetric
    + floor, (T, F) -> align_corners + round, (F, T) -> tf_half_pixel_for_nn + floor (TFLite
    computes floor((x + 0.5) * scale); Relay's equivalent spelling is half_pixel +
    round_prefer_ceil). (T, T) is rejected by TensorFlow and has no mode here.
    ONNX Resize: the same mode names; nearest_mode maps to rounding_method (ONNX Runtime divides
    by out/in where TFLite multiplies by in/out, which can differ in the last float bit).
    """
    x = to_nhwc(data, attrs.layout)
    oh, ow = attrs.size
    out_dtype = attrs.out_dtype or data.dtype.name
    mode = attrs.coordinate_transformation_mode
    if attrs.method == "nearest_neighbor":
        rows = nearest_indices(
            resize_coordinates(oh, x.shape[1], mode), x.shape[1], attrs.rounding_method
        )
        cols = nearest_indices(
            resize_coordinates(ow, x.shape[2], mode), x.shape[2], attrs.rounding_method
        )
        out = x[:, rows][:, :, cols]
    else:
        out = _resize_linear(x.astype(_F32), oh, ow, mode)
    return from_nhwc(out, attrs.layout).astype(out_dtype)
