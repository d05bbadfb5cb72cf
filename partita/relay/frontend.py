"""``tvm.relay.frontend``: ``from_tflite`` giving the graph TVM's TFLite frontend gives, so
Relay BYOC code whose patterns and checks assume that graph runs on partita's import.

partita's TFLite import keeps TFLite's own layouts; TVM's frontend rewrites them.
``tvm_graph(mod)`` applies TVM's choices, each exact (the same bits in the interpreter):

    qnn.conv2d(x, w: OHWI, ...)           ->  qnn.conv2d(x, transpose(w): HWIO, ...)
    kernel zero point [0, 0, ..., 0]      ->  0 (a scalar, as TVM writes an all-zero one)

(TVM's MEAN, ``cast -> mean -> qnn.requantize``, is not rewritten: see the migration guide.)
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, IRModule
from partita.ir.visitor import ExprMutator

_KERNEL_ZP = {"qnn.conv2d": 3, "qnn.dense": 3, "qnn.conv2d_transpose": 3}


class _TvmGraph(ExprMutator):
    def rewrite_call(self, call: Call, op, args):
        name = getattr(op, "name", None)
        if name in _KERNEL_ZP:
            k = _KERNEL_ZP[name]
            zp = args[k]
            if type(zp) is Constant and zp.data.ndim == 1 and not np.any(zp.data):
                args = [*args[:k], Constant(np.zeros((), zp.data.dtype)), *args[k + 1 :]]
        if name == "qnn.conv2d" and call.attrs.kernel_layout == "OHWI":
            w = args[1]
            if type(w) is Constant:
                hwio = Constant(np.ascontiguousarray(np.transpose(w.data, (1, 2, 3, 0))))
                attrs = {f: call.attrs[f] for f in call.attrs.keys()}
                attrs["kernel_layout"] = "HWIO"
                return Call(op, [args[0], hwio, *args[2:]], attrs, call.span)
        return super().rewrite_call(call, op, args)


def tvm_graph(mod: IRModule) -> IRModule:
    """``mod`` (from partita's TFLite import) in the form TVM's TFLite frontend gives: regular
    convolution weights HWIO, all-zero per-channel kernel zero points as a scalar 0."""
    out = IRModule({}, mod.attrs)
    for name, fn in mod.items():
        out[name] = fn.with_body(_TvmGraph().visit(fn.body))
    return out


def from_tflite(model, shape_dict=None, dtype_dict=None, layout: str = "tvm"):
    """TVM's ``relay.frontend.from_tflite(model, shape_dict, dtype_dict) -> (mod, params)``:
    ``model`` a path or the file's bytes; the weights are bound constants, so ``params`` is
    empty. ``layout="tvm"`` gives TVM's graph (``tvm_graph``), ``"tflite"`` partita's own."""
    from partita.frontends.tflite import from_tflite as _from_tflite

    if layout not in ("tvm", "tflite"):
        raise ValueError(f"layout must be 'tvm' or 'tflite', got {layout!r}")
    if isinstance(model, (bytes, bytearray)) or isinstance(model, str):
        mod = _from_tflite(model, shape_dict)
    else:
        mod = _from_tflite(bytes(model), shape_dict)
    return (tvm_graph(mod) if layout == "tvm" else mod), {}


__all__ = ["from_tflite", "tvm_graph"]
