"""The op set: tensor ops, ``nn.*`` and ``qnn.*``, all in one registry."""

from .registry import Attrs, NoAttrs, Op, choice, get_op, has_op, list_ops, register_op

__all__ = ["Attrs", "NoAttrs", "Op", "choice", "get_op", "has_op", "list_ops", "register_op"]
