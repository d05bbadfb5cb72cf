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


def _machine(cpu: str | None = None, features: str | None = None):
    _init()
    target = llvm.Target.from_default_triple()
    native = cpu in (None, "native")
    if features is None:
        features = host_features() if native else ""
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name() if native else cpu,
        features=features,
        opt=3,
        reloc="pic",
        codemodel="default",
    )


def host_features() -> str:
    _init()
    return llvm.get_host_cpu_features().flatten()


def host_isa() -> str:
    """The best kernel family this CPU runs: vnni (AVX-512 VNNI), avx2, or plain."""
    features = set(host_features().split(","))
    if {"+avx512vnni", "+avx512bw", "+avx512f"} <= features:
        return "vnni"
    return "avx2" if "+avx2" in features else "plain"


def isa_features(isa: str) -> str:
    """Target features for a kernel family on this host: the host's, without AVX-512 (and
    VNNI) for ``avx2``, so that a forced AVX2 build really is AVX2 code."""
    features = host_features().split(",")
    if isa == "avx2":
        features = [("-" + f[1:]) if f.startswith(("+avx512", "+avxvnni")) else f for f in features]
    return ",".join(features)


def host_key() -> str:
    _init()
    return "|".join(
        [llvmlite.__version__, llvm.get_default_triple(), llvm.get_host_cpu_name(), host_features()]
    )


def cache_dir() -> Path:
    return Path(os.environ.get("PARTITA_CACHE_DIR") or Path.home() / ".cache" / "partita" / "llvm")


def compile_ir(
    text, cpu: str | None = None, features: str | None = None, source: bytes | None = None
) -> tuple[bytes, bool]:
    """Object code for ``text`` (for ``cpu`` and target ``features``, default the host's) and
    whether it came from the cache. ``text`` may be a function that makes the IR, and ``source``
    what it is made from: then the key hashes ``source`` and a cache hit never builds the IR."""
    material = source if source is not None else (text() if callable(text) else text).encode()
    head = (host_key() + f"|{cpu}|{features}\n").encode()
    key = hashlib.sha256(head + material).hexdigest()
    path = cache_dir() / f"{key}.o"
    digest_path = path.with_suffix(".sha256")
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == digest_path.read_text().strip():
            return data, True
    except OSError:
        pass
    module = llvm.parse_assembly(text() if callable(text) else text)
    module.verify()
    machine = _machine(cpu, features)
    pm = (
        llvm.create_pass_builder(machine, llvm.PipelineTuningOptions(speed_level=3))
        if hasattr(llvm, "create_pass_builder")
        else None
    )
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
