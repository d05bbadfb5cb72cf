"""``ref``: the host backend that runs its part on the reference interpreter.

It is the debugging target: ``partita.build(mod, "npu, ref")`` runs everything off the accelerator
with the ops' numpy references, so a mismatch of ``"npu, llvm"`` can be bisected by swapping
``llvm`` for ``ref``. InterpretedRegion is also the shortest honest CompiledRegion: a backend
that keeps IR (the custom-backend example) can reuse it under its own name.
"""

from __future__ import annotations

import time

from partita.backends.compiled import CompiledRegion, OpProfile, region_types
from partita.backends.registry import Backend, register_backend

from partita.interpreter import interpret
from partita.ir import Function, iter_calls
from partita.passes.infer_type import infer_type
from partita.text import deserialize, serialize


class InterpretedRegion(CompiledRegion):
    """A region run by ``partita.interpret``; its bytes are the serialized function."""

    def __init__(self, function: Function, backend: str = "ref"):
        infer_type(function)
        self.function, self.backend = function, backend
        self.name = str((function.attrs or {}).get("global_symbol", backend))
        self.input_types, self.output_types = region_types(function)
        self._ops = sum(1 for c in iter_calls(function.body) if not isinstance(c.op, Function))

    def run(self, inputs):
        return interpret(self.function, self.check_inputs(inputs))

    def profile(self, inputs):
        start = time.perf_counter()
        outputs = self.run(inputs)
        elapsed = time.perf_counter() - start
        return outputs, [OpProfile(self.name, "interpreted", elapsed, {"ops": self._ops})]

    def summary(self) -> dict:
        return {"ops": self._ops}

    def to_bytes(self) -> bytes:
        return serialize(self.function)

    @classmethod
    def loader(cls, backend: str = "ref"):
        """A load hook for ``backend``: bytes -> InterpretedRegion, without recompiling."""
        return lambda data: cls(deserialize(data), backend)


backend = Backend(
    "ref",
    host=True,
    compile=lambda function, options: InterpretedRegion(function, "ref"),
    load=InterpretedRegion.loader("ref"),
    options={},
    description="the reference interpreter as a host (debugging and bisection)",
)
register_backend(backend)

__all__ = ["InterpretedRegion", "backend"]
