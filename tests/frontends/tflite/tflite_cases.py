"""Shared helpers of the TFLite frontend tests: the generated test models and the oracle.

The models and their .npz files (inputs and the outputs of TFLite's three kernel sets) are
written by tools/gen_tflite_models.py into tests/models/tflite/. The oracle for random inputs is
TFLite's own interpreter (ai_edge_litert), imported only by the tests that need it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

MODELS = Path(__file__).resolve().parents[2] / "models" / "tflite"
KERNELS = ("ref", "builtin", "xnnpack")
SEMANTICS = {"ref": "tflite", "builtin": "tflite_builtin"}


def models(group: str) -> list[Path]:
    """The .tflite files of one group (ops, nets, large), sorted; empty if not generated."""
    return sorted((MODELS / group).glob("*.tflite"))


def model_ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def stored(path: Path) -> dict[str, np.ndarray]:
    """The .npz next to a model: input_<i> and <kernel set>_<i> arrays, samples stacked."""
    with np.load(path.with_suffix(".npz")) as z:
        return {k: z[k] for k in z.files}


def stored_samples(path: Path):
    """(inputs, {kernel set: outputs}) per stored sample."""
    z = stored(path)
    n_in = sum(k.startswith("input_") for k in z)
    n_out = sum(k.startswith("builtin_") for k in z)
    kernels = [k for k in KERNELS if f"{k}_0" in z]  # no "ref" where BUILTIN_REF lacks the op
    for s in range(z["input_0"].shape[0]):
        inputs = [z[f"input_{i}"][s] for i in range(n_in)]
        yield inputs, {k: [z[f"{k}_{o}"][s] for o in range(n_out)] for k in kernels}


class Oracle:
    """TFLite's interpreter on one model with one kernel set (one thread)."""

    RESOLVERS = {"ref": "BUILTIN_REF", "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
                 "xnnpack": "AUTO"}

    def __init__(self, model: Path | bytes, kernels: str = "ref"):
        litert = pytest.importorskip("ai_edge_litert.interpreter")
        resolver = getattr(litert.OpResolverType, self.RESOLVERS[kernels])
        kw = {"model_path": str(model)} if isinstance(model, Path) else {"model_content": model}
        self.it = litert.Interpreter(**kw, experimental_op_resolver_type=resolver,
                                     num_threads=1)
        self.it.allocate_tensors()
        self.inputs = self.it.get_input_details()
        self.outputs = self.it.get_output_details()

    def __call__(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        for d, x in zip(self.inputs, inputs):
            self.it.set_tensor(d["index"], x)
        self.it.invoke()
        return [self.it.get_tensor(d["index"]).copy() for d in self.outputs]

    def random_inputs(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Uniform inputs over each input's whole integer range, or [-1, 1] for floats."""
        out = []
        for d in self.inputs:
            if d["dtype"] == np.float32:
                out.append(rng.uniform(-1, 1, d["shape"]).astype(np.float32))
            else:
                info = np.iinfo(d["dtype"])
                out.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
        return out


def assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    """Bit-exact equality of every output (dtype and shape included)."""
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, i, g.dtype, w.dtype)
        bad = np.flatnonzero(g != w)
        assert bad.size == 0, (f"{what}, output {i}: {bad.size} of {g.size} values differ, "
                               f"max {np.max(np.abs(g.astype(float) - w.astype(float)))}")
