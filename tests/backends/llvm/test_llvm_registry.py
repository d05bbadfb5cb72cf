"""The lowering registry: one ordered list of lowerings per op, in the order the layered
dispatch it replaced tried them (extra_lower.EXTRA, then lower.SPECIAL, then the if-chain of
_Lowering.lower, then float_lower.lower_float; the modules now in backends/llvm/lower/), and
the emitting registry: one function per kernel kind."""

from __future__ import annotations

import pytest
from partita.backends.llvm import lower as _lower  # noqa: F401  (registers the lowerings)
from partita.backends.llvm.lower.registry import (
    _BY_OP,
    candidates,
    lowering_for,
    lowers,
    registered_ops,
)

import partita  # noqa: F401  (registers the ops)
from partita.ir.op import has_op, list_ops

# op -> the lowerings tried for it before the registry, in that order (module.function)
OLD_ORDER = {
    "nn.pad": ["pad_value.lower_pad_value", "gather.lower_gather"],
    "qnn.add": ["qbinary.lower_qbinary", "int8.lower_lut", "int8.lower_lut2"],
    "qnn.subtract": ["qbinary.lower_qbinary", "int8.lower_lut", "int8.lower_lut2"],
    "qnn.mul": ["qbinary.lower_qbinary", "int8.lower_lut", "int8.lower_lut2"],
    "qnn.squared_difference": ["int8.lower_lut", "int8.lower_lut2"],
    "qnn.mean": ["qmean_axes.lower_qmean_more", "int8.lower_qmean",
                 "float_ops.lower_qmean_tflite_builtin"],
    "qnn.conv2d": ["wide_mac.lower_wide_mac", "mac.lower_mac"],
    "qnn.dense": ["wide_mac.lower_wide_mac", "dynamic_int8.lower_int_dense", "mac.lower_mac"],
    "qnn.leaky_relu": ["qleaky.lower_qleaky16", "int8.lower_lut"],
    "qnn.batch_matmul": ["qtransformer.lower_qbmm", "int_products.lower_qbmm_any"],
    "nn.batch_matmul": ["int_products.lower_int_bmm", "runtime_weights.lower_mlas_bmm",
                        "float_ops.lower_fbmm"],
    "nn.conv2d": ["float_conv.lower_fconv", "int_products.lower_int_conv",
                  "runtime_weights.lower_runtime_conv"],
    "nn.conv2d_transpose": ["float_conv_transpose.lower_fconv_transpose",
                            "int_products.lower_int_conv",
                            "runtime_weights.lower_runtime_conv"],
    "nn.dense": ["runtime_weights.lower_runtime_dense", "float_dense.lower_mlas_dense",
                 "integer.lower_int_product", "float_ops.lower_fdense"],
    "nn.gemm": ["runtime_weights.lower_runtime_dense", "float_dense.lower_mlas_dense",
                "float_ops.lower_fdense"],
    "nn.global_avg_pool2d": ["float_conv.lower_fgap", "float_ops.lower_reduce"],
    "image.resize2d": ["gather.lower_gather", "float_spatial.lower_spatial"],
    "nn.max_pool2d": ["int8.lower_maxpool", "float_spatial.lower_spatial"],
    "mean": ["int8.lower_fmean", "float_ops.lower_reduce"],
    "qnn.quantize": ["int8.lower_lut", "int8.lower_quantize"],
    "clip": ["int8.lower_lut", "float_ops.lower_ewise"],
    "qnn.requantize": ["int8.lower_lut", "float_ops.lower_ewise"],
    "qnn.dequantize": ["int8.lower_lut", "float_ops.lower_ewise"],
}

NOT_OPS = {"greater_equal", "less_equal", "logical_and", "logical_or", "not_equal", "power"}


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
        assert "int8.lower_lut" in _names(name), name
    for name in kinds[False]:
        assert "int8.lower_lut" not in _names(name), name


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
    from partita.backends.llvm.emit import module  # noqa: F401  (registers the emitters)
    from partita.backends.llvm.kinds import Kind, emitter_for, emitters

    assert set(emitters()) == set(Kind)
    for kind in Kind:
        fn = emitter_for(kind)
        assert fn.__name__ == f"k_{kind.value.lower()}"
        assert f"{kind}" == str(kind) == kind.value
    with pytest.raises(ValueError, match="NOPE"):
        emitter_for("NOPE")


def test_kernel_families_are_composed_not_mixed():
    """The kernel emitter is an emit context holding one instance of each kernel family; a
    family has one base (Family), and whatever it reads of another family it names at the top
    of its class (``x = via("family")``): every ``self.name`` in a family's code is its own, the
    context's (CONTEXT_API) or such a declared one, and every declaration names a method the
    other family defines itself. Every ``@emits`` function is a method of one family."""
    import ast
    import inspect
    import textwrap

    from partita.backends.llvm.emit.base import CONTEXT_API, Emitter, Family, via
    from partita.backends.llvm.emit.module import FAMILIES, KernelEmitter, family_of
    from partita.backends.llvm.kinds import emitters

    assert KernelEmitter.__bases__ == (Emitter,)
    assert Emitter.__bases__ == (object,)
    for cls in FAMILIES.values():
        assert cls.__bases__ == (Family,), cls
        for name, value in vars(cls).items():
            if isinstance(value, via):
                target = FAMILIES[value.family]
                assert target is not cls and isinstance(vars(target).get(name), type(lambda: 0)), (
                    f"{cls.__name__}.{name} = via({value.family!r}): not a method of "
                    f"{target.__name__}")
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        set_here = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                    and isinstance(n.ctx, ast.Store) and getattr(n.value, "id", "") == "self"}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and getattr(n.value, "id", "") == "self":
                known = n.attr in vars(cls) or n.attr in CONTEXT_API or n.attr in set_here
                assert known or n.attr == "em", f"{cls.__name__} reads self.{n.attr}, not its own"
    for fn in emitters().values():
        assert family_of(fn) in FAMILIES.values()


def test_the_lower_subpackage_is_not_hidden_by_its_function():
    """``partita.backends.llvm.lower`` is the subpackage (the package's own ``lower`` function
    once hid it: ``import partita.backends.llvm.lower.context as c`` raised ImportError)."""
    import types

    import partita.backends.llvm as llvm
    import partita.backends.llvm.lower.context as context

    assert isinstance(llvm.lower, types.ModuleType) and llvm.lower.context is context
    assert callable(context.lower)
