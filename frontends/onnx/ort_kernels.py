"""Which integer kernels ONNX Runtime's CPU provider runs on this machine, and the pass that makes
the imported qnn ops sum as they do.

MLAS multiplies uint8 activations by int8 weights (U8S8) with VNNI's VPDPBUSD(S) where the CPU
has it (AVX-VNNI, AVX512-VNNI, or AMX tiles) and sums exactly in int32. Without VNNI — AVX2
machines, AVX-512 Skylake — its kernels use VPMADDUBSW, which adds each pair of adjacent
products into an int16 with saturation, so the sum differs wherever a pair exceeds 32,767
(ONNX Runtime's quantization docs warn of it). The int8 activations of QDQ models meet the same
kernel: on x86-64 ONNX Runtime rewrites them to uint8 (value + 128, QDQS8ToU8Transformer) before
it fuses their groups. Depthwise convolutions (MlasConvDepthwise) and int8 x int8 kernels widen
to int16 first and stay exact.

``ort_int8_kernel()`` tells which it is here, as MLAS decides; ``from_onnx(ort_cpu=...)`` picks
another machine's (docs/onnx.md).
"""

from __future__ import annotations

import dataclasses

from partita.ir import Call, IRModule
from partita.ir.graph import map_functions
from partita.ir.visitor import ExprMutator

# ort_cpu=: "vnni" sums exactly, "avx2" saturates pairs (any x86-64 without VNNI).
ORT_CPUS = ("vnni", "avx2")
_VNNI_FLAGS = {"avx_vnni", "avx512_vnni", "amx_int8"}
# The ONNX ops ORT runs with its integer kernels; only QDQ groups see int8 activations as uint8.
_QOPERATOR = {"QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger",
              "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm"}


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags as /proc/cpuinfo names them (None where there is no such file)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        return None
    return set()


def ort_int8_kernel(flags: set[str] | None = None) -> str:
    """"avx2" where ONNX Runtime's U8S8 kernels saturate pairs (an x86-64 CPU with AVX2 and no
    VNNI), else "vnni" (exact sums: VNNI, AMX, Arm, or an SSE-only CPU whose kernel widens)."""
    flags = cpu_flags() if flags is None else flags
    if flags is None:  # not Linux: numpy knows the x86 features
        try:
            from numpy._core._multiarray_umath import __cpu_features__ as feats
        except ImportError:  # pragma: no cover - numpy < 2
            from numpy.core._multiarray_umath import __cpu_features__ as feats
        have = {k for k, v in feats.items() if v}
        vnni = bool(have & {"AVX512_CLX", "AVX512_ICL", "AVX512_SPR", "AVXVNNI"})
        return "avx2" if "AVX2" in have and not vnni else "vnni"
    return "avx2" if "avx2" in flags and not flags & _VNNI_FLAGS else "vnni"


class _PairSaturation(ExprMutator):
    def rewrite_call(self, call, op, args):
        out = super().rewrite_call(call, op, args)
        if not (isinstance(out, Call) and getattr(out.op, "name", "") in ("qnn.conv2d",
                                                                           "qnn.dense")):
            return out
        data, weight = (a.checked_type for a in call.args[:2])
        source = call.span.op_type if call.span is not None else ""
        allowed = ("uint8",) if source in _QOPERATOR else ("uint8", "int8")
        if weight.dtype != "int8" or data.dtype not in allowed or _depthwise(call):
            return out
        attrs = {**dataclasses.asdict(out.attrs), "accumulate": "vpmaddubsw"}
        return Call(out.op, out.args, attrs, out.span)


def _depthwise(call: Call) -> bool:
    """MLAS's depthwise case: one input and one output channel per group."""
    if call.op.name != "qnn.conv2d" or call.attrs.groups == 1:
        return False
    o = call.args[1].checked_type.shape[call.attrs.kernel_layout.index("O")]
    return call.attrs.groups == o and call.args[0].checked_type.shape[
        call.attrs.data_layout.index("C")] == o


def saturate_pairs(mod: IRModule) -> IRModule:
    """``mod`` with accumulate="vpmaddubsw" on the qnn.conv2d / qnn.dense calls ONNX Runtime runs
    with its U8S8 kernels on a CPU without VNNI: uint8 (or, from QDQ groups, int8) data and int8
    weights, depthwise convolutions excepted."""
    from partita.passes.infer_type import infer_new_types

    def mark(_, fn):
        body = _PairSaturation().visit(fn.body)
        infer_new_types(body, mod)
        return fn if body is fn.body else fn.with_body(body)

    return map_functions(mod, mark)
