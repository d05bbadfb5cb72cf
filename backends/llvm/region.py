"""A compiled host segment: native code over a buffer arena planned at build time, run by one
call into its generated driver; its bytes (``to_bytes``, ``load_region``) are a region blob
(backends/blob.py) of the layout, the constants and the object code."""

from __future__ import annotations

import ctypes
import threading
import time
import weakref

import numpy as np
from partita.backends.blob import pack_region, unpack_region
from partita.backends.compiled import CompiledRegion, OpProfile
from partita.backends.llvm import host_cpu
from partita.backends.llvm.emit.base import DRIVER, TIMED, TSC
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.peak import speed_metrics
from partita.backends.llvm.runtime.arena import packed, zeroed
from partita.backends.llvm.runtime.jit import Loaded, amx_permitted
from partita.backends.llvm.runtime.modes import TwoModes
from partita.backends.llvm.runtime.threads import ALONE, SHUTDOWN

from partita.ir import TensorType


class LLVMRegion(CompiledRegion):
    """A host segment as native code; ``run`` makes one call into the generated driver."""

    backend = "llvm"
    fresh_outputs = True  # run and profile copy each output out of the arena

    def __init__(
        self,
        *,
        name: str,
        obj: bytes,
        buffers,
        inputs,
        outputs,
        kernels,
        arena,
        calls,
        consts,
        cached: bool = False,
        needs=(),
        isa: str | None = None,
        macs=None,
        depths=None,
    ):
        """``name`` the region's symbol; ``obj`` its object code; ``buffers`` (shape, dtype)
        each; ``inputs`` / ``outputs`` buffer indices; ``kernels`` "KIND name" labels; ``arena``
        (offset per buffer or None, bytes); ``calls`` (function, table indices) per kernel;
        ``consts`` the constant arrays; ``cached`` loaded, not compiled; ``needs`` CPU state
        beyond features ("amx")."""
        self.name, self.obj = name, obj
        self.needs = sorted(needs)  # CPU state the code uses beyond its features: "amx"
        if "amx" in self.needs and not amx_permitted():
            raise LLVMError(
                f"llvm region {name!r} was compiled with AMX kernels (-isa=amx); this CPU or OS "
                "does not grant AMX tiles: compile it again here (-isa=auto picks what runs)"
            )
        self.calls = [(str(fn), [int(i) for i in args]) for fn, args in calls]
        self.consts = packed(consts)  # one buffer, each on a cache line (2 MB pages if large)
        self.offsets, self.arena_bytes = list(arena[0]), int(arena[1])
        self._local = threading.local()
        self.buffers = [(tuple(s), d) for s, d in buffers]
        self.inputs, self.outputs, self.kernels = list(inputs), list(outputs), list(kernels)
        self.input_types = [TensorType(*self.buffers[i]) for i in self.inputs]
        self.output_types = [TensorType(*self.buffers[i]) for i in self.outputs]
        self.cached = cached
        # the kernels' tier and multiply-adds (peak.py: profile's GMAC/s and fraction of peak)
        self.isa = isa
        self.macs = [int(m) for m in macs] if macs else [0] * len(self.kernels)
        self.depths = [int(d) for d in depths] if depths else [0] * len(self.kernels)
        # code for a CPU this host is not (host_cpu.py): loaded, saved, never run here
        self.refusal = host_cpu.why_not_here(self.needs)
        self._loaded = Loaded(obj)
        self._run = self._loaded.function(DRIVER, [ctypes.c_void_p])
        self._alone = (self._loaded.function(ALONE, [ctypes.c_void_p])
                       if self._loaded.engine.get_function_address(ALONE) else None)
        self._timed = (self._loaded.function(TIMED, [ctypes.c_void_p, ctypes.c_void_p])
                       if self._loaded.engine.get_function_address(TIMED) else None)
        if self._loaded.engine.get_function_address(SHUTDOWN) and self.refusal is None:
            # the worker thread runs this engine's code: stopped before the engine goes
            weakref.finalize(self, _stop_worker, self._loaded.function(SHUTDOWN, []),
                             self._loaded)
        self.modes = TwoModes()  # -threads=2: with or without the worker, by measured speed

    def _views(self):
        """This thread's arena (allocated on its first run), views of it, the pointer table."""
        state = getattr(self._local, "state", None)
        if state is None:
            arena = zeroed(self.arena_bytes + 64)  # on a cache line, + 64 B slack
            views = [
                None
                if off is None
                else arena[off : off + int(np.prod(shape)) * np.dtype(dt).itemsize]
                .view(dt)
                .reshape(shape)
                for off, (shape, dt) in zip(self.offsets, self.buffers)
            ]
            ptrs = [0 if v is None else v.ctypes.data for v in views]
            ptrs += [c.ctypes.data for c in self.consts]
            table = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
            state = self._local.state = (arena, views, table)
        return state

    def _check_host(self):
        if self.refusal is not None:
            raise host_cpu.HostCPUError(f"llvm region {self.name!r}: {self.refusal}")

    def run(self, inputs):
        self._check_host()
        inputs = [np.ascontiguousarray(a) for a in self.check_inputs(inputs)]
        _, views, table = self._views()
        for i, a in zip(self.inputs, inputs):
            table[i] = a.ctypes.data
        if self._alone is None:
            self._run(ctypes.addressof(table))
        else:
            mode = self.modes.choose()
            start = time.perf_counter()
            (self._run if mode == "pool" else self._alone)(ctypes.addressof(table))
            self.modes.record(mode, time.perf_counter() - start)
        by_index = dict(zip(self.inputs, inputs))
        return [by_index[i].copy() if views[i] is None else views[i].copy() for i in self.outputs]

    def profile(self, inputs):
        """One OpProfile per fused kernel: the driver's run with a time stamp after each kernel
        (with the worker when the region splits kernels), or in a region saved before it had
        that driver, kernel by kernel (each a native call, timed)."""
        self._check_host()
        inputs = [np.ascontiguousarray(a) for a in self.check_inputs(inputs)]
        _, views, table = self._views()
        for i, a in zip(self.inputs, inputs):
            table[i] = a.ctypes.data
        if self._timed is not None:
            stamps = np.zeros(len(self.kernels) + 1, np.int64)
            self._timed(ctypes.addressof(table), stamps.ctypes.data)
            seconds = np.diff(stamps) / _tsc_hz(self._loaded)
            mode = "two threads" if self._alone is not None else "one thread"
            profile = [OpProfile(label.split(" ", 1)[1], "cpu kernel", float(t),
                                 {"kernel": label.split(" ", 1)[0], "run": mode})
                       for label, t in zip(self.kernels, seconds)]
        else:
            profile = self._profile_calls(table)
        for op, macs, depth in zip(profile, self.macs, self.depths):
            op.metrics.update(speed_metrics(op.metrics["kernel"], macs, op.time_s, self.isa,
                                            depth))
        by_index = dict(zip(self.inputs, inputs))
        outputs = [
            by_index[i].copy() if views[i] is None else views[i].copy() for i in self.outputs
        ]
        return outputs, profile

    def _profile_calls(self, table) -> list:
        profile = []
        for label, (fn_name, args) in zip(self.kernels, self.calls):
            kind, name = label.split(" ", 1)
            fn = self._loaded.function(fn_name, [ctypes.c_void_p] * len(args))
            pointers = [table[i] for i in args]
            start = time.perf_counter()
            fn(*pointers)
            elapsed = time.perf_counter() - start
            profile.append(OpProfile(name, "cpu kernel", elapsed, {"kernel": kind}))
        return profile

    def summary(self) -> dict:
        return {"kernels": len(self.kernels), "object_bytes": len(self.obj), "cached": self.cached}

    def to_bytes(self) -> bytes:
        """The region blob (backends/blob.py): the header, the constants, the object code."""
        header = {
            "name": self.name,
            "buffers": self.buffers,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "kernels": self.kernels,
            "arena": [self.offsets, self.arena_bytes],
            "calls": self.calls,
            "consts": [[str(c.dtype), list(c.shape)] for c in self.consts],
            "needs": self.needs,
            "isa": self.isa,
            "macs": self.macs,
            "depths": self.depths,
        }
        return pack_region(header, self.consts, self.obj)


_TSC_HZ: list = []  # the time stamp counter's ticks per second, once measured


def _tsc_hz(loaded) -> float:
    """Ticks per second of the counter the timed driver reads: ``loaded``'s partita_tsc
    against perf_counter over 20 ms, once per process."""
    if not _TSC_HZ:
        tsc = loaded.function(TSC, [], ctypes.c_int64)
        t0, c0 = time.perf_counter(), tsc()
        time.sleep(0.02)
        t1, c1 = time.perf_counter(), tsc()
        _TSC_HZ.append((c1 - c0) / (t1 - t0))
    return _TSC_HZ[0]


def _stop_worker(shutdown, loaded) -> None:
    """Join the region's worker thread (``loaded``, its engine, is an argument so that it lives
    until then)."""
    shutdown()


def load_region(data: bytes) -> LLVMRegion:
    """Object code back into a region; LLVM's optimizer does not run again."""
    try:
        meta, consts, obj = unpack_region(data)
        return LLVMRegion(
            name=meta["name"],
            obj=obj,
            buffers=meta["buffers"],
            inputs=meta["inputs"],
            outputs=meta["outputs"],
            kernels=meta["kernels"],
            arena=meta["arena"],
            calls=meta["calls"],
            consts=consts,
            cached=True,
            needs=meta.get("needs", []),
            isa=meta.get("isa"),
            macs=meta.get("macs"),
            depths=meta.get("depths"),
        )
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise LLVMError(f"corrupt llvm region: {type(exc).__name__}: {exc}") from None


__all__ = ["LLVMRegion", "load_region"]
