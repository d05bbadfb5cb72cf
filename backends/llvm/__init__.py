"""``llvm``: the host backend compiled to native code with llvmlite.

Each host segment becomes one object file: its kernels (fused conv/FC with TFLite's output
stage, tables for 8-bit functions, pooling, mean, copies) and a driver, so an inference of the
segment is one native call over buffers planned once. Object code is cached on disk and saved in
executables; loading one does not run LLVM again. What it cannot compile yet it refuses by op name
(build with the ``ref`` host for those models). docs/performance.md has the status and numbers.
"""

from __future__ import annotations

import os

from partita.backends.llvm.emit.emulate import emulated_parts
from partita.backends.llvm.emit.module import (
    call_args,
    constants,
    generate_parts,
    signature,
    wants_unrolling,
)

# the function under another name: bound as ``lower`` it would hide the subpackage (``import
# partita.backends.llvm.lower.context as c`` failed: "cannot import name 'context' from 'lower'")
from partita.backends.llvm.lower import lower as lower_function
from partita.backends.llvm.lower.vector_plan import ISAS
from partita.backends.llvm.runtime.arena import plan_arena
from partita.backends.llvm.runtime.cache import fetch, keep, region_key
from partita.backends.llvm.runtime.jit import (
    amx_permitted,
    best_isa,
    compile_parts,
    host_isa,
    isa_features,
    runs_isa,
)
from partita.backends.registry import Backend, Option, register_backend

from . import host_cpu
from .errors import LLVMError
from .layout import LLVMConvertLayout
from .peak import kernel_depth, kernel_macs
from .plan import plan_digest
from .region import LLVMRegion, load_region


def resolve_isa(options: dict) -> str:
    """The kernel family: option ``-isa=``, else $PARTITA_LLVM_ISA, else the host's best (plain
    when ``-mcpu`` names another CPU)."""
    host_cpu.check_mcpu(options.get("mcpu"))
    if wants_emulation(options) and options.get("mcpu") not in (None, "native"):
        raise LLVMError("llvm: -emulate=yes runs on this host: it does not combine with -mcpu")
    isa = str(options.get("isa") or "auto")
    if isa == "auto":
        isa = os.environ.get("PARTITA_LLVM_ISA", "auto")
    if isa not in ISAS:
        raise LLVMError(f"llvm: unknown instruction set {isa!r} (one of {', '.join(ISAS)})")
    if isa == "auto":
        return best_isa() if options.get("mcpu") in (None, "native") else "plain"
    emulate = wants_emulation(options)
    if isa == "amx" and not amx_permitted() and not emulate:
        raise LLVMError("llvm: -isa=amx needs a CPU with AMX-INT8 and an OS that grants the "
                        f"tile state; this host's best is -isa={host_isa()} (-emulate=yes runs "
                        "the AMX kernels here through exact, slow stand-ins)")
    if (isa == "avxvnni" and not runs_isa(isa) and options.get("mcpu") in (None, "native")
            and not emulate):
        raise LLVMError("llvm: -isa=avxvnni needs a CPU with AVX-VNNI; this host's best is "
                        f"-isa={host_isa()} (-emulate=yes runs its kernels here through exact, "
                        "slow stand-ins)")
    host_cpu.check_isa_for_cpu(isa, options.get("mcpu"))
    return isa


def wants_emulation(options: dict) -> bool:
    """Option ``-emulate=``: yes or no; auto (the default) reads $PARTITA_LLVM_EMULATE."""
    value = str(options.get("emulate") or "auto")
    if value == "auto":
        value = os.environ.get("PARTITA_LLVM_EMULATE", "no")
    if value not in ("yes", "no"):
        raise LLVMError(f"llvm: -emulate takes yes or no (PARTITA_LLVM_EMULATE={value!r})")
    return value == "yes"


def compile_region(function, options: dict) -> LLVMRegion:
    """The region from the region cache (cache.py), else: lower, generate IR, compile
    (or fetch the object code from its cache), load."""
    options = options or {}
    isa = resolve_isa(options)
    threads = int(options.get("threads") or 1)
    if threads not in (1, 2):
        raise LLVMError(f"llvm: threads must be 1 or 2, got {threads}")
    native = options.get("mcpu") in (None, "native")
    emulate = wants_emulation(options)  # resolve_isa refused it with -mcpu
    if emulate and runs_isa(isa) and (isa != "amx" or amx_permitted()):
        emulate = False  # this CPU runs the instructions: nothing to stand in for
    features = isa_features(isa) if native and isa in ("avx2", "avxvnni") else None
    if emulate:
        features = None  # the host's own: the instructions it lacks get stand-ins
    winograd = str(options.get("winograd") or "yes") != "no"
    tag = isa + ("+emulate" if emulate else "") + ("" if winograd else "+direct")
    key = region_key(function, tag, threads, options.get("mcpu"), features)
    data = fetch(key)
    if data is not None:
        try:
            return load_region(data)
        except LLVMError:
            pass  # a corrupt entry with a matching checksum: rebuilt below
    region = _compile_region(function, isa, threads, options.get("mcpu"), features, emulate,
                             winograd)
    keep(key, region.to_bytes())
    return region


def _compile_region(function, isa: str, threads: int, mcpu, features,
                    emulate: bool = False, winograd: bool = True) -> LLVMRegion:
    plan = lower_function(function, isa, threads, winograd)
    used = {k.params.get(p) for k in plan.kernels for p in ("isa", "gather")}
    lacking = host_cpu.lacking(used) if mcpu in (None, "native") and not emulate else []
    if lacking:  # kernels this host cannot run: compiled for a CPU with them, refused at run
        features = ",".join([isa_features(isa) if features is None else features, *lacking])
    parts, digest = generate_parts(plan), plan_digest(plan)
    if emulate:  # the instructions this host lacks become exact stand-ins (emit/emulate.py)
        parts, digest = emulated_parts(parts, digest, host_cpu.host_features(),
                                       amx_permitted())
    obj, cached = compile_parts(parts, mcpu, features, digest, unroll=wants_unrolling(plan))
    name = str((function.attrs or {}).get("global_symbol", "llvm"))
    kernels = [f"{k.kind} {k.name}" for k in plan.kernels]
    arena = plan_arena(plan)
    names, first = [], {}
    for k in plan.kernels:
        names.append(first.setdefault(signature(plan, k), k.name))
    calls = list(zip(names, call_args(plan)))
    consts = [a for k in plan.kernels for _, a in constants(k)]
    tiles = any(k.params.get("isa") == "amx" for k in plan.kernels) and not emulate
    needs = ["amx"] if tiles else []
    needs += lacking or host_cpu.needs_of(mcpu)
    return LLVMRegion(
        name=name, obj=obj, buffers=plan.buffers, inputs=plan.inputs, outputs=plan.outputs,
        kernels=kernels, arena=arena, calls=calls, consts=consts, cached=cached, needs=needs,
        isa=isa, macs=[kernel_macs(k) for k in plan.kernels],
        depths=[kernel_depth(k) for k in plan.kernels],
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
        "emulate": Option(
            "auto",
            ("auto", "no", "yes"),
            "yes: the instructions of an -isa= this CPU lacks (AVX-512 VNNI, AVX-VNNI, AMX "
            "tiles, AVX2) run as exact generic-code stand-ins, so any kernel family runs (slowly, "
            "bit for bit) on any x86-64 host: for checking a tier's code where it cannot run "
            "(auto: $PARTITA_LLVM_EMULATE, else no)",
        ),
        "winograd": Option(
            "yes",
            ("yes", "no"),
            "yes: float32 3 x 3 convolutions of stride 1 compute 2 x 2 outputs from 16 products "
            "(Winograd's F(2x2, 3x3): 2.25x fewer multiply-adds, sums within ~1e-6 of the "
            "output's scale); no: every output one FMA chain in k order",
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
