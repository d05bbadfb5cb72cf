"""The LLVM backend's error: a host function it cannot compile (the message names the op)."""

from __future__ import annotations

from partita.backends.registry import BackendError


class LLVMError(BackendError):
    """A host function the LLVM backend cannot compile (it names the op)."""


def refuse(call, reason: str):
    """Raise the LLVMError that names ``call``'s op (and span) and why it is refused."""
    span = f" ({call.span})" if call.span is not None else ""
    raise LLVMError(f"llvm cannot compile {call.op.name}{span}: {reason} (build with the 'ref' "
                    "host for it)")
