"""NodeBuilder: the node-building half that every frontend's per-op context shares.

Nodes are typed as they are built (a type relation is one call), so a converter sees its inputs'
shapes at once and a bad model fails at the operator that made it bad, through ``fail``.
"""

from __future__ import annotations

import numpy as np

from partita.errors import PartitaError
from partita.ir import Call, Constant, Expr, Span, Tuple, TupleGetItem, TupleType
from partita.ops import get_op


class NodeBuilder:
    """Build typed nodes with the current source op's ``span``; subclasses define ``fail``."""

    span: Span

    def fail(self, message: str):
        """Raise the frontend's conversion error naming the source op."""
        raise NotImplementedError

    def call(self, name: str, *args, **attrs) -> Call:
        """``name(*args, **attrs)`` with this op's span, typed now."""
        args = [a if isinstance(a, Expr) else self.const(a) for a in args]
        try:
            node = Call(get_op(name), args, attrs or None, span=self.span)
            node.with_type(node.op.type_rel([a.checked_type for a in args], node.attrs))
        except PartitaError as e:
            self.fail(f"cannot build {name}: {e}")
        except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
            self.fail(f"cannot build {name}: {type(e).__name__}: {e}")
        return node

    def const(self, value, dtype: str | None = None) -> Constant:
        """A constant with this op's span; Python numbers become float32 / int32."""
        if dtype is None and isinstance(value, (int, float)):
            dtype = "float32" if isinstance(value, float) else "int32"
        return Constant(np.asarray(value, dtype=dtype), span=self.span)

    def tuple(self, fields) -> Tuple:
        fields = list(fields)
        node = Tuple(fields, span=self.span)
        node.with_type(TupleType([f.checked_type for f in fields]))
        return node

    def item(self, tup: Expr, index: int, span: Span | None = None) -> TupleGetItem:
        node = TupleGetItem(tup, index, span=span or self.span)
        node.with_type(tup.checked_type.fields[index])
        return node
