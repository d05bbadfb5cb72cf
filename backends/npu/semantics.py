"""A target with an accelerator computes quantized models as integer networks.

A frontend that reproduces one CPU's runtime by default (ONNX Runtime on an x86 CPU without VNNI
saturates pairs of int8 products to int16; it runs the QDQ groups it leaves unfused in float
with MLAS's summation order) also imports the model with exact integer semantics — every QDQ
group a qnn op, every sum exact in int32, which is what NPU toolchains compile — and offers it as
``mod.attrs["integer_semantics"]`` (an IRModule; ``frontends/onnx``). This pass, run by the
partition pipeline for every target list containing ``npu``, builds that one:

    build(from_onnx(path), "npu, llvm")   # integer semantics on both sides of the partition
    build(from_onnx(path), "llvm")        # this CPU's ONNX Runtime, bit for bit
    build(from_onnx(path, ort_cpu="avx2"), "npu, llvm")  # asked for explicitly: no variant

The partitioned module records what it computes in ``attrs["semantics"]`` and, per output, what
the frontend said about the runtime it no longer reproduces (``attrs["semantics_note"]``).
"""

from __future__ import annotations

from partita.ir import IRModule
from partita.passes.infra import module_pass

VARIANT = "integer_semantics"


@module_pass("NPUIntegerSemantics", opt_level=0)
def NPUIntegerSemantics(mod: IRModule, ctx) -> IRModule:
    """``mod.attrs["integer_semantics"]`` in place of ``mod`` when the frontend offers it."""
    variant = mod.attrs.get(VARIANT)
    if not isinstance(variant, IRModule):
        return mod
    attrs = {k: v for k, v in mod.attrs.items() if k != VARIANT}
    attrs.update(variant.attrs)
    attrs["semantics"] = "integer"
    return IRModule(variant.functions, attrs)


def semantics_for(mod: IRModule, target: str) -> IRModule:
    """The module a build of ``mod`` for ``target`` computes (the reference for its bits): the
    integer-semantics variant when the target list has ``npu`` and the frontend offers one."""
    names = [part.strip().split()[0] for part in str(target).split(",") if part.strip()]
    if "npu" in names and isinstance(mod.attrs.get(VARIANT), IRModule):
        return NPUIntegerSemantics()(mod)
    return mod
