"""``-mcpu=`` and ``-isa=`` checked against this host before LLVM sees them.

LLVM aborts the process on options it cannot honour (``-isa=vnni`` kernels compiled for a CPU
without AVX-512: "Do not know how to split the result of this operator"; an unknown ``-mcpu``:
"64-bit code requested on a subtarget that doesn't support it"), and code for a newer CPU dies
of SIGILL when it runs. Here:

- an ``-mcpu`` LLVM does not know is refused (a usage error) before a target machine is made;
- a kernel family a known ``-mcpu`` lacks is refused, naming the missing features;
- code that this host cannot run (``-isa=vnni`` kernels on an AVX2 CPU, ``-mcpu=sapphirerapids``
  on anything older) is still compiled, for that CPU, so that ``partita compile`` can write it
  to a file, but the region records what it needs and refuses to *run* here (``why_not_here``).

The CPU table holds the features the kernels and LLVM's code generation depend on, for the x86
CPU names LLVM knows; a recognised name outside the table is compiled as asked but runs only on
a host of that very name.
"""

from __future__ import annotations

import os
import tempfile
import threading

from .cpu_table import CPU_FEATURES
from .errors import LLVMError

# the features each kernel family's code needs (jit.NEEDS, with AMX's tiles)
ISA_NEEDS = {
    "plain": set(),
    "avx2": {"+avx2"},
    "avxvnni": {"+avx2", "+avxvnni"},
    "vnni": {"+avx512f", "+avx512bw", "+avx512vnni"},
    "amx": {"+avx512f", "+avx512bw", "+avx512vnni", "+amx-int8", "+amx-tile"},
}

class HostCPUError(LLVMError):
    """A CPU option (-mcpu, -isa) this host or the named CPU cannot honour, or code compiled
    for a CPU this host is not, asked to run here."""


_KNOWN: dict[str, bool] = {}
_LOCK = threading.Lock()


def host_features() -> set[str]:
    from partita.backends.llvm.runtime.jit import host_features as flat

    return {f for f in flat().split(",") if f.startswith("+")}


def host_cpu() -> str:
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import ensure_initialized

    ensure_initialized()
    return llvm.get_host_cpu_name()


def is_native(mcpu) -> bool:
    return mcpu in (None, "", "native") or mcpu == host_cpu()


def recognized(mcpu: str) -> bool:
    """Whether LLVM knows ``mcpu`` for this target. LLVM says so only on stderr (once per
    target machine, as a warning), so stderr is captured around making one."""
    if mcpu in CPU_FEATURES:
        return True
    with _LOCK:
        if mcpu not in _KNOWN:
            _KNOWN[mcpu] = _probe(mcpu)
        return _KNOWN[mcpu]


def _probe(mcpu: str) -> bool:
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import LLVM_LOCK, ensure_initialized

    ensure_initialized()
    with LLVM_LOCK, tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        try:
            os.dup2(err.fileno(), 2)
            llvm.Target.from_default_triple().create_target_machine(cpu=mcpu, features="")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        return b"not a recognized processor" not in err.read()


def check_mcpu(mcpu) -> None:
    """Refuse an ``-mcpu`` LLVM does not know (it would print a warning per target machine and
    then abort), with names it does."""
    if is_native(mcpu):
        return
    if not isinstance(mcpu, str) or not mcpu.strip() or not recognized(mcpu):
        raise HostCPUError(
            f"llvm: -mcpu={mcpu} is not a CPU LLVM knows; use -mcpu=native (this host, "
            f"{host_cpu()}) or a name such as x86-64-v3, haswell, skylake-avx512, icelake-server, "
            "sapphirerapids, znver4"
        )


def target_features(mcpu) -> set[str] | None:
    """The features code for ``mcpu`` may use: the host's for native, the table's for a known
    CPU, None for a CPU LLVM knows but the table does not."""
    if is_native(mcpu):
        return host_features()
    return CPU_FEATURES.get(mcpu)


def check_isa_for_cpu(isa: str, mcpu) -> None:
    """A forced kernel family that the named ``-mcpu`` does not have is refused (for the host
    itself, code is compiled as asked and refused at run time; see ``lacking``)."""
    if is_native(mcpu):
        return
    have = target_features(mcpu)
    missing = sorted(ISA_NEEDS.get(isa, set()) - have) if have is not None else []
    if missing:
        raise HostCPUError(
            f"llvm: -isa={isa} needs {_names(missing)}, which -mcpu={mcpu} lacks; pick a CPU "
            f"that has them or leave -isa out (it then follows -mcpu)"
        )


def lacking(isas) -> list[str]:
    """The features the kernel families ``isas`` need that this host lacks (sorted)."""
    need: set[str] = set()
    for isa in isas:
        need |= ISA_NEEDS.get(isa, set())
    return sorted(need - host_features())


def needs_of(mcpu) -> list[str]:
    """What code for ``mcpu`` needs of the CPU that runs it, as recorded in a region: the
    features this host lacks, or ``cpu=NAME`` for a CPU the table does not describe."""
    if is_native(mcpu):
        return []
    have = target_features(mcpu)
    if have is None:
        return [f"cpu={mcpu}"]
    return sorted(have - host_features())


def why_not_here(needs) -> str | None:
    """Why this host cannot run code that needs ``needs`` (a region's record), or None."""
    missing = [n for n in needs if n.startswith("+") and n not in host_features()]
    cpus = [n[4:] for n in needs if n.startswith("cpu=") and n[4:] != host_cpu()]
    if not missing and not cpus:
        return None
    what = _names(missing) if missing else f"a {cpus[0]} CPU"
    return (
        f"this region's code was compiled for a CPU with {what}, which this host ({host_cpu()}) "
        "lacks: running it would stop the process with an illegal instruction. Run it on such a "
        "CPU, or compile again here (-isa=auto, -mcpu=native; or -emulate=yes to check that "
        "tier's code here through exact, slow stand-ins of its instructions)"
    )


def _names(features) -> str:
    return ", ".join(f.lstrip("+") for f in features)


__all__ = [
    "CPU_FEATURES",
    "HostCPUError",
    "check_isa_for_cpu",
    "check_mcpu",
    "lacking",
    "needs_of",
    "recognized",
    "why_not_here",
]
