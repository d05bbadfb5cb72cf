"""Shared helpers of the ONNX frontend tests: the committed models, ONNX Runtime as the oracle,
and deterministic inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

MODELS = Path(__file__).resolve().parents[2] / "models" / "onnx"
LEVELS = {"disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
          "enable_all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


def models(group: str, pattern: str = "*.onnx") -> list[Path]:
    return sorted((MODELS / group).glob(pattern))


def ort_run(model, feeds: dict, level: str = "disable_all") -> list[np.ndarray]:
    """Run a model (path or bytes) in ONNX Runtime's CPU provider at an optimization level."""
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    src = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def feeds_for(mod, seed: int = 0) -> dict:
    """Uniform inputs: floats in [-1, 1], integers over their whole range."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in mod["main"].params:
        t = p.type_annotation
        if t.dtype == "float32":
            out[p.name_hint] = rng.uniform(-1, 1, t.shape).astype(np.float32)
        else:
            info = np.iinfo(t.dtype)
            out[p.name_hint] = rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype)
    return out


def lsb_diff(want: np.ndarray, got: np.ndarray, scale: float) -> np.ndarray:
    """|want - got| in output quanta (dequantized outputs are compared in units of their scale)."""
    return np.rint(np.abs(want.astype(np.float64) - got.astype(np.float64)) / scale)


def output_scale(path: Path) -> float:
    """The scale of the last DequantizeLinear (the one giving the float output)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    last = [n for n in m.graph.node if n.op_type == "DequantizeLinear"][-1]
    return float(inits[last.input[1]])


def _upsample_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Linear interpolation (half-pixel centres, as align_corners=False) from n_in to n_out."""
    src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n_in - 1)
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), lo), 1 - (src - lo))
    np.add.at(m, (np.arange(n_out), hi), src - lo)
    return m


def smooth_image(shape, seed: int) -> np.ndarray:
    """A smooth random NCHW image in about [-2, 2] (low-frequency noise plus a little pixel
    noise), the inputs the torch_* networks' low-pass kernels are made for."""
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    low = rng.standard_normal((n, c, max(h // 8, 2), max(w // 8, 2)))
    up = _upsample_matrix(low.shape[2], h) @ low @ _upsample_matrix(low.shape[3], w).T
    return (up + 0.2 * rng.standard_normal(shape)).astype(np.float32)
