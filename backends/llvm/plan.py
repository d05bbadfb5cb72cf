"""What lowering hands to code generation: a ``Plan`` of buffers and ``Kernel``s, and its digest
(the object-code cache key). Lowering (lower/) makes plans; the kernel emitters (emit/), the JIT
and the NPU's native engine read them, and need nothing of lowering to do so."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .kinds import Kind


@dataclass
class Kernel:
    """One kernel of a plan: its kind, function name, input and output buffers, parameters
    (shapes, strides, modes: they shape the code) and constant arrays (passed by pointer)."""

    kind: Kind
    name: str
    inputs: list[int]
    output: int
    params: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.kind = Kind(self.kind)  # a bare string from an older caller: its Kind


@dataclass
class Plan:
    """Buffers (shape, dtype), kernels in order, the function's inputs and outputs."""

    buffers: list[tuple[tuple[int, ...], str]]
    kernels: list[Kernel]
    inputs: list[int]
    outputs: list[int]

    def links(self) -> tuple[dict[int, int], dict[int, Kernel]]:
        """(buffer -> how many kernels read it, buffer -> the kernel writing it): what the plan
        passes after the walk (int8_halos.write_into_halos, flip_input, float_halos) ask before
        they fold one kernel into another."""
        readers: dict[int, int] = {}
        for k in self.kernels:
            for i in set(k.inputs):
                readers[i] = readers.get(i, 0) + 1
        return readers, {k.output: k for k in self.kernels}


@functools.cache
def _source_digest() -> bytes:
    """The code generator's source, hashed once per process."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.digest()


def plan_digest(plan: Plan) -> bytes:
    """What a plan's object code is made from: the code generator's source, the buffers and every
    kernel's kind, operands, parameters and constants' shapes (the cache key; no IR is built;
    constants are passed by pointer, so models that differ only in weights share code)."""
    h = hashlib.sha256(_source_digest())
    h.update(json.dumps([plan.buffers, plan.inputs, plan.outputs], default=str).encode())
    for k in plan.kernels:
        h.update(
            json.dumps(
                [k.kind, k.name, k.inputs, k.output, k.params], sort_keys=True, default=str
            ).encode()
        )
        for name, a in sorted(k.arrays.items()):  # values are data, not code: not hashed
            h.update(f"{name}{a.dtype}{a.shape}".encode())
    return h.digest()


__all__ = ["Kernel", "Plan", "plan_digest"]
