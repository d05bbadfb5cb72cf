"""FoldConstant: evaluate every op call whose arguments are all constants.

    %0 = qnn.quantize(meta[Constant][0] /* (8, 3, 3, 3) float32 */, 0.02f, 0)
    %1 = qnn.conv2d(%x, %0, ...)
->
    %1 = qnn.conv2d(%x, meta[Constant][1] /* (8, 3, 3, 3) int8 */, ...)
"""

from __future__ import annotations

import logging

import numpy as np

from partita.errors import PartitaError
from partita.ir.module import IRModule
from partita.ir.nodes import Constant, Expr, Tuple
from partita.ir.types import TensorType, TupleType
from partita.ops.registry import Op

from .infra import module_pass
from .rewrite_util import ScopedMutator, rewrite_module

log = logging.getLogger("partita.passes")


@module_pass("FoldConstant", opt_level=2)
def FoldConstant(
    mod: IRModule, ctx, fold_qnn: bool = True, max_new_elements: int = 1 << 20
) -> IRModule:
    """Replace each op call whose arguments are all Constants (or Tuples of them) by the Constant
    its reference implementation computes, and ``(a, b).1`` by ``b``.

    ``fold_qnn=False`` leaves ``qnn.*`` calls alone. A result with more than ``max_new_elements``
    elements that is also larger than every constant argument is not folded, so broadcasting a
    scalar to a large shape does not bloat the module (quantizing a large weight still folds).
    Bodies of Composite and Compiler functions are not touched.

        add(%x, add(1f, 2f))                          ->  add(%x, 3f)
        qnn.quantize(<(8, 3) float32>, 0.02f, 0)      ->  <(8, 3) int8>
    """
    return rewrite_module(mod, lambda m: _Folder(fold_qnn, max_new_elements))


class _Folder(ScopedMutator):
    def __init__(self, fold_qnn: bool, max_new_elements: int):
        super().__init__()
        self.fold_qnn, self.max_new_elements = fold_qnn, max_new_elements

    def scope(self):
        return _Folder(self.fold_qnn, self.max_new_elements)

    def rewrite_tuple_getitem(self, tgi, value):
        if isinstance(value, Tuple) and 0 <= tgi.index < len(value.fields):
            return value.fields[tgi.index]
        return super().rewrite_tuple_getitem(tgi, value)

    def rewrite_call(self, call, op, args):
        new = super().rewrite_call(call, op, args)
        if not isinstance(op, Op) or not all(_is_constant(a) for a in args):
            return new
        if not self.fold_qnn and op.name.startswith("qnn."):
            return new
        folded = self._evaluate(call, op, args)
        return new if folded is None else folded

    def _evaluate(self, call, op: Op, args: list[Expr]) -> Expr | None:
        """The folded constant(s), or None when the call cannot or should not be folded (an
        invalid call is left for InferType or the interpreter to report)."""
        try:
            out_type = op.type_rel([_const_type(a) for a in args], call.attrs)
        except PartitaError:
            return None
        if self._too_big(out_type, args):
            log.debug("FoldConstant: %s result %s is too large to fold", call.short(), out_type)
            return None
        values = [
            a.data if isinstance(a, Constant) else tuple(f.data for f in a.fields) for a in args
        ]
        try:
            with np.errstate(all="ignore"):
                result = op.impl(*values, call.attrs)
        except (PartitaError, ArithmeticError, ValueError, TypeError, IndexError) as e:
            log.debug("FoldConstant: %s not folded: %s", call.short(), e)
            return None
        return _as_constant(result, out_type, call.span)

    def _too_big(self, out_type, args) -> bool:
        size = _size(out_type)
        largest = max((_size(_const_type(a)) for a in args), default=0)
        return size > self.max_new_elements and size > largest


def _is_constant(e: Expr) -> bool:
    return isinstance(e, Constant) or (
        isinstance(e, Tuple) and all(isinstance(f, Constant) for f in e.fields)
    )


def _const_type(e: Expr):
    if isinstance(e, Constant):
        return e.type_or_none
    return TupleType([f.type_or_none for f in e.fields])


def _size(t) -> int:
    if isinstance(t, TensorType):
        return t.size
    return sum(_size(f) for f in t.fields)


def _as_constant(value, t, span) -> Expr | None:
    """``value`` as a Constant (or Tuple of them) when it has exactly the type ``t``."""
    if isinstance(t, TupleType):
        if not isinstance(value, tuple) or len(value) != len(t.fields):
            return None
        fields = [_as_constant(v, ft, span) for v, ft in zip(value, t.fields)]
        return None if any(f is None for f in fields) else Tuple(fields, span)
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray) or value.shape != t.shape or value.dtype.name != t.dtype:
        return None  # a registration bug: keep the call so the interpreter reports it
    return Constant(value, span)
