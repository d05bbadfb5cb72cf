"""The Executable: a static schedule of compiled regions and the slots between them.

    exe = partita.build(mod, "npu, llvm")
    logits, = exe.run(image)                    # or exe.run(input=image), by name
    exe.set_input("input", image); exe.run(); exe.get_output(0)   # graph_executor style
    print(exe.profile(image))                   # per step, per NPU op, per CPU kernel
    exe.save("model.partita"); partita.load("model.partita")

``run`` walks the step list and nothing else: slots were numbered and their release points
planned at build time. Each call owns its buffers, so threads may share one executable; the
graph_executor-style staged inputs and outputs are kept per thread.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from partita.backends.compiled import CompiledRegion
from partita.errors import PartitaError
from partita.ir import TensorType
from partita.runtime.profile import Profile, StepProfile
from partita.runtime.writer import executable_bytes, save_executable


class InputError(PartitaError):
    """Inputs that do not match the executable's input names, shapes or dtypes."""


@dataclass(frozen=True)
class Step:
    """One compiled region, the slots it reads and writes, and the slots freed after it."""

    target: str
    symbol: str
    region: CompiledRegion
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...] = ()
    host: bool = False
    # what the region was compiled from: (function, or its serialized bytes; backend options),
    # saved with regions of native code so that a file from elsewhere can be compiled again
    source: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Port:
    """A named input or output of the executable and the slot that holds it."""

    name: str
    type: TensorType
    slot: int
    quant: tuple | None = field(default=None, compare=False)  # (scale, zero point) when known


class Executable:
    """Compiled regions run in a fixed order; immutable and re-entrant."""

    # set by load: whose native code runs (artifact.py); empty for a build in memory
    load_report: dict | None = None
    load_note: str = ""

    def __init__(
        self,
        steps,
        n_slots: int,
        inputs,
        outputs,
        constants: dict[int, np.ndarray],
        target: str = "",
        report=None,
    ):
        self.steps: tuple[Step, ...] = tuple(steps)
        self.n_slots = n_slots
        self.inputs: tuple[Port, ...] = tuple(inputs)
        self.outputs: tuple[Port, ...] = tuple(outputs)
        self.constants = {int(k): v for k, v in constants.items()}
        for array in self.constants.values():
            array.flags.writeable = False
        self.target, self.report = target, report
        self._staged = threading.local()

    # -- description -------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [p.name for p in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [p.name for p in self.outputs]

    @property
    def input_types(self) -> list[TensorType]:
        return [p.type for p in self.inputs]

    @property
    def output_types(self) -> list[TensorType]:
        return [p.type for p in self.outputs]

    def __repr__(self):
        steps = " · ".join(f"{s.symbol}[{s.target}]" for s in self.steps)
        return f"<Executable {self.target!r}: {steps}>"

    # -- running -----------------------------------------------------------------------
    def run(self, *arrays, **by_name) -> list[np.ndarray]:
        """Run on inputs by position or by name; return the outputs as a list of arrays. With
        no arguments, run on the inputs staged with ``set_input`` (graph_executor style)."""
        if not arrays and not by_name and self.inputs:
            values = self._staged_inputs()
        else:
            values = self.bind_inputs(arrays, by_name)
        results = self._execute(values, None)
        self._staged.outputs = results
        return results

    def __call__(self, *arrays, **by_name) -> list[np.ndarray]:
        return self.run(*arrays, **by_name)

    def _execute(self, values: list[np.ndarray], profile: list | None) -> list[np.ndarray]:
        slots: list = [None] * self.n_slots
        owned: set[int] = set()  # slots holding arrays a region made for this run alone
        for slot, array in self.constants.items():
            slots[slot] = array
        for port, array in zip(self.inputs, values):
            slots[port.slot] = array
        for step in self.steps:
            args = [slots[i] for i in step.inputs]
            if profile is None:
                results = step.region.run(args)
            else:
                start = time.perf_counter()
                results, ops = step.region.profile(args)
                elapsed = time.perf_counter() - start
                profile.append(StepProfile(step.symbol, step.target, elapsed, ops))
            for i, array in zip(step.outputs, results):
                slots[i] = array
                (owned.add if getattr(step.region, "fresh_outputs", False) else owned.discard)(i)
            for i in step.release:
                slots[i] = None
        outputs, given = [], set()
        for p in self.outputs:  # each output its own array, copied unless a region's fresh one
            if p.slot in owned and p.slot not in given:
                given.add(p.slot)
                outputs.append(slots[p.slot])
            else:
                outputs.append(np.array(slots[p.slot], copy=True))
        return outputs

    def bind_inputs(self, arrays, by_name) -> list[np.ndarray]:
        """Inputs in port order, validated: names, count, shape and dtype (never cast)."""
        names = self.input_names
        if arrays and by_name:
            raise InputError("give the inputs either by position or by name, not both")
        if by_name:
            unknown = [k for k in by_name if k not in names]
            if unknown:
                raise InputError(f"unknown input {unknown[0]!r}; the inputs are {', '.join(names)}")
            missing = [n for n in names if n not in by_name]
            if missing:
                raise InputError(f"missing input {missing[0]!r}; the inputs are {', '.join(names)}")
            arrays = [by_name[n] for n in names]
        if len(arrays) != len(names):
            raise InputError(
                f"expected {len(names)} input{'s' * (len(names) != 1)} "
                f"({', '.join(names)}), got {len(arrays)}"
            )
        return [_check(port, a) for port, a in zip(self.inputs, arrays)]

    # -- graph_executor style ----------------------------------------------------------
    def set_input(self, key=None, value=None, **by_name) -> None:
        """Stage an input by name or index (``set_input("x", arr)`` or ``set_input(x=arr)``)."""
        staged = self._staged.__dict__.setdefault("inputs", {})
        items = dict(by_name)
        if key is not None:
            items[self._input_name(key)] = value
        for name, array in items.items():
            port = self.inputs[self.input_names.index(self._input_name(name))]
            staged[port.name] = _check(port, array)

    def get_input(self, key) -> np.ndarray | None:
        """The staged input ``key`` (name or index), or None."""
        return getattr(self._staged, "inputs", {}).get(self._input_name(key))

    def get_output(self, index: int) -> np.ndarray:
        """Output ``index`` of this thread's last ``run``."""
        outputs = getattr(self._staged, "outputs", None)
        if outputs is None:
            raise InputError("get_output before run: call run() first")
        if not -len(outputs) <= index < len(outputs):
            raise InputError(f"output index {index} out of range ({len(outputs)} outputs)")
        return outputs[index]

    def get_num_outputs(self) -> int:
        return len(self.outputs)

    def get_num_inputs(self) -> int:
        return len(self.inputs)

    def _input_name(self, key) -> str:
        names = self.input_names
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not 0 <= key < len(names):
                raise InputError(f"input index {key} out of range ({len(names)} inputs)")
            return names[key]
        if key not in names:
            raise InputError(f"unknown input {key!r}; the inputs are {', '.join(names)}")
        return key

    def _staged_inputs(self) -> list[np.ndarray]:
        staged = getattr(self._staged, "inputs", {})
        missing = [n for n in self.input_names if n not in staged]
        if missing:
            raise InputError(
                f"input {missing[0]!r} was not set: call set_input({missing[0]!r}, array) "
                f"or pass the inputs to run()"
            )
        return [staged[n] for n in self.input_names]

    # -- profile, save -----------------------------------------------------------------
    def profile(self, *arrays, repeat: int = 1, **by_name) -> Profile:
        """Run ``repeat`` times with each region's own profiling; the median run is reported."""
        values = self.bind_inputs(arrays, by_name)
        runs = []
        for _ in range(max(1, repeat)):
            steps: list[StepProfile] = []
            start = time.perf_counter()
            self._execute(values, steps)
            runs.append((time.perf_counter() - start, steps))
        runs.sort(key=lambda r: r[0])
        total, steps = runs[len(runs) // 2]
        return Profile(self.target, total, steps, repeat=max(1, repeat))

    def save(self, path) -> None:
        """Write the executable to one file (docs/file-format.md)."""
        save_executable(self, path)

    def to_bytes(self) -> bytes:
        """The bytes ``save`` writes; ``partita.runtime.load_bytes`` reads them back."""
        return executable_bytes(self)


def _check(port: Port, array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        if isinstance(array, (list, tuple, int, float)):
            array = np.asarray(array)
        else:
            raise InputError(
                f"input {port.name!r}: expected a numpy array of {port.type}, "
                f"got {type(array).__name__}"
            )
    ty = port.type
    if array.dtype != np.dtype(ty.dtype) or tuple(array.shape) != tuple(ty.shape):
        raise InputError(
            f"input {port.name!r}: expected {ty}, got Tensor[{tuple(array.shape)}, {array.dtype}]"
        )
    return array
