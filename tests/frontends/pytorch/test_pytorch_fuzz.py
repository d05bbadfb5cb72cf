"""Bounded fuzzing: corrupted archives and mutated FX graphs give a module or a PartitaError,
never another exception."""

from __future__ import annotations

import copy
import importlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
importlib.import_module("torch.ao.quantization.fx._decomposed")  # the quantized_decomposed ops
from partita.frontends import from_pytorch  # noqa: E402

from partita.errors import PartitaError  # noqa: E402

MODELS = Path(__file__).resolve().parents[2] / "models" / "pytorch"
pytestmark = pytest.mark.slow


def _attempt(model, example=None) -> str:
    try:
        from_pytorch(model, example)
        return "ok"
    except PartitaError:
        return "error"


@pytest.mark.parametrize("name", ["pt2e_xnnpack_ops.pt2", "ts_eager_ops.pt"])
def test_byte_flips_in_archive_members(name):
    """Flip bytes inside one member of the zip (graph JSON, code, weights) and re-pack it."""
    rng = np.random.default_rng(7)
    with zipfile.ZipFile(MODELS / name) as src:
        members = {i.filename: src.read(i) for i in src.infolist()}
    names = [n for n, d in members.items() if d]
    outcomes = []
    for _ in range(24):
        victim = names[int(rng.integers(len(names)))]
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as out:
            for filename, content in members.items():
                data = bytearray(content)
                if filename == victim:
                    for i in rng.integers(0, len(data), size=int(rng.integers(1, 8))):
                        data[i] = int(rng.integers(256))
                out.writestr(filename, bytes(data))
        outcomes.append(_attempt(buf.getvalue(), [(1, 3, 16, 16)]))
    assert set(outcomes) <= {"ok", "error"}


def _mutations(ep, rng):
    """A copy of ep with one call_function node's int/float/list argument replaced."""
    ep = copy.deepcopy(ep)
    nodes = [n for n in ep.graph.nodes if n.op == "call_function" and n.args]
    node = nodes[int(rng.integers(len(nodes)))]
    args = list(node.args)
    i = int(rng.integers(len(args)))
    choices = [-1, 0, 3, 1000, 2.5, -0.0, [0], [1, 2, 3], None, "x", torch.float64]
    args[i] = choices[int(rng.integers(len(choices)))]
    node.args = tuple(args)
    return ep


def test_mutated_fx_graph_arguments():
    ep = torch.export.load(MODELS / "pt2e_x86_ops.pt2")
    rng = np.random.default_rng(11)
    outcomes = [_attempt(_mutations(ep, rng)) for _ in range(40)]
    assert set(outcomes) <= {"ok", "error"} and "error" in outcomes
