"""SimplifyInference: batch normalization in its inference form, as Relay's pass writes it.

    %0 = nn.batch_norm(%x, %gamma, %beta, %mean, %var, axis=1, epsilon=1e-05f);
    %0.0
->
    %1 = multiply(divide(1f, sqrt(add(%var, 1e-05f))), %gamma);           /* scale */
    %2 = add(multiply(negative(%mean), %1), %beta);                        /* shift */
    %3 = multiply(%x, expand_dims(%1, axis=1, num_newaxis=2));
    add(%3, expand_dims(%2, axis=1, num_newaxis=2))

Only the normalized result (``.0``) is rewritten; a batch_norm whose whole tuple is used stays.
Functions that belong to a backend (``Composite``, ``Compiler``) are left alone, as Relay's
function passes skip them. The expansion computes in the data's dtype, one op at a time, so its
float results may differ from ``nn.batch_norm``'s reference (float64, rounded once) in the last
bit; where every step is exact (power-of-two variances, short mantissas) the bits are equal.
"""

from __future__ import annotations

import numpy as np

from partita.errors import PartitaError
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr, TupleGetItem
from partita.ir.types import TensorType
from partita.ops.registry import get_op

from .infer_type import infer_type
from .infra import module_pass
from .rewrite_util import TypedScopedMutator, is_op, rewrite_module, typed


@module_pass("SimplifyInference", opt_level=0)
def SimplifyInference(mod: IRModule, ctx) -> IRModule:
    """``nn.batch_norm(...).0`` -> ``x * scale + shift`` with Relay's scale and shift (module
    docstring); types are inferred first."""
    for fn in mod.functions.values():
        infer_type(fn, mod)
    return rewrite_module(mod, _Simplifier)


class _Simplifier(TypedScopedMutator):
    def rewrite_tuple_getitem(self, tgi: TupleGetItem, value: Expr) -> Expr:
        if tgi.index == 0 and is_op(value, "nn.batch_norm"):
            return self._typed_tree(batch_norm_inference(value))
        return super().rewrite_tuple_getitem(tgi, value)

    def _typed_tree(self, e: Expr) -> Expr:
        """Type the nodes the expansion built (their inputs are typed already)."""
        if e.type_or_none is None:
            for kid in (e.args if type(e) is Call else ()):
                self._typed_tree(kid)
            typed(e, self.mod)
        return e


def batch_norm_inference(call: Call) -> Expr:
    """The inference form of ``call`` (an ``nn.batch_norm`` with typed inputs): Relay's
    BatchNormToInferUnpack, op for op."""
    data, gamma, beta, mean, var = call.args
    attrs = call.attrs
    t = data.type_or_none
    if not isinstance(t, TensorType):
        raise PartitaError(f"{call.short()}: SimplifyInference needs a typed tensor, got {t}")

    def op(name, *args, **kw):
        return Call(get_op(name), list(args), kw or None, call.span)

    def scalar(value) -> Constant:
        return Constant(np.asarray(value, dtype=t.dtype))

    scale = op("divide", scalar(1.0), op("sqrt", op("add", var, scalar(np.float32(attrs.epsilon)))))
    if attrs.scale:
        scale = op("multiply", scale, gamma)
    shift = op("multiply", op("negative", mean), scale)
    if attrs.center:
        shift = op("add", shift, beta)
    pad = t.ndim - (attrs.axis % t.ndim) - 1  # Relay's ExpandBiasToMatchAxis
    if pad > 0:
        scale = op("expand_dims", scale, axis=1, num_newaxis=pad)
        shift = op("expand_dims", shift, axis=1, num_newaxis=pad)
    return op("add", op("multiply", data, scale), shift)
