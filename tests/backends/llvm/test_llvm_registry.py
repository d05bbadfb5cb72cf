"""The lowering registry: one ordered list of lowerings per op, in the order the layered
dispatch it replaced tried them (extra_lower.EXTRA, then lower.SPECIAL, then the if-chain of
_Lowering.lower, then float_lower.lower_float)."""

from __future__ import annotations

import pytest
from partita.backends.llvm import lower as _lower  # noqa: F401  (registers the lowerings)
from partita.backends.llvm.registry import _BY_OP, candidates, lowering_for, lowers, registered_ops

import partita  # noqa: F401  (registers the ops)
from partita.ir.op import has_op, list_ops

# op -> the lowerings tried for it before the registry, in that order (module.function)
OLD_ORDER = {
    "nn.pad": ["extra_lower.lower_pad_value", "gather_lower.lower_gather"],
    "qnn.add": ["qbinary_lower.lower_qbinary", "lower.lower_lut", "lower.lower_lut2"],
    "qnn.subtract": ["qbinary_lower.lower_qbinary", "lower.lower_lut", "lower.lower_lut2"],
    "qnn.mul": ["qbinary_lower.lower_qbinary", "lower.lower_lut", "lower.lower_lut2"],
    "qnn.squared_difference": ["lower.lower_lut", "lower.lower_lut2"],
    "qnn.mean": ["reduce_lower.lower_qmean_more", "lower.lower_qmean",
                 "float_lower.lower_qmean_tflite_builtin"],
    "qnn.conv2d": ["q16_lower.lower_wide_mac", "lower.lower_mac"],
    "qnn.dense": ["q16_lower.lower_wide_mac", "int_lower.lower_int_dense", "lower.lower_mac"],
    "qnn.leaky_relu": ["qleaky_lower.lower_qleaky16", "lower.lower_lut"],
    "qnn.batch_matmul": ["qlower.lower_qbmm", "int_products.lower_qbmm_any"],
    "nn.batch_matmul": ["int_products.lower_int_bmm", "runtime_weights.lower_mlas_bmm",
                        "float_lower.lower_fbmm"],
    "nn.conv2d": ["conv_lower.lower_fconv", "int_products.lower_int_conv",
                  "runtime_weights.lower_runtime_conv"],
    "nn.conv2d_transpose": ["convt_lower.lower_fconv_transpose", "int_products.lower_int_conv",
                            "runtime_weights.lower_runtime_conv"],
    "nn.dense": ["runtime_weights.lower_runtime_dense", "fdense_lower.lower_mlas_dense",
                 "qint_lower.lower_int_product", "float_lower.lower_fdense"],
    "nn.gemm": ["runtime_weights.lower_runtime_dense", "fdense_lower.lower_mlas_dense",
                "float_lower.lower_fdense"],
    "nn.global_avg_pool2d": ["conv_lower.lower_fgap", "float_lower.lower_reduce"],
    "image.resize2d": ["gather_lower.lower_gather", "spatial_lower.lower_spatial"],
    "nn.max_pool2d": ["lower.lower_maxpool", "spatial_lower.lower_spatial"],
    "mean": ["lower.lower_fmean", "float_lower.lower_reduce"],
    "qnn.quantize": ["lower.lower_lut", "lower.lower_quantize"],
    "clip": ["lower.lower_lut", "float_lower.lower_ewise"],
    "qnn.requantize": ["lower.lower_lut", "float_lower.lower_ewise"],
    "qnn.dequantize": ["lower.lower_lut", "float_lower.lower_ewise"],
}

NOT_OPS = {"greater_equal", "less_equal", "logical_and", "logical_or", "min", "not_equal", "power"}


def _names(op: str) -> list[str]:
    return [c.name for c in candidates(op)]


def test_every_registered_op_is_an_op_with_one_ordered_list():
    ops = registered_ops()
    assert len(ops) > 60
    # names EWISE / FREDUCE compute that the op set does not define (yet): kept from before
    assert {op for op in ops if not has_op(op)} == NOT_OPS
    for op, names in ops.items():
        assert names, op
        prios = [c.priority for c in candidates(op)]
        assert prios == sorted(prios) and len(set(prios)) == len(prios), op
        assert len(set(names)) == len(names), op  # no lowering listed twice


@pytest.mark.parametrize("op", sorted(OLD_ORDER))
def test_old_priority_order_is_kept(op):
    assert _names(op) == OLD_ORDER[op]


def test_lut_applies_by_kind():
    """LUT is registered for op kinds: every elemwise / broadcast op gets it, others do not."""
    kinds = {}
    for op in list_ops():
        kinds.setdefault(op.kind in ("elemwise", "broadcast"), []).append(op.name)
    assert kinds[True] and kinds[False]
    for name in kinds[True]:
        assert "lower.lower_lut" in _names(name), name
    for name in kinds[False]:
        assert "lower.lower_lut" not in _names(name), name


def test_unknown_op_has_no_lowering():
    assert lowering_for("no.such_op") == ()


def test_two_lowerings_at_one_priority_are_refused():
    @lowers("test.registry_op", priority=1)
    def first(low, call):
        return False

    try:
        with pytest.raises(ValueError, match="both claim 'test.registry_op' at priority 1"):
            @lowers("test.registry_op", priority=1)
            def second(low, call):
                return False
    finally:
        _BY_OP.pop("test.registry_op")


def test_every_kernel_kind_has_one_emitter():
    """The emitting registry (kinds.emits) covers every Kind, and kinds print as before."""
    from partita.backends.llvm import kernels  # noqa: F401  (registers the emitters)
    from partita.backends.llvm.kinds import Kind, emitter_for, emitters

    assert set(emitters()) == set(Kind)
    for kind in Kind:
        fn = emitter_for(kind)
        assert fn.__name__ == f"k_{kind.value.lower()}"
        assert f"{kind}" == str(kind) == kind.value
    with pytest.raises(ValueError, match="NOPE"):
        emitter_for("NOPE")
