"""The compile interface: what a backend's ``compile`` returns and how it comes back from a file.

    class MyRegion(CompiledRegion):
        def run(self, inputs):           # list of numpy arrays in, list out
            ...
        def to_bytes(self) -> bytes:     # everything needed to run again, never a pickle
            ...

    backend = Backend("mine", patterns=..., compile=lambda fn, opts: MyRegion(fn),
                      load=MyRegion.from_bytes)

``Backend.compile(function, options)`` turns one region (a partitioned global function, or for
the host backend the host part of ``main`` between two accelerator steps) into a CompiledRegion.
``Backend.load(data)`` is its inverse over ``to_bytes()``; it must not recompile. A region may
report its own profile (NPU cycles per operation, CPU kernel times) through ``profile(inputs)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from partita.errors import PartitaError
from partita.ir import Function, TensorType, TupleType
from partita.passes.infer_type import infer_type


class RegionError(PartitaError):
    """A compiled region was called with the wrong inputs or failed to load."""


@dataclass
class OpProfile:
    """One operation of a region's profile. ``kind`` is the backend's word for it ("npu op",
    "cpu kernel"); ``time_s`` is measured host time or, for a simulated accelerator, the time at
    its clock; ``metrics`` holds the rest (cycles, MACs, utilisation, bytes per memory, ...)."""

    name: str
    kind: str
    time_s: float | None = None
    metrics: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON-ready data."""
        return {"name": self.name, "kind": self.kind, "time_s": self.time_s, **self.metrics}


def flat_types(ty) -> list[TensorType]:
    """A tuple type's tensor fields in order (nested tuples flattened); a tensor type alone."""
    if isinstance(ty, TupleType):
        return [t for f in ty.fields for t in flat_types(f)]
    return [ty]


class CompiledRegion:
    """A compiled region: ``run(inputs) -> outputs`` on numpy arrays, its types, ``to_bytes()``.

    Subclasses set ``input_types`` / ``output_types`` (lists of TensorType; a tuple result is
    flattened into several outputs) and implement ``run`` and ``to_bytes``. ``run`` must be
    re-entrant: several threads may call it at once, so it keeps no per-call state on ``self``.
    """

    backend: str = ""
    name: str = ""
    # True: ``run`` / ``profile`` return new arrays no one else holds (not views of the inputs
    # or of the region's own memory), so the executable hands them out without another copy
    fresh_outputs: bool = False
    input_types: list[TensorType]
    output_types: list[TensorType]

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        raise NotImplementedError

    def profile(self, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list[OpProfile]]:
        """Run once and say where the time went. The default times the region as one step;
        backends override it with their own data (cycles per NPU op, time per CPU kernel)."""
        start = time.perf_counter()
        outputs = self.run(inputs)
        elapsed = time.perf_counter() - start
        return outputs, [OpProfile(self.name or self.backend, f"{self.backend} region", elapsed)]

    def summary(self) -> dict:
        """Static facts shown by ``partita inspect`` / ``profile`` (sizes, op counts, ...)."""
        return {}

    def check_inputs(self, inputs) -> list[np.ndarray]:
        """Validate ``inputs`` against ``input_types``; a RegionError names the bad one."""
        if len(inputs) != len(self.input_types):
            raise RegionError(
                f"{self.name or self.backend} takes {len(self.input_types)} inputs, "
                f"got {len(inputs)}"
            )
        out = []
        for i, (arr, ty) in enumerate(zip(inputs, self.input_types)):
            arr = np.asarray(arr)
            if tuple(arr.shape) != tuple(ty.shape) or arr.dtype != np.dtype(ty.dtype):
                raise RegionError(
                    f"{self.name or self.backend} input {i}: expected {ty}, "
                    f"got Tensor[{tuple(arr.shape)}, {arr.dtype}]"
                )
            out.append(arr)
        return out

    def __repr__(self):
        ins = ", ".join(map(str, self.input_types))
        outs = ", ".join(map(str, self.output_types))
        return f"<{type(self).__name__} {self.name or self.backend}: ({ins}) -> ({outs})>"


def region_types(function: Function) -> tuple[list[TensorType], list[TensorType]]:
    """The flattened input and output tensor types of ``function`` (typed here if need be)."""
    if function.body.type_or_none is None:
        infer_type(function)
    ins = [t for p in function.params for t in flat_types(p.checked_type)]
    return ins, flat_types(function.body.checked_type)
