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
