"""Targets checked before any work starts, the same way for every command: every backend
exists, every option is one it declares, and the option values the built-in backends read at
compile time (the NPU's -config and -sram, the LLVM host's -mcpu and -isa) are valid here.

``partita inspect`` partitions without compiling, and ``partita sweep`` compiles in worker
processes; both would otherwise accept a target that ``compile`` refuses, or find out point by
point.
"""

from __future__ import annotations


def _check_npu(options: dict) -> None:
    from partita.backends.npu.config import get_config

    get_config(options.get("config"), options.get("sram"))


def _check_llvm(options: dict) -> None:
    from partita.backends.llvm import resolve_isa

    resolve_isa(options)


# backend name -> the check of the option values it reads when it compiles
VALUE_CHECKS = {"npu": _check_npu, "llvm": _check_llvm}


def check_target(text: str):
    """The parsed CompositeTarget, or the error ``compile`` would give (before it imports)."""
    from partita.partition import parse_target

    target = parse_target(text)
    for spec in (*target.targets, target.host):
        backend = spec.backend
        options = backend.resolve_options(spec.options)
        check = VALUE_CHECKS.get(spec.name)
        if check is not None:
            check({k: v for k, v in options.items() if k in spec.options})
    return target
