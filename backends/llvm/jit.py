"""Compile LLVM IR to object code for the host CPU (cached on disk) and load object code.

The cache key is a hash of the IR text, the llvmlite version, the host triple, CPU name and
features; entries live in ``PARTITA_CACHE_DIR`` (default ``~/.cache/partita/llvm``), each with a
SHA-256 of its bytes so a corrupt entry is detected and rebuilt. Loading object code does not run
LLVM's optimizer. A fresh TargetMachine is made for every engine (STYLE.md: reusing one after its
engine closed crashes the process).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

_LOCK = threading.Lock()
_READY = False


def _init() -> None:
    global _READY
    with _LOCK:
        if not _READY:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _READY = True


def _machine(cpu: str | None = None):
    _init()
    target = llvm.Target.from_default_triple()
    features = llvm.get_host_cpu_features().flatten() if cpu in (None, "native") else ""
    return target.create_target_machine(cpu=llvm.get_host_cpu_name() if cpu in (None, "native")
                                        else cpu, features=features, opt=3, reloc="pic",
                                        codemodel="default")


def host_key() -> str:
    _init()
    return "|".join([llvmlite.__version__, llvm.get_default_triple(), llvm.get_host_cpu_name(),
                     llvm.get_host_cpu_features().flatten()])


def cache_dir() -> Path:
    return Path(os.environ.get("PARTITA_CACHE_DIR") or Path.home() / ".cache" / "partita" / "llvm")


def compile_ir(text: str, cpu: str | None = None) -> tuple[bytes, bool]:
    """Object code for ``text`` (for ``cpu``, default the host) and whether it was cached."""
    key = hashlib.sha256((host_key() + f"|{cpu}\n" + text).encode()).hexdigest()
    path = cache_dir() / f"{key}.o"
    digest_path = path.with_suffix(".sha256")
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == digest_path.read_text().strip():
            return data, True
    except OSError:
        pass
    module = llvm.parse_assembly(text)
    module.verify()
    machine = _machine(cpu)
    pm = llvm.create_pass_builder(machine, llvm.PipelineTuningOptions(speed_level=3)) \
        if hasattr(llvm, "create_pass_builder") else None
    if pm is not None:
        pm.getModulePassManager().run(module, pm)
    data = machine.emit_object(module)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
        digest_path.write_text(hashlib.sha256(data).hexdigest())
    except OSError:
        pass  # a read-only cache is not an error
    return data, False


class Loaded:
    """Object code loaded into its own MCJIT engine; ``address(name)`` of a function."""

    def __init__(self, obj: bytes):
        _init()
        backing = llvm.parse_assembly("")
        self.engine = llvm.create_mcjit_compiler(backing, _machine())
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()

    def function(self, name: str, argtypes, restype=None):
        address = self.engine.get_function_address(name)
        if not address:
            raise RuntimeError(f"{name} is not in the object code")
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)
