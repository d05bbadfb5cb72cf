"""What another backend may use of the llvm backend: plans, code generation and the JIT.

The NPU's native engine (backends/npu/native.py) builds a ``Plan`` of llvm kernels for an NPU
command stream and compiles it with the llvm backend's code generator and JIT; it imports these
names from here and nothing else of backends/llvm (tests/test_layers.py checks that), so the
llvm backend's inside can move without breaking its sibling.

    Plan, Kernel, Kind, plan_digest      a plan, its kernels and kinds, its object-code key
    generate_parts, call_args, constants, signature, wants_unrolling
                                         the plan's LLVM modules and the driver's tables
    compile_parts, Loaded, host_isa, isa_features
                                         compile (cached) and load object code; the host ISA
    runs_isa, for_this_host               whether this CPU runs a kernel family; a plan's parts
                                         with exact stand-ins for the instructions it lacks
    vector_kernel, mean_params, strides_for
                                         the int8 vector kernels' plans, MEAN's parameters,
                                         broadcast strides (lowering helpers the NPU reuses)
"""

from __future__ import annotations

from partita.backends.llvm.emit.emulate import emulated_parts
from partita.backends.llvm.emit.module import (
    call_args,
    constants,
    generate_parts,
    signature,
    wants_unrolling,
)
from partita.backends.llvm.lower.float_ops import strides_for
from partita.backends.llvm.lower.qmean import mean_params
from partita.backends.llvm.lower.vector_plan import vector_kernel
from partita.backends.llvm.runtime.jit import (
    Loaded,
    amx_permitted,
    compile_parts,
    host_isa,
    isa_features,
    runs_isa,
)

from . import host_cpu
from .kinds import Kind
from .plan import Kernel, Plan, plan_digest


def for_this_host(parts, digest: bytes):
    """``generate_parts``' output and its ``plan_digest`` with the instructions this CPU lacks
    as exact stand-ins (the llvm backend's ``-emulate=yes``, emit/emulate.py)."""
    return emulated_parts(parts, digest, host_cpu.host_features(), amx_permitted())


__all__ = [
    "Kernel",
    "Kind",
    "Loaded",
    "Plan",
    "call_args",
    "compile_parts",
    "constants",
    "for_this_host",
    "generate_parts",
    "host_isa",
    "isa_features",
    "mean_params",
    "plan_digest",
    "runs_isa",
    "signature",
    "strides_for",
    "vector_kernel",
    "wants_unrolling",
]
