"""``tvm.relay.op``: every op builder without a namespace (``relay.op.clip``), the namespaced
ones as TVM spells them (``relay.op.nn.conv2d``, ``relay.op.image.resize2d``), ``relay.op._make``
(the same builders under TVM's FFI spelling), ``relay.op.annotation``, ``relay.op.contrib``
(``register_pattern_table``, ``get_pattern_table``), ``relay.op.op.get(name)`` /
``relay.op.get(name)`` and ``relay.op.register_alter_op_layout`` (the hooks AlterOpLayout
applies)."""

from __future__ import annotations

import sys

from partita.passes.alter_op_layout import register_alter_op_layout
from partita.relay import _ops

from . import annotation, contrib, op
from .op import Op, get

nn = _ops.namespace("nn", "partita.relay.op.nn")
nn.pad = _ops.relay_pad(nn.pad)  # TVM's nn.pad(data, pad_width, pad_value=0.0, pad_mode=...)
image = _ops.namespace("image", "partita.relay.op.image")
_make = _ops.namespace("", "partita.relay.op._make")
for _name, _mod in (("nn", nn), ("image", image), ("_make", _make)):
    sys.modules[f"{__name__}.{_name}"] = _mod

globals().update(_ops.top_level_ops())

__all__ = [
    "Op",
    "annotation",
    "contrib",
    "get",
    "image",
    "nn",
    "op",
    "register_alter_op_layout",
    *sorted(_ops.top_level_ops()),
]
