"""build() parses its target string once (partition_for and the pipeline take the parsed
CompositeTarget through)."""

from __future__ import annotations

import importlib

from common_graphs import int8_convnet

import partita as P


def test_build_parses_the_target_once(monkeypatch):
    target_module = importlib.import_module("partita.partition.target")
    calls = []
    real = target_module._parse_one

    def counting(part, whole):
        calls.append(part.strip())
        return real(part, whole)

    monkeypatch.setattr(target_module, "_parse_one", counting)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    P.build(int8_convnet(), "npu, llvm")
    assert sorted(calls) == ["llvm", "npu"]


def test_build_infers_the_module_types_once(monkeypatch):
    """build types the whole module once (partition_for's InferType); the layout pass, the
    placement report and the schedule type only what they rebuilt (infer_new_types). A run over
    the module is an ``infer_type(function, mod)`` call; the regions' own typing takes no
    module."""
    import sys

    infer_module = importlib.import_module("partita.passes.infer_type")
    real = infer_module.infer_type
    runs = []

    def counting(expr, mod=None):
        if mod is not None:
            runs.append(expr)
        return real(expr, mod)

    for module in list(sys.modules.values()):
        if getattr(module, "infer_type", None) is real:
            monkeypatch.setattr(module, "infer_type", counting)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    for target in ("npu, llvm", "llvm"):
        runs.clear()
        P.build(int8_convnet(), target)
        assert len(runs) == 1, target
