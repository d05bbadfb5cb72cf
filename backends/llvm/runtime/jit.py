"""Compile LLVM IR to object code for the host CPU (cached on disk) and load object code.

The cache key is a hash of the IR text, the llvmlite version, the host triple, CPU name and
features; entries live in ``PARTITA_CACHE_DIR`` (default ``~/.cache/partita/llvm``), each with a
SHA-256 of its bytes so a corrupt entry is detected and rebuilt, the least recently used deleted
past ``PARTITA_CACHE_SIZE`` (default 2 GiB). Loading object code does not run
LLVM's optimizer. A fresh TargetMachine is made for every engine (STYLE.md: reusing one after its
engine closed crashes the process).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import select
import signal
import threading
import time
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
from partita.backends.llvm.errors import LLVMError

from partita.limits import parse_bytes

_LOCK = threading.Lock()
_READY = False
# held around every use of LLVM here: a fork (compile_parts) then never copies a thread's
# half-taken LLVM lock into the child
_LLVM = threading.RLock()
CHILD_TIMEOUT = 300.0  # seconds a compile child may take before it is killed and redone here


def _init() -> None:
    global _READY
    with _LOCK:
        if not _READY:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            # vectorised loops keep a scalar remainder instead of folding their tail into
            # masked stores: LLVM 22.1 wrote masked-off bytes of a short loop's tail (seen in
            # the 8-bit softmax, 7 wrong bytes of a (2, 9) row loop; docs/performance-history.md)
            llvm.set_option("", "-prefer-predicate-over-epilogue=scalar-epilogue")
            _soft_float_helpers()
            _READY = True


# float16 conversions LLVM lowers to library calls (double -> half has no instruction, and
# float <-> half has none without F16C): compiler-rt's / libgcc's helpers
HALF_HELPERS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2")


def _soft_float_helpers() -> None:
    """Make the float16 helpers resolvable in this process. MCJIT resolves a symbol the
    process has not loaded to address 0, so a float16 kernel would jump there (a segfault,
    seen when no earlier import had loaded libgcc_s, which glibc loads only on demand)."""
    import ctypes.util

    if all(llvm.address_of_symbol(name) for name in HALF_HELPERS):
        return
    path = ctypes.util.find_library("gcc_s") or "libgcc_s.so.1"
    try:
        llvm.load_library_permanently(path)
    except RuntimeError:
        pass  # no libgcc_s: missing_helpers() names what is left
    for name in missing_helpers():  # a static libgcc or compiler-rt in the process
        try:
            address = ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
        except AttributeError:
            continue
        llvm.add_symbol(name, address)


def missing_helpers() -> list[str]:
    """The float16 helpers this process cannot resolve (a kernel calling one is refused)."""
    return [name for name in HALF_HELPERS if not llvm.address_of_symbol(name)]


def ensure_initialized() -> None:
    """LLVM's native target, initialised once per process (what every compile here needs)."""
    _init()


LLVM_LOCK = _LLVM  # held around every use of LLVM (see above)


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


# PARTITA_LLVM_HOST=NAME (a CPU of cpu_table.CPU_FEATURES: x86-64-v3, alderlake, icelake-server,
# x86-64-v2, ...): this process takes its host for that older CPU. Every feature of the vector
# tiers that NAME lacks is reported off, so native code, the tiers this CPU "runs", -isa=auto,
# AMX's grant and -emulate's stand-ins are what a machine of that kind gets: the test suite as
# a Zen 3 (AVX2 only) or an SSE-only host sees it, run on a newer CPU (docs/testing.md)
PRETEND_ENV = "PARTITA_LLVM_HOST"
# feature name prefixes a pretended CPU reports off unless its table has them (the vector
# tiers' own, and everything that needs AVX where the named CPU has none)
_TIERED = ("avx512", "amx", "avxvnni", "avxifma", "avxneconvert", "evex512", "avx10")
_AVX_ONLY = ("avx", "fma", "f16c", "vaes", "vpclmulqdq")


def host_features() -> str:
    """LLVM's feature string for this host (or for PARTITA_LLVM_HOST's CPU), worked out once per
    name: a profile asks for it per region run."""
    return _host_features(os.environ.get(PRETEND_ENV) or "")


@functools.cache
def _host_features(name: str) -> str:
    _init()
    flat = llvm.get_host_cpu_features().flatten()
    if not name:
        return flat
    from partita.backends.llvm.cpu_table import CPU_FEATURES

    if name not in CPU_FEATURES:
        raise LLVMError(f"{PRETEND_ENV}={name!r} is not a CPU of the llvm backend's table "
                        f"(e.g. x86-64-v2, x86-64-v3, alderlake, icelake-server)")
    keep = CPU_FEATURES[name]
    drop = _TIERED + (() if "+avx" in keep else _AVX_ONLY)
    out = []
    for f in flat.split(","):
        if f.startswith("+") and f not in keep and f[1:].startswith(drop):
            f = "-" + f[1:]
        out.append(f)
    return ",".join(out)


def host_isa() -> str:
    """The best kernel family this CPU runs: vnni (AVX-512 VNNI), avxvnni (AVX2 with the VEX
    dot product, AVX-VNNI, on CPUs without AVX-512), avx2, or plain."""
    return next(isa for isa in ("vnni", "avxvnni", "avx2", "plain") if runs_isa(isa))


# the CPU features each kernel family needs (amx: vnni's and the OS's grant, amx_permitted)
NEEDS = {"plain": set(), "avx2": {"+avx2"}, "avxvnni": {"+avx2", "+avxvnni"},
         "vnni": {"+avx512vnni", "+avx512bw", "+avx512f"}}


def runs_isa(isa: str) -> bool:
    """Whether this CPU runs kernel family ``isa`` (forced with -isa=)."""
    if isa == "amx":
        return amx_permitted()
    return NEEDS.get(isa, set()) <= set(host_features().split(","))


_AMX: bool | None = None
_AMX_LOCK = threading.Lock()
ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA, SYS_ARCH_PRCTL = 0x1023, 18, 158


def amx_permitted() -> bool:
    """Whether this process may use AMX tiles: the CPU has AMX-INT8 and Linux (5.16 and newer)
    granted the tile state on request (``arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)``, asked once
    per process; a tile instruction without it kills the process with SIGILL)."""
    global _AMX
    features = set(host_features().split(","))
    with _AMX_LOCK:
        if _AMX is None:
            _AMX = False
            if {"+amx-int8", "+amx-tile", "+avx512vnni"} <= features and os.uname().machine in (
                "x86_64", "AMD64"
            ):
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    _AMX = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM,
                                        XFEATURE_XTILEDATA) == 0
                except (OSError, AttributeError):
                    _AMX = False
        return _AMX


def best_isa() -> str:
    """The kernel family ``-isa=auto`` picks: amx (VNNI with AMX tiles for the pointwise
    convolutions and large dense layers) where the CPU and OS allow it, else host_isa()."""
    return "amx" if host_isa() == "vnni" and amx_permitted() else host_isa()


def isa_features(isa: str) -> str:
    """Target features for a kernel family on this host: the host's, without AVX-512 (and
    AVX-VNNI) for ``avx2``, without AVX-512 for ``avxvnni``, so that a forced AVX2 build
    really is AVX2 code (and an AVX-VNNI one uses the VEX encoding)."""
    features = host_features().split(",")
    if isa in ("avx2", "avxvnni"):
        drop = ("+avx512", "+avxvnni") if isa == "avx2" else ("+avx512",)
        features = [("-" + f[1:]) if f.startswith(drop) else f for f in features]
    return ",".join(features)


def host_key() -> str:
    _init()
    return "|".join(
        [llvmlite.__version__, llvm.get_default_triple(), llvm.get_host_cpu_name(), host_features()]
    )


def cache_dir() -> Path:
    return Path(os.environ.get("PARTITA_CACHE_DIR") or Path.home() / ".cache" / "partita" / "llvm")


DEFAULT_CACHE_SIZE = 2 << 30


def cache_size() -> int:
    """The cache's size limit in bytes: $PARTITA_CACHE_SIZE (``2g``, ``500m``), else 2 GiB."""
    text = os.environ.get("PARTITA_CACHE_SIZE")
    if not text:
        return DEFAULT_CACHE_SIZE
    try:
        return max(parse_bytes(text), 0)
    except ValueError:
        raise LLVMError(
            f"PARTITA_CACHE_SIZE={text!r}: write a size such as 2g, 500m or 1048576"
        ) from None


def trim_cache(keep: Path | None = None) -> None:
    """Over the size limit: delete the least recently used entries (an entry and its checksum
    together; a hit touches both) until the cache holds 80% of the limit; ``keep`` (the entry
    just written) stays."""
    limit = cache_size()
    groups: dict[str, list] = {}  # stem -> [last use, bytes, paths]
    try:
        for e in os.scandir(cache_dir()):
            if e.is_file():
                st = e.stat()
                group = groups.setdefault(e.name.split(".", 1)[0], [0.0, 0, []])
                group[0] = max(group[0], st.st_mtime)
                group[1] += st.st_size
                group[2].append(Path(e.path))
    except OSError:
        return
    total = sum(g[1] for g in groups.values())
    if total <= limit:
        return
    kept = keep.name.split(".", 1)[0] if keep is not None else None
    for stem, (_, size, paths) in sorted(groups.items(), key=lambda item: item[1][0]):
        if total <= 0.8 * limit:
            break
        if stem == kept:
            continue
        for path in paths:
            try:
                path.unlink()
            except OSError:
                pass
        total -= size


def key_path(material: bytes, cpu, features, suffix: str = ".o") -> Path:
    """The cache entry for ``material`` compiled for ``cpu`` and ``features`` on this host."""
    head = (host_key() + f"|{cpu}|{features}\n").encode()
    return cache_dir() / f"{hashlib.sha256(head + material).hexdigest()}{suffix}"


def read_entry(path: Path) -> bytes | None:
    """The entry's bytes, or None if it is missing or its checksum does not match."""
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == path.with_suffix(".sha256").read_text().strip():
            for used in (path, path.with_suffix(".sha256")):  # trim_cache: least recent first
                os.utime(used)
            return data
    except OSError:
        pass
    return None


def write_entry(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
        path.with_suffix(".sha256").write_text(hashlib.sha256(data).hexdigest())
    except OSError:
        pass  # a read-only cache is not an error


def _compile(text: str, cpu, features, unroll: bool = True) -> bytes:
    with _LLVM:
        return _compile_locked(text, cpu, features, unroll)


def _compile_locked(text: str, cpu, features, unroll: bool = True) -> bytes:
    module = llvm.parse_assembly(text)
    module.verify()
    machine = _machine(cpu, features)
    pm = None
    if hasattr(llvm, "create_pass_builder"):
        tuning = llvm.PipelineTuningOptions(speed_level=3)
        tuning.loop_unrolling = unroll
        pm = llvm.create_pass_builder(machine, tuning)
    if pm is not None:
        pm.getModulePassManager().run(module, pm)
    return machine.emit_object(module)


def compile_ir(
    text, cpu: str | None = None, features: str | None = None, source: bytes | None = None
) -> tuple[bytes, bool]:
    """Object code for ``text`` (for ``cpu`` and target ``features``, default the host's) and
    whether it came from the cache. ``text`` may be a function that makes the IR, and ``source``
    what it is made from: then the key hashes ``source`` and a cache hit never builds the IR."""
    material = source if source is not None else (text() if callable(text) else text).encode()
    path = key_path(material, cpu, features)
    data = read_entry(path)
    if data is not None:
        return data, True
    data = _compile(text() if callable(text) else text, cpu, features)
    write_entry(path, data)
    return data, False


MAGIC = b"PTOBJS1\0"  # several object files in one blob (a raw object starts with \x7fELF)


def compile_parts(
    texts, cpu=None, features=None, source: bytes = b"", unroll: bool = True
) -> tuple[bytes, bool]:
    """``compile_ir`` of several modules (functions making their IR), the parts not in the
    cache compiled in parallel: all but the last in forked child processes (LLVM serialises
    its work within a process), the last here; a child that fails is redone here.
    ``$PARTITA_COMPILE_JOBS=1`` compiles them one after another. ``unroll`` False turns LLVM's
    loop unroller off (kernels unrolled by hand lose nothing and compile ~30% faster). Returns
    one blob (``MAGIC``, then each object's length and bytes) that ``Loaded`` takes."""
    tag = "" if unroll else "|no-unroll"
    paths = [key_path(source + f"|part{i}{tag}".encode(), cpu, features) for i in range(len(texts))]
    objs = [read_entry(p) for p in paths]
    cached = all(o is not None for o in objs)
    missing = [i for i, o in enumerate(objs) if o is None]
    parallel = hasattr(os, "fork") and os.environ.get("PARTITA_COMPILE_JOBS", "2") != "1"
    children = []
    with _LLVM:  # no other thread of this process is inside LLVM while it forks
        for i in missing[:-1] if parallel else []:
            children.append((i, *_fork_compile(texts[i], cpu, features, unroll)))
    for i in missing[len(children):]:
        objs[i] = _compile(texts[i](), cpu, features, unroll)
    for i, pid, fd in children:
        objs[i] = _collect(pid, fd) or _compile(texts[i](), cpu, features, unroll)
    for i in missing:
        write_entry(paths[i], objs[i])
    blob = MAGIC + len(objs).to_bytes(4, "little")
    for o in objs:
        blob += len(o).to_bytes(8, "little") + o
    return blob, cached


def _fork_compile(make, cpu, features, unroll=True):
    """A child process that compiles ``make()`` and writes the object to a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        os.close(r)
        try:
            data = _compile(make(), cpu, features, unroll)
            with os.fdopen(w, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int) -> bytes | None:
    """The child's object code, or None if it failed or took over CHILD_TIMEOUT seconds
    (then it is killed; the caller compiles the part itself)."""
    chunks, deadline = [], time.monotonic() + CHILD_TIMEOUT
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            left = deadline - time.monotonic()
            ready = select.select([pipe], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                os.kill(pid, signal.SIGKILL)
                chunks = []
                break
            chunk = pipe.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    os.waitpid(pid, 0)
    return b"".join(chunks) or None


def split_objects(blob: bytes) -> list[bytes]:
    """The object files of a ``compile_parts`` blob, or [blob] for a single object."""
    if not blob.startswith(MAGIC):
        return [blob]
    n, at, out = int.from_bytes(blob[8:12], "little"), 12, []
    for _ in range(n):
        size = int.from_bytes(blob[at : at + 8], "little")
        if at + 8 + size > len(blob):
            raise ValueError("truncated object code")
        out.append(blob[at + 8 : at + 8 + size])
        at += 8 + size
    return out


def _check_helpers(obj: bytes) -> None:
    """Refuse object code that calls a float16 helper this process lacks (MCJIT would
    resolve it to address 0): its name is in the object's symbol table."""
    lacking = [name for name in missing_helpers() if name.encode() + b"\0" in obj]
    if lacking:
        raise LLVMError(f"llvm: the float16 helpers {', '.join(lacking)} are not in this "
                        f"process (libgcc_s or compiler-rt), so its float16 kernels cannot run")


class Loaded:
    """Object code loaded into its own MCJIT engine; ``address(name)`` of a function."""

    def __init__(self, obj: bytes):
        _init()
        with _LLVM:
            backing = llvm.parse_assembly("")
            self.engine = llvm.create_mcjit_compiler(backing, _machine())
            for part in split_objects(obj):
                _check_helpers(part)
                self.engine.add_object_file(llvm.ObjectFileRef.from_data(part))
            self.engine.finalize_object()

    def function(self, name: str, argtypes, restype=None):
        address = self.engine.get_function_address(name)
        if not address:
            raise RuntimeError(f"{name} is not in the object code")
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)
