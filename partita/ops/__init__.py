"""The op set: tensor ops, ``nn.*`` and ``qnn.*``, all in one registry (partita.ir.op).

Importing this package registers every op; ``import partita`` does it first thing after the IR.
"""

from partita.ir.attrs import Attrs, NoAttrs, choice
from partita.ir.nodes import Op
from partita.ir.op import get_op, has_op, list_ops, register_op

from . import (  # noqa: F401  (importing the definition modules registers their ops)
    annotation,
    layout,
    nn,
    nn_conv,
    nn_image,
    nn_nd,
    nn_norm,
    nn_pool,
    nn_pool3d,
    qnn,
    qnn_conv_transpose,
    qnn_elemwise,
    qnn_lstm,
    qnn_lut,
    qnn_pool,
    qnn_transformer,
    qnn_vela,
    tensor,
    tensor_init,
    tensor_reduce,
    tensor_transform,
    tensor_vela,
    transformer,
    tvm_extra,
)

__all__ = ["Attrs", "NoAttrs", "Op", "choice", "get_op", "has_op", "list_ops", "register_op"]
