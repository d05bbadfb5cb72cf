"""``tvm.relay.build_module``: ``bind_params_by_name``. (``relay.build`` itself is
``partita.build(mod, target, params=...)``, outside the facade.)"""

from __future__ import annotations

import numpy as np

from partita.build import bind_params
from partita.ir import Function, IRModule


def bind_params_by_name(func: Function, params: dict) -> Function:
    """``func`` with the parameters named in ``params`` replaced by constants (numpy arrays,
    or anything with TVM's ``.numpy()``)."""
    arrays = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in params.items()}
    return bind_params(IRModule.from_expr(func), arrays)["main"]


__all__ = ["bind_params_by_name"]
