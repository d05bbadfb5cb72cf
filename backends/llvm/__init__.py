"""``llvm``: the host backend compiled to native code with llvmlite.

Each host segment becomes one object file: its kernels (fused conv/FC with TFLite's output
stage, tables for 8-bit functions, pooling, mean, copies) and a driver, so an inference of the
segment is one native call over buffers planned once. Object code is cached on disk and saved in
executables; loading one does not run LLVM again. What it cannot compile yet it refuses by op name
(build with the ``ref`` host for those models). docs/performance.md has the status and numbers.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import threading
import time
import weakref

import numpy as np
from partita.backends.compiled import CompiledRegion, OpProfile, region_types
from partita.backends.registry import Backend, Option, register_backend

from partita.ir import TensorType

from . import host_cpu
from .codegen import DRIVER, TIMED, TSC
from .jit import (
    Loaded,
    amx_permitted,
    best_isa,
    compile_parts,
    host_isa,
    isa_features,
    runs_isa,
)
from .kernels import call_args, constants, generate_parts, signature, wants_unrolling
from .layout import LLVMConvertLayout
from .lower import LLVMError, lower, plan_digest
from .memory import plan_arena
from .pool import ALONE, SHUTDOWN, TwoModes
from .region_cache import fetch, keep, region_key
from .vplan import ISAS


class LLVMRegion(CompiledRegion):
    """A host segment as native code; ``run`` makes one call into the generated driver."""

    backend = "llvm"

    def __init__(
        self,
        name,
        obj: bytes,
        buffers,
        inputs,
        outputs,
        kernels,
        arena,
        calls,
        consts,
        cached=False,
        needs=(),
    ):
        self.name, self.obj = name, obj
        self.needs = sorted(needs)  # CPU state the code uses beyond its features: "amx"
        if "amx" in self.needs and not amx_permitted():
            raise LLVMError(
                f"llvm region {name!r} was compiled with AMX kernels (-isa=amx); this CPU or OS "
                "does not grant AMX tiles: compile it again here (-isa=auto picks what runs)"
            )
        self.calls = [(str(fn), [int(i) for i in args]) for fn, args in calls]
        self.consts = [np.ascontiguousarray(c) for c in consts]
        self.offsets, self.arena_bytes = list(arena[0]), int(arena[1])
        self._local = threading.local()
        self.buffers = [(tuple(s), d) for s, d in buffers]
        self.inputs, self.outputs, self.kernels = list(inputs), list(outputs), list(kernels)
        self.input_types = [TensorType(*self.buffers[i]) for i in self.inputs]
        self.output_types = [TensorType(*self.buffers[i]) for i in self.outputs]
        self.cached = cached
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
            arena = np.zeros(self.arena_bytes + 128, np.uint8)  # 64 B alignment + 64 B slack
            base = -arena.ctypes.data % 64
            views = [
                None
                if off is None
                else arena[base + off : base + off + int(np.prod(shape)) * np.dtype(dt).itemsize]
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
        meta = json.dumps(
            {
                "name": self.name,
                "buffers": self.buffers,
                "inputs": self.inputs,
                "outputs": self.outputs,
                "kernels": self.kernels,
                "arena": [self.offsets, self.arena_bytes],
                "calls": self.calls,
                "consts": [[str(c.dtype), list(c.shape)] for c in self.consts],
                "needs": self.needs,
            }
        ).encode()
        blob = b"".join(c.tobytes() for c in self.consts)
        return len(meta).to_bytes(4, "little") + meta + blob + self.obj


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
        n = int.from_bytes(data[:4], "little")
        meta = json.loads(data[4 : 4 + n])
        consts, at = [], 4 + n
        for dtype, shape in meta["consts"]:
            count = math.prod(shape)
            size = count * np.dtype(dtype).itemsize
            if at + size > len(data):
                raise ValueError("truncated constants")
            consts.append(np.frombuffer(data, dtype, count, at).reshape(shape).copy())
            at += size
        return LLVMRegion(
            meta["name"],
            bytes(data[at:]),
            meta["buffers"],
            meta["inputs"],
            meta["outputs"],
            meta["kernels"],
            meta["arena"],
            meta["calls"],
            consts,
            cached=True,
            needs=meta.get("needs", []),
        )
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise LLVMError(f"corrupt llvm region: {type(exc).__name__}: {exc}") from None


def resolve_isa(options: dict) -> str:
    """The kernel family: option ``-isa=``, else $PARTITA_LLVM_ISA, else the host's best (plain
    when ``-mcpu`` names another CPU)."""
    host_cpu.check_mcpu(options.get("mcpu"))
    isa = str(options.get("isa") or "auto")
    if isa == "auto":
        isa = os.environ.get("PARTITA_LLVM_ISA", "auto")
    if isa not in ISAS:
        raise LLVMError(f"llvm: unknown instruction set {isa!r} (one of {', '.join(ISAS)})")
    if isa == "auto":
        return best_isa() if options.get("mcpu") in (None, "native") else "plain"
    if isa == "amx" and not amx_permitted():
        raise LLVMError("llvm: -isa=amx needs a CPU with AMX-INT8 and an OS that grants the "
                        f"tile state; this host's best is -isa={host_isa()}")
    if isa == "avxvnni" and not runs_isa(isa) and options.get("mcpu") in (None, "native"):
        raise LLVMError("llvm: -isa=avxvnni needs a CPU with AVX-VNNI; this host's best is "
                        f"-isa={host_isa()}")
    host_cpu.check_isa_for_cpu(isa, options.get("mcpu"))
    return isa


def compile_region(function, options: dict) -> LLVMRegion:
    """The region from the region cache (region_cache.py), else: lower, generate IR, compile
    (or fetch the object code from its cache), load."""
    options = options or {}
    isa = resolve_isa(options)
    threads = int(options.get("threads") or 1)
    if threads not in (1, 2):
        raise LLVMError(f"llvm: threads must be 1 or 2, got {threads}")
    native = options.get("mcpu") in (None, "native")
    features = isa_features(isa) if native and isa in ("avx2", "avxvnni") else None
    key = region_key(function, isa, threads, options.get("mcpu"), features)
    data = fetch(key)
    if data is not None:
        try:
            return load_region(data)
        except LLVMError:
            pass  # a corrupt entry with a matching checksum: rebuilt below
    region = _compile_region(function, isa, threads, options.get("mcpu"), features)
    keep(key, region.to_bytes())
    return region


def _compile_region(function, isa: str, threads: int, mcpu, features) -> LLVMRegion:
    plan = lower(function, isa, threads)
    used = {k.params.get(p) for k in plan.kernels for p in ("isa", "gather")}
    lacking = host_cpu.lacking(used) if mcpu in (None, "native") else []
    if lacking:  # kernels this host cannot run: compiled for a CPU with them, refused at run
        features = ",".join([isa_features(isa) if features is None else features, *lacking])
    obj, cached = compile_parts(
        generate_parts(plan), mcpu, features, plan_digest(plan), unroll=wants_unrolling(plan)
    )
    name = str((function.attrs or {}).get("global_symbol", "llvm"))
    ins, _ = region_types(function)
    del ins
    kernels = [f"{k.kind} {k.name}" for k in plan.kernels]
    arena = plan_arena(plan)
    names, first = [], {}
    for k in plan.kernels:
        names.append(first.setdefault(signature(plan, k), k.name))
    calls = list(zip(names, call_args(plan)))
    consts = [a for k in plan.kernels for _, a in constants(k)]
    needs = ["amx"] if any(k.params.get("isa") == "amx" for k in plan.kernels) else []
    needs += lacking or host_cpu.needs_of(mcpu)
    return LLVMRegion(
        name, obj, plan.buffers, plan.inputs, plan.outputs, kernels, arena, calls, consts, cached,
        needs,
    )


backend = Backend(
    "llvm",
    host=True,
    compile=compile_region,
    load=load_region,
    passes=lambda: [LLVMConvertLayout()],
    options={
        "mcpu": Option(None, None, "the CPU to generate code for (default: this host's)"),
        "isa": Option(
            "auto",
            ISAS,
            "conv/dense kernels: amx (VNNI plus AMX tiles for pointwise convolutions), vnni "
            "(AVX-512), avxvnni (AVX2 with AVX-VNNI), avx2, plain (auto: the host's best, or "
            "$PARTITA_LLVM_ISA)",
        ),
        "threads": Option(
            "1",
            ("1", "2"),
            "2: large kernels split in halves, the second for a worker thread kept across "
            "calls (a busy core only delays it; each call takes whichever driver, with or "
            "without the worker, measured faster lately)",
        ),
    },
    description="the host CPU: native code generated with llvmlite (one call per segment)",
)
register_backend(backend, override=True)

__all__ = ["LLVMRegion", "backend", "compile_region", "load_region"]
