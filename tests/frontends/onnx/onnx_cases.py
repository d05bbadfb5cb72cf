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
