"""The LLVM backend's error: a host function it cannot compile (the message names the op)."""

from __future__ import annotations

from partita.backends.registry import BackendError


class LLVMError(BackendError):
    """A host function the LLVM backend cannot compile (it names the op)."""
