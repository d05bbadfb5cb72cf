"""``tvm.relay.build_module``: ``bind_params_by_name``. (``relay.build`` itself is
``partita.build(mod, target, params=...)``, outside the facade.)"""

from __future__ import annotations

import numpy as np

from partita.errors import PartitaError
from partita.ir import Constant, Function

from .expr import bind


def bind_params_by_name(func: Function, params: dict) -> Function:
    """``func`` with the parameters named in ``params`` replaced by constants (numpy arrays,
    or anything with TVM's ``.numpy()``), as TVM binds them: names ``func`` lacks are ignored,
    two parameters of one name are an error, and nothing is type-checked here (InferType
    does that later). ``partita.build(params=...)`` is the checking form."""
    by_name: dict = {}
    for p in func.params:
        if p.name_hint in by_name:
            raise PartitaError(f"bind_params_by_name: two parameters are named {p.name_hint!r}")
        by_name[p.name_hint] = p
    binds = {
        by_name[k]: Constant(np.asarray(v.numpy() if hasattr(v, "numpy") else v))
        for k, v in params.items()
        if k in by_name
    }
    return bind(func, binds) if binds else func


__all__ = ["bind_params_by_name"]
