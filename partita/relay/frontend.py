"""``tvm.relay.frontend``: ``from_tflite`` giving the graph TVM's TFLite frontend gives, so
Relay BYOC code whose patterns and checks assume that graph runs on partita's import.

partita's TFLite import keeps TFLite's own layouts; TVM's frontend rewrites them.
``tvm_graph(mod)`` applies TVM's choices, each exact (the same bits in the interpreter):

    qnn.conv2d(x, w: OHWI, ...)           ->  qnn.conv2d(x, transpose(w): HWIO, ...)
    kernel zero point [0, 0, ..., 0]      ->  0 (a scalar, as TVM writes an all-zero one)

    qnn.mean(x, s_in, zp_in, s_out, zp_out)  ->  qnn.requantize(mean(cast(x, "int32")),
                                                     s_in, zp_in, s_out, zp_out)

The last is TVM's MEAN, and it is exact only for some parameters: Relay's integer ``mean``
truncates S / n (S the sum of the n reduced values) before the rescale, where TFLite's MEAN
rescales S - n * zp_in once (``qnn.mean``, semantics "tflite"), so the two differ by one step
whenever the lost fraction moves a rounding. ``mean="tvm"`` (the default) rewrites a MEAN only
when ``tvm_mean_is_exact`` proves the forms equal for every sum n int8/uint8 values can have;
otherwise it keeps ``qnn.mean``. ``mean="tvm_always"`` rewrites every "tflite" MEAN, as TVM's
frontend does, and is then not bit-exact with TFLite; ``mean="qnn"`` keeps every ``qnn.mean``.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, IRModule
from partita.ir.visitor import ExprMutator
from partita.ops import get_op

_KERNEL_ZP = {"qnn.conv2d": 3, "qnn.dense": 3, "qnn.conv2d_transpose": 3}
_QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}
MEAN_MODES = ("tvm", "tvm_always", "qnn")
# The most values the exactness check evaluates (n * number of sums, in chunks of CHUNK values);
# larger MEANs (n > about 1000) stay qnn.mean under mean="tvm".
MAX_MEAN_CHECK, CHUNK = 1 << 28, 1 << 22


def _rows_with_sums(sums: np.ndarray, n: int, lo: int, hi: int, dtype: str) -> np.ndarray:
    """One row of n values in [lo, hi] per sum: lo everywhere, then the excess spread greedily
    (each value takes up to hi - lo of it)."""
    excess = (sums - lo * n)[:, None] - np.arange(n)[None, :] * (hi - lo)
    return (lo + np.clip(excess, 0, hi - lo)).astype(dtype)


def tvm_mean_is_exact(n: int, dtype: str, params, requantize: str = "tflite") -> bool:
    """Whether TVM's MEAN, ``qnn.requantize(mean(cast(x, "int32")))`` with ``requantize``
    semantics, equals ``qnn.mean(x, *params)`` (semantics "tflite") for every reachable sum of n
    ``dtype`` values: both ops' references are evaluated on one row per sum (both results
    depend on the sum alone). False when that is more than MAX_MEAN_CHECK values."""
    lo, hi = _QRANGE[dtype]
    if n < 1 or n * n * (hi - lo + 1) > MAX_MEAN_CHECK:
        return False
    s_in, zp_in, s_out, zp_out = (np.asarray(p) for p in params)
    qmean, mean, rq = get_op("qnn.mean"), get_op("mean"), get_op("qnn.requantize")
    qattrs, mattrs = qmean.attrs_type(axis=(1,)), mean.attrs_type(axis=(1,))
    rattrs = rq.attrs_type(out_dtype=dtype, semantics=requantize)
    sums = np.arange(lo * n, hi * n + 1)
    step = max(1, CHUNK // n)
    for start in range(0, len(sums), step):
        rows = _rows_with_sums(sums[start : start + step], n, lo, hi, dtype)
        want = qmean.impl(rows, s_in, zp_in, s_out, zp_out, qattrs)
        got = rq.impl(mean.impl(rows.astype(np.int32), mattrs), s_in, zp_in, s_out, zp_out, rattrs)
        if not np.array_equal(want, got):
            return False
    return True


def _tvm_mean(call: Call, args, mode: str):
    """``qnn.mean`` as TVM's ``cast -> mean -> qnn.requantize``, or None to keep it."""
    a = call.attrs
    data_type = call.args[0].type_or_none
    params = args[1:]
    if (
        mode == "qnn"
        or a.semantics != "tflite"
        or data_type is None
        or data_type.dtype not in _QRANGE
        or not all(type(p) is Constant and p.data.size == 1 for p in params)
    ):
        return None
    axes = range(len(data_type.shape)) if not a.axis else a.axis
    axes = {ax % len(data_type.shape) for ax in axes}
    if a.exclude:
        axes = set(range(len(data_type.shape))) - axes
    n = int(np.prod([data_type.shape[ax] for ax in axes])) if axes else 1
    if mode == "tvm" and not (
        axes and tvm_mean_is_exact(n, data_type.dtype, [p.data.reshape(()) for p in params])
    ):
        return None
    cast = get_op("cast")(args[0], dtype="int32")
    mean = get_op("mean")(cast, axis=a.axis, keepdims=a.keepdims, exclude=a.exclude)
    return get_op("qnn.requantize")(mean, *params, out_dtype=data_type.dtype, span=call.span)


class _TvmGraph(ExprMutator):
    def __init__(self, mean: str = "tvm"):
        super().__init__()
        self.mean = mean

    def rewrite_call(self, call: Call, op, args):
        name = getattr(op, "name", None)
        if name == "qnn.mean":
            rewritten = _tvm_mean(call, args, self.mean)
            if rewritten is not None:
                return rewritten
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


def tvm_graph(mod: IRModule, mean: str = "tvm") -> IRModule:
    """``mod`` (from partita's TFLite import) in the form TVM's TFLite frontend gives: regular
    convolution weights HWIO, all-zero per-channel kernel zero points as a scalar 0, and MEAN
    as ``cast -> mean -> qnn.requantize`` as ``mean`` says (module docstring)."""
    if mean not in MEAN_MODES:
        raise ValueError(f"mean must be one of {', '.join(MEAN_MODES)}, got {mean!r}")
    out = IRModule({}, mod.attrs)
    for name, fn in mod.items():
        out[name] = fn.with_body(_TvmGraph(mean).visit(fn.body))
    return out


def from_tflite(model, shape_dict=None, dtype_dict=None, layout: str = "tvm", mean: str = "tvm"):
    """TVM's ``relay.frontend.from_tflite(model, shape_dict, dtype_dict) -> (mod, params)``:
    ``model`` a path or the file's bytes; the weights are bound constants, so ``params`` is
    empty. ``layout="tvm"`` gives TVM's graph (``tvm_graph``, with ``mean``: "tvm" TVM's MEAN
    where it is exact, "tvm_always" everywhere, "qnn" never), ``"tflite"`` partita's own."""
    from partita.frontends.tflite import from_tflite as _from_tflite

    if layout not in ("tvm", "tflite"):
        raise ValueError(f"layout must be 'tvm' or 'tflite', got {layout!r}")
    if mean not in MEAN_MODES:
        raise ValueError(f"mean must be one of {', '.join(MEAN_MODES)}, got {mean!r}")
    if isinstance(model, (bytes, bytearray)) or isinstance(model, str):
        mod = _from_tflite(model, shape_dict)
    else:
        mod = _from_tflite(bytes(model), shape_dict)
    return (tvm_graph(mod, mean) if layout == "tvm" else mod), {}


__all__ = ["from_tflite", "tvm_graph", "tvm_mean_is_exact"]
