"""The output stages of PyTorch's quantized convolution and linear kernels on x86-64, emulated
bit for bit with numpy (qnn.requantize semantics "fbgemm" and "onednn").

Both turn an int32 accumulator into a quantized output in float32 arithmetic, but differently:

* fbgemm (ReQuantizeOutput): ``nearbyint((float32(acc) + float32(b / s_aw)) * M) + zp_out``,
  M = float32(s_aw / s_out), s_aw = float32(s_in * s_w).
* oneDNN (PyTorch's "x86" engine on AVX512-VNNI CPUs for convolutions of at most 100 groups
  with symmetric weights, and its "onednn" engine): the bias is added after the scales and the
  zero point before the rounding, ``rint((float32(acc) * s + b) * inv + zp_out)``; s and inv
  come from the reciprocals PyTorch and ideep hand around (``onednn_inverse``,
  frontends/pytorch/ts_ops.py ``onednn_scale``). Found in ideep's conv.hpp and checked against
  ``torch.ops.quantized.conv2d`` on the "onednn" engine: 1,474,560 outputs, all equal.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def _rint(v: np.ndarray) -> np.ndarray:
    """float32 -> int64, half to even, clamped far outside every partita integer range."""
    v = np.nan_to_num(np.asarray(v), nan=0.0)
    return np.rint(np.clip(v, -(2.0**40), 2.0**40)).astype(np.int64)


def fbgemm_output(acc, s_aw, zp_in, s_out) -> np.ndarray:
    """fbgemm with the bias split as qnn.requantize "fbgemm" carries it: ``acc`` already holds
    the int32 bias k and ``zp_in`` = -(float32(b / s_aw) - k), which float32 holds exactly, so
    float32(float32(acc) - zp_in) is the sum fbgemm rounds. Returns the value before + zp_out."""
    v = (acc.astype(F32) - zp_in).astype(F32)
    return _rint((v * (s_aw / s_out)).astype(F32))


def onednn_inverse(output_scale) -> np.float32:
    """The float32 oneDNN multiplies by for PyTorch's output scale: PyTorch passes
    float32(1 / s_out), ideep gives oneDNN 1.0f / that as the dst scale, and oneDNN multiplies
    by 1.0f / the dst scale."""
    one = F32(1.0)
    return one / (one / F32(1.0 / np.float64(F32(output_scale))))


def onednn_output(acc, s, neg_bias, output_scale, zp_out) -> np.ndarray:
    """oneDNN's output stage with the float bias negated in ``neg_bias``; returns the rounded
    value with ``zp_out`` included (oneDNN adds it before rounding)."""
    v = ((acc.astype(F32) * s).astype(F32) - neg_bias).astype(F32)
    v = ((v * onednn_inverse(output_scale)).astype(F32) + np.asarray(zp_out).astype(F32))
    return _rint(v.astype(F32))
