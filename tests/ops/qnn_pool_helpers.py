"""Helpers shared by the qnn.avg_pool2d and qnn.mean tests: running an op on constants, random
data and quantization parameters, and MLAS's global average (both ops' ONNX paths use it)."""

from __future__ import annotations

import numpy as np
from qnn_helpers import RANGE, clamp
from test_fixedpoint import wrap32

import partita as P
from partita import get_op

F32 = np.float32


def run(name, data, s_in, zp_in, s_out, zp_out, **attrs):
    """Interpret ``name`` on constants; the result must have the inferred type."""
    call = get_op(name)(data, F32(s_in), np.int32(zp_in), F32(s_out), np.int32(zp_out), **attrs)
    ty = P.infer_type(call)
    (out,) = P.interpret(call)
    assert (out.shape, out.dtype.name) == (ty.shape, ty.dtype)
    return out


def random_data(rng, shape, dtype):
    lo, hi = RANGE[dtype]
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def random_params(rng, dtype, same=False):
    """(s_in, zp_in, s_out, zp_out); ``same`` makes output equal input parameters."""
    lo, hi = RANGE[dtype]
    s_in, zp_in = float(F32(rng.uniform(0.005, 0.2))), int(rng.integers(lo, hi + 1))
    if same:
        return s_in, zp_in, s_in, zp_in
    return s_in, zp_in, float(F32(s_in * rng.uniform(0.3, 3.0))), int(rng.integers(lo, hi + 1))


def mlas_global(values, s_in, zp_in, s_out, zp_out, dtype):
    """MLAS QLinearGlobalAveragePool of one channel: int32 sum, one float32 scale."""
    acc = wrap32(sum(values) - zp_in * len(values))
    scale = F32(s_in) / (F32(s_out) * F32(len(values)))
    return clamp(int(np.rint(F32(F32(acc) * scale))) + zp_out, dtype)
