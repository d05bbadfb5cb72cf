"""Lower a host function to kernels: fuse, precompute constants, plan buffers.

    qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip]   one CONV kernel (depthwise too)
    qnn.dense  -> [nn.bias_add] -> qnn.requantize -> [clip]   one FC kernel
    any int8/uint8 -> int8/uint8 function of one value         LUT (256 entries, from the op)
    qnn.add/subtract/mul of two 8-bit tensors, per-tensor     LUT2 (256 x 256, from the op)
    qnn.mean over H, W ("tflite"), nn.max_pool2d, reshape      MEAN, MAXPOOL, COPY
    transpose (any dtype)                                        TRANSPOSE
    float32 mean over H, W of dequantized 8-bit data             FMEAN
    float16 products, norms, reductions, pools: float32 kernels between casts (half_lower)

Tables are evaluated with the op's own reference implementation at compile time, so those kernels
are exact by construction; conv, FC and mean carry TFLite's fixed-point output stage (multiplier
and shift per channel, computed here as QuantizeMultiplier does). Anything else is refused with
the op's name: the host part of the model then needs ``ref``.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, Function, Tuple, TupleGetItem, TupleType, Var

from . import (  # noqa: F401  (importing a lowering module registers its lowerings: registry.py)
    conv_lower,
    convt_lower,
    einsum_lower,
    extra_lower,
    fdense_lower,
    float_lower,
    gather_lower,
    int_lower,
    int_products,
    q16_lower,
    qbinary_lower,
    qint_lower,
    qleaky_lower,
    qlower,
    reduce_lower,
    runtime_weights,
    spatial_lower,
)
from .conv_lower import ungrouped, weight_only
from .errors import LLVMError
from .float_lower import lower_view, strides_for
from .half_lower import lower_half, lower_tuple_item
from .kinds import Kind
from .plan import Kernel, Plan
from .qlower import mean_params, output_stage
from .registry import CORE, FLOAT, lowering_for, lowers
from .tables import const_array, lut2_table, lut_table
from .vplan import (
    FLOAT_STAGES,
    as_rows,
    im2col_as_1x1,
    split_worthwhile,
    vector_kernel,
    write_into_halos,
)
from .walk import value_order

EIGHT_BIT = ("int8", "uint8")
MEAN_ROW = 1 << 14  # MEAN sums up to this many channels at once, in a stack row of int32


class LowerContext:
    """The state of lowering one host function, and the API a lowering function uses:

        low.src(expr)                   the buffer holding ``expr`` (a constant: a CONST copy)
        low.emit(kind, call, inputs, params, arrays)   a kernel computing ``call``
        low.scratch(kind, inputs, shape, dtype, params, arrays)   a kernel into a new buffer
        low.absorb(node)                ``node`` is computed inside another kernel (fused)
        low.defer(call)                 ``call`` waits to be inlined into its reader's EWISE
        low.deferred(expr)              the call waiting to be inlined for ``expr``, or None
        low.only_user(node, op)         ``node``'s single reader if it is ``op``, else None
        low.users_of(node), low.outputs, low.is_input_buffer(i)
        low.has_buffer(expr), low.alias(node, other)   buffers already computed / shared
        low.lower(call)                 lower another call now (float16 widening's casts)
        low.memo(name)                  a dict cached for this function (folded weights, ...)
        low.isa, low.threads            the kernel family and the thread count asked for

    Lowering functions (``@lowers`` in registry.py) receive it as ``low``.
    """

    def __init__(self, fn: Function, isa: str = "plain", threads: int = 1):
        self.fn, self.isa, self.threads = fn, isa, threads
        self.buffers: list[tuple[tuple[int, ...], str]] = []
        self.ids: dict[int, int] = {}
        self.kernels: list[Kernel] = []
        self.users: dict[int, list] = {}
        self._absorbed: set[int] = set()
        self._deferred: dict[int, Call] = {}
        self._memos: dict[str, dict] = {}
        self._alive: list = []  # nodes made while lowering: their ids stay unique while we run

    def buffer(self, expr) -> int:
        """A new buffer for ``expr``'s value."""
        ty = expr.checked_type
        self.buffers.append((tuple(int(d) for d in ty.shape), ty.dtype))
        self.ids[id(expr)] = len(self.buffers) - 1
        return self.ids[id(expr)]

    def absorb(self, node) -> None:
        """``node`` is computed inside another op's kernel: it gets no kernel of its own."""
        self._absorbed.add(id(node))

    def absorbed(self, node) -> bool:
        """Whether ``node`` was fused into another op's kernel (``absorb``)."""
        return id(node) in self._absorbed

    def defer(self, call: Call) -> None:
        """``call`` gets no kernel now: its only reader's EWISE kernel inlines it."""
        self._deferred[id(call)] = call

    def deferred(self, expr) -> Call | None:
        """The call ``expr`` waiting to be inlined (``defer``), or None."""
        return self._deferred.get(id(expr))

    def memo(self, name: str) -> dict:
        """A dict named ``name`` that lives as long as this lowering (lowerings' caches)."""
        return self._memos.setdefault(name, {})

    def keep_alive(self, node) -> None:
        """Hold ``node`` (made while lowering) so no later node reuses its ``id``."""
        self._alive.append(node)

    def has_buffer(self, expr) -> bool:
        """Whether ``expr``'s value is already in a buffer (a parameter or a kernel's output)."""
        return id(expr) in self.ids

    def alias(self, node, other) -> None:
        """``node``'s value is ``other``'s buffer."""
        self.ids[id(node)] = self.ids[id(other)]

    def is_input_buffer(self, index: int) -> bool:
        """Whether buffer ``index`` is one of the function's parameters (memory we do not own)."""
        return index < len(self.fn.params)

    @property
    def outputs(self) -> list:
        """The function's results (the fields of a returned tuple)."""
        return self.fn.body.fields if isinstance(self.fn.body, Tuple) else [self.fn.body]

    def users_of(self, node) -> list:
        """The calls that read ``node``."""
        return self.users.get(id(node), [])

    def only_user(self, node, name):
        """The single reader of ``node`` if it is op ``name`` and ``node`` is not an output."""
        if any(node is o for o in self.outputs):
            return None
        users = self.users_of(node)
        if len(users) == 1 and getattr(users[0].op, "name", "") == name:
            return users[0]
        return None

    def run(self) -> Plan:
        body = self.fn.body
        if isinstance(body, Call) and isinstance(body.checked_type, TupleType):
            # a tuple-valued op returned whole (split, batch_norm, dynamic_quantize): its fields,
            # each lowered as the TupleGetItem that reads it
            fields = body.checked_type.fields
            items = [TupleGetItem(body, i).with_type(t) for i, t in enumerate(fields)]
            body = Tuple(items).with_type(body.checked_type)
            self.fn = Function(self.fn.params, body, self.fn.ret_type, self.fn.attrs)
        for p in self.fn.params:
            self.buffer(p)
        order = value_order(self.fn.body)
        for node in order:
            if isinstance(node, Call):
                for a in node.args:
                    self.users.setdefault(id(a), []).append(node)
        for node in order:
            if isinstance(node, Call) and isinstance(node.checked_type, TupleType):
                continue  # tuple-valued: lowered through the TupleGetItems that read it
            if isinstance(node, Call) and not self.absorbed(node):
                self.lower(node)
            elif isinstance(node, TupleGetItem) and lower_tuple_item(self, node):
                continue
            elif isinstance(node, Tuple) and self.gathered(node):
                continue  # read only by concatenations (their GATHER reads the fields), einsums
            elif isinstance(node, TupleGetItem) or (
                isinstance(node, Tuple) and node is not self.fn.body
            ):
                readers = {u.op.name for u in self.users.get(id(node), []) if hasattr(u.op, "name")}
                what = (node.tuple_value.short() if isinstance(node, TupleGetItem)
                        else "a tuple" + (f" read by {', '.join(sorted(readers))}" * bool(readers)))
                raise LLVMError(f"llvm cannot compile {what} yet (a tuple inside a host segment)")
        outs = self.fn.body.fields if isinstance(self.fn.body, Tuple) else [self.fn.body]
        for o in outs:  # a tuple-valued op returned whole (batch_norm's three fields)
            if id(o) not in self.ids:
                raise LLVMError(f"llvm cannot compile {o.short()} yet (a tuple-valued output)")
        plan = Plan(
            self.buffers,
            self.kernels,
            [self.ids[id(p)] for p in self.fn.params],
            [self.ids[id(o)] for o in outs],
        )
        write_into_halos(plan)
        return plan

    def gathered(self, node: Tuple) -> bool:
        users = [getattr(u.op, "name", "") for u in self.users.get(id(node), [])]
        return bool(users) and set(users) <= {"concatenate", "qnn.concatenate", "einsum"}

    def src(self, expr) -> int:
        """The buffer holding ``expr``'s value; a constant read as data is first copied into
        one by a CONST kernel."""
        if id(expr) not in self.ids and isinstance(expr, Constant):
            # a constant tensor read as data: a CONST kernel copies it into a buffer
            self.emit(Kind.CONST, expr, [], {}, {"value": np.ascontiguousarray(const_array(expr))})
        if id(expr) not in self.ids:
            raise LLVMError(f"llvm: operand {expr.short()} is not computed by this segment")
        return self.ids[id(expr)]

    def lower(self, call: Call) -> None:
        """Lower ``call``: three cross-cutting steps, then the op's registered lowerings in
        their order (registry.lowering_for); an LLVMError names the op if none takes it."""
        name = call.op.name if not isinstance(call.op, Function) else "<function>"
        if weight_only(self, call):
            return None  # a constant expression folded into float convolutions' weights
        if any(self.deferred(a) is not None for a in call.args) and any(
            fn(self, call) for fn in lowering_for(name, at_least=FLOAT)
        ):
            return None  # an elementwise producer waits to be fused into this EWISE kernel
        if lower_half(self, call):
            return None  # float16 computed in float32 between casts
        for fn in lowering_for(name):  # each returns False to decline
            if fn(self, call):
                return None
        raise LLVMError(f"llvm cannot compile {where(call)} yet (build with the 'ref' host for it)")

    def emit(self, kind, call, inputs, params=None, arrays=None) -> None:
        """A kernel of ``kind`` reading buffers ``inputs`` into a new buffer for ``call``."""
        if kind == Kind.MEAN:  # sums a row of channels at once in int32 where they fit
            params["row_sums"] = params["inner"] <= MEAN_ROW and params["n"] < (1 << 23)
        kind = Kind(kind)
        out = self.buffer(call)
        name = f"{kind.lower()}_{len(self.kernels)}"
        self.kernels.append(Kernel(kind, name, inputs, out, params or {}, arrays or {}))

    def scratch(self, kind, inputs, shape, dtype: str, params, arrays=None) -> int:
        """A kernel writing an intermediate buffer no IR value names (IM2COL's windows)."""
        kind = Kind(kind)
        self.buffers.append((tuple(int(d) for d in shape), dtype))
        out = len(self.buffers) - 1
        name = f"{kind.lower()}_{len(self.kernels)}"
        self.kernels.append(Kernel(kind, name, list(inputs), out, params, arrays or {}))
        return out

    def mac(self, call: Call, where: str) -> None:
        """qnn.conv2d / qnn.dense with its bias, requantize and clip: one CONV, DWCONV or FC
        kernel (a vector one when the ISA allows)."""
        chain = self.mac_chain(call, where)
        by = {("nn.bias_add" if c.op.name == "add" else c.op.name): c for c in chain}
        params, arrays = self.mac_stage(call, by, where)
        kind = self.mac_geometry(call, params, arrays, where)
        for c in chain[1:]:
            self.absorb(c)
        x = call.args[0]
        inputs, in_shape = [self.src(x)], x.checked_type.shape
        if (params["pairs"] and kind == Kind.CONV and in_shape[3] % 2
                and call.attrs.accumulate == "vpmaddubsw"):
            inputs, in_shape = self.im2col(call, params, arrays, inputs[0])
        out_shape = call.checked_type.shape
        if kind == Kind.FC:  # leading axes of a rank-3 (transformer) input are rows
            in_shape, out_shape = as_rows(in_shape), as_rows(out_shape)
        vector = vector_kernel(kind, params, arrays, in_shape, out_shape, self.isa,
                               overread=not self.is_input_buffer(inputs[0]))
        if vector is None and params["pairs"]:
            why = ("needs the vector kernels (-isa=vnni or avx2)" if self.isa == "plain" else
                   f"runs on the vector kernels, which do not take {params['rounding']!r} "
                   "requantization")
            raise LLVMError(
                f"llvm: {where}: accumulate={call.attrs.accumulate!r} (int16 pair saturation) "
                f"{why}"
            )
        if vector is None and params["rounding"] in FLOAT_STAGES:
            raise LLVMError(
                f"llvm: {where}: {params['rounding']!r} requantization needs the vector kernels "
                f"(-isa=vnni or avx2) and int8 weights"
            )
        if vector is None:
            del arrays["fscale"]
        else:
            kind, params, arrays, scratch = vector
            if self.threads > 1 and split_worthwhile(kind, params):
                params["threads"] = 2
            if scratch:
                self.buffers.append(((scratch,), "uint8"))
                inputs.append(len(self.buffers) - 1)
        kind = Kind(kind)
        out = self.buffer(chain[-1])
        name = f"{kind.lower()}_{len(self.kernels)}"
        batch = int(x.checked_type.shape[0]) if call.op.name == "qnn.conv2d" else 1
        if batch > 1:  # the kernel computes one image; kernel_function loops over them
            params = {**params, "batch": batch}
        self.kernels.append(Kernel(kind, name, inputs, out, params, arrays))

    def mac_chain(self, call: Call, where: str) -> list:
        """The accumulator and the ops fused after it: [bias add], requantize, [clip]; or
        [bias add] alone (an int32 accumulator read as such)."""
        chain, node = [call], call
        for op in ("nn.bias_add", "qnn.requantize", "clip"):
            nxt = self.only_user(node, op)
            if nxt is None and op == "nn.bias_add":
                nxt = self.bias_add(node)
            if nxt is not None:
                chain.append(nxt)
                node = nxt
            elif op == "qnn.requantize":  # the int32 accumulator itself (qlower._raw_stage)
                break
        if call.op.name == "qnn.conv2d" and call.attrs.data_layout != "NHWC":
            raise LLVMError(f"llvm: {where}: {call.attrs.data_layout} convolutions")
        return chain

    def mac_stage(self, call: Call, by: dict, where: str) -> tuple[dict, dict]:
        """The output stage's parameters and per-channel arrays (qlower.output_stage)."""
        params, arrays = output_stage(call, by, where)
        params["pairs"] = self.pairs(call, where)
        if params["pairs"]:
            params["accumulate"] = call.attrs.accumulate
        return params, arrays

    def mac_geometry(self, call: Call, params: dict, arrays: dict, where: str) -> str:
        """The kernel kind (FC, CONV, DWCONV); the weights (OHWI for convolutions) and the
        convolution's strides, dilation and padding go into ``arrays`` / ``params``."""
        x = call.args[0]
        if call.op.name == "qnn.dense":
            if x.checked_type.ndim < 2:
                raise LLVMError(f"llvm: {where}: dense on rank-{x.checked_type.ndim} data")
            arrays["weights"] = const_array(call.args[1])
            return Kind.FC
        a = call.attrs
        w = np.transpose(const_array(call.args[1]), [a.kernel_layout.index(c) for c in "OHWI"])
        cin, n_out = x.checked_type.shape[3], call.checked_type.shape[-1]
        if a.groups == 1:
            kind = Kind.CONV
        elif a.groups == cin == n_out and w.shape[3] == 1:
            kind = Kind.DWCONV
        else:  # grouped: one convolution whose weights are w_zp (an effective 0) off-group
            w = ungrouped(w, a.groups, cin, arrays["w_zp"])
            kind = Kind.CONV
        arrays["weights"] = w
        params.update(strides=list(a.strides), dilation=list(a.dilation), padding=list(a.padding))
        return kind

    def bias_add(self, node):
        """A plain ``add`` of a constant int32 vector along the last axis (ONNX's QGemm C) read
        as the accumulator's bias, or None."""
        add = self.only_user(node, "add")
        if add is None or add.args[0] is not node or not isinstance(add.args[1], Constant):
            return None
        bias, n = const_array(add.args[1]), node.checked_type.shape[-1]
        if bias.dtype != np.int32 or bias.size != n or bias.shape[-1:] != (n,):
            return None
        if add.checked_type.shape != node.checked_type.shape:
            return None
        return add

    def pairs(self, call: Call, where: str) -> bool:
        """Whether the MAC kernel saturates pairs of products to int16 (accumulate=
        "vpmaddubsw" / "vpmaddubsw_tap"): its dot products pair the channels within each tap
        (zero-padded to a multiple of 4: "vpmaddubsw_tap"), which is the im2col order's pairing
        when the channel count is even; an odd one goes through ``im2col``."""
        sums = call.attrs.accumulate
        if sums == "exact":
            return False
        if np.any(const_array(call.args[3])):
            raise LLVMError(f"llvm: {where}: accumulate={sums!r} with weight zero points")
        if call.op.name == "qnn.conv2d" and call.attrs.groups != 1:
            depthwise = call.attrs.groups == call.checked_type.shape[-1] == (
                call.args[0].checked_type.shape[-1])
            if not (depthwise and sums == "vpmaddubsw"):
                raise LLVMError(f"llvm: {where}: accumulate={sums!r} in a grouped convolution")
        return True

    def im2col(self, call: Call, params: dict, arrays: dict, src: int):
        """An odd channel count pairs products across kernel taps (im2col order): copy the
        windows into an (OH, OW, KH*KW*C) buffer (IM2COL, padding = the input zero point) and
        run the convolution as a 1x1 one over it, whose pairs are the same."""
        n = call.checked_type.shape[0]
        kh, kw = arrays["weights"].shape[1:3]  # OHWI
        p = {k: params[k] for k in ("strides", "dilation", "padding", "in_zp")}
        if n > 1:
            p["batch"] = int(n)
        shape = im2col_as_1x1(call.checked_type.shape, params, arrays)
        out = self.scratch(Kind.IM2COL, [src], shape, call.args[0].checked_type.dtype,
                           {**p, "kernel": [kh, kw]})
        return [out], shape

    def mean(self, call: Call, where: str) -> None:
        x = call.args[0]
        shape = [int(d) for d in x.checked_type.shape]
        consts = [const_array(a).reshape(-1)[0] for a in call.args[1:]]
        a = call.attrs
        params = mean_params(shape, a.axis, a.semantics, a.exclude, consts,
                             call.checked_type.dtype, keepdims=bool(a.keepdims))
        if params is None:
            axes = tuple(sorted(i % len(shape) for i in a.axis))
            raise LLVMError(f"llvm: {where}: mean over axes {axes} of rank {len(shape)}")
        self.emit(Kind.MEAN, call, [self.src(x)], params)



def where(call: Call) -> str:
    """The op's name and span, as a refusal names them."""
    name = call.op.name if not isinstance(call.op, Function) else "<function>"
    return f"{name}" + (f" ({call.span})" if call.span is not None else "")


def _data(call: Call) -> tuple[list, list, str | None]:
    """The operands that are not constants, their dtypes, the result's dtype."""
    data = [a for a in call.args if not isinstance(a, Constant)]
    out = call.checked_type.dtype if hasattr(call.checked_type, "dtype") else None
    return data, [a.checked_type.dtype for a in data], out


@lowers("qnn.conv2d", "qnn.dense", priority=CORE)
def lower_mac(low: LowerContext, call: Call) -> bool:
    """qnn.conv2d / qnn.dense with its bias, requantize and clip: CONV, DWCONV or FC."""
    low.mac(call, where(call))
    return True


@lowers("strided_slice", priority=CORE + 1)
def lower_strided_slice(low: LowerContext, call: Call) -> bool:
    """strided_slice: an EWISE copy at an affine index map (float_lower.lower_view)."""
    lower_view(low, call, call)
    return True


@lowers("reshape", "squeeze", "expand_dims", priority=CORE + 2)
def lower_copy(low: LowerContext, call: Call) -> bool:
    """A view that keeps the element order: COPY."""
    low.emit(Kind.COPY, call, [low.src(_data(call)[0][0])])
    return True


@lowers("transpose", priority=CORE + 3)
def lower_transpose(low: LowerContext, call: Call) -> bool:
    """transpose of any dtype: TRANSPOSE."""
    low.emit(Kind.TRANSPOSE, call, [low.src(_data(call)[0][0])], {"perm": _perm(call)})
    return True


@lowers("qnn.mean", priority=CORE + 4)
def lower_qmean(low: LowerContext, call: Call) -> bool:
    """qnn.mean with TFLite's, ONNX's or TFLite's legacy arithmetic: MEAN."""
    if call.attrs.semantics not in ("tflite", "onnx", "tflite_legacy"):
        return False
    low.mean(call, where(call))
    return True


@lowers("mean", priority=CORE + 5)
def lower_fmean(low: LowerContext, call: Call) -> bool:
    """A float32 mean over H, W of dequantized 8-bit data (``_exact_float_mean``): FMEAN."""
    if not _exact_float_mean(call):
        return False
    low.emit(Kind.FMEAN, call, [low.src(_data(call)[0][0])])
    return True


@lowers("nn.max_pool2d", priority=CORE + 6)
def lower_maxpool(low: LowerContext, call: Call) -> bool:
    """nn.max_pool2d of 8-bit or float32 NHWC data: MAXPOOL."""
    data, dtypes, _ = _data(call)
    if not (dtypes[0] in (*EIGHT_BIT, "float32") and call.attrs.layout == "NHWC"):
        return False
    a = call.attrs
    params = {
        "pool": list(a.pool_size),
        "strides": list(a.strides),
        "padding": list(a.padding),
        "dilation": list(a.dilation),
    }
    low.emit(Kind.MAXPOOL, call, [low.src(data[0])], params)
    return True


@lowers(kinds=("elemwise", "broadcast"), priority=CORE + 7)
def lower_lut(low: LowerContext, call: Call) -> bool:
    """Any function of one 8-bit value (scalar constants aside) to 8 bits or float32: LUT, a
    256-entry table made with the op's own reference."""
    data, dtypes, out = _data(call)
    consts_scalar = all(const_array(a).ndim == 0 for a in call.args if isinstance(a, Constant))
    if not (
        len(data) == 1
        and call.op.kind in ("elemwise", "broadcast")  # a table maps each element alone
        and call.checked_type.shape == data[0].checked_type.shape
        and dtypes[0] in EIGHT_BIT
        and out in (*EIGHT_BIT, "float32")
        and consts_scalar
        and call.args[0] is data[0]
    ):
        return False
    low.emit(Kind.LUT, call, [low.src(data[0])], {}, {"table": lut_table(call, dtypes[0], out)})
    return True


@lowers("qnn.quantize", priority=CORE + 8)
def lower_quantize(low: LowerContext, call: Call) -> bool:
    """qnn.quantize of float32 with constant parameters: QUANT."""
    data, dtypes, out = _data(call)
    if not (
        all(isinstance(a, Constant) for a in call.args[1:])
        and dtypes[0] == "float32"
        and out in (*EIGHT_BIT, "int16", "int32")
        and call.attrs.semantics in ("tflite", "onnx", "fbgemm")
    ):
        return False
    low.emit(Kind.QUANT, call, [low.src(data[0])], *quant_params(call, out))
    return True


@lowers("qnn.add", "qnn.subtract", "qnn.mul", "qnn.squared_difference", priority=CORE + 9)
def lower_lut2(low: LowerContext, call: Call) -> bool:
    """A per-tensor binary op of two 8-bit tensors: LUT2, a 256 x 256 table made with the op's
    own reference (vector gathers when the ISA has them and no operand broadcasts)."""
    _, _, out = _data(call)
    pair = call.args[:2]
    if not (
        all(const_array(a).ndim == 0 for a in call.args[2:])
        and {a.checked_type.dtype for a in pair} <= set(EIGHT_BIT)
        and out in EIGHT_BIT
    ):
        return False
    data, dtypes = list(pair), [a.checked_type.dtype for a in pair]
    oshape = call.checked_type.shape
    strides = [strides_for(d.checked_type.shape, oshape) for d in data]
    params = {"out_shape": list(oshape), "strides": strides}
    table = lut2_table(call, dtypes, out)
    if low.isa != "plain" and all(d.checked_type.shape == oshape for d in data):
        # vector gathers of 32-bit words at byte offsets: 3 bytes of slack at the end
        params.update(gather="vnni" if low.isa == "amx" else low.isa, **(
            {"threads": 2} if low.threads > 1 and np.prod(oshape) >= 4096 else {}))
        table = np.concatenate([table.ravel(), np.zeros(4, table.dtype)])
    low.emit(Kind.LUT2, call, [low.src(d) for d in data], params, {"table": table})
    return True


def _exact_float_mean(call: Call) -> bool:
    """A float32 mean over H and W of NHWC data dequantized from 8 bits (per-tensor): its values
    span at most 8 binades of 24-bit mantissas, so their float64 sum is exact in any order and
    the kernel's sequential sum equals the reference's (numpy's pairwise one)."""
    x = call.args[0]
    shape = x.checked_type.shape
    axes = tuple(sorted(a % len(shape) for a in call.attrs.axis or ()))
    if call.checked_type.dtype != "float32" or len(shape) != 4 or axes != (1, 2):
        return False
    if call.attrs.exclude or not call.attrs.keepdims or shape[1] * shape[2] > 1 << 20:
        return False
    dequantize = isinstance(x, Call) and getattr(x.op, "name", "") == "qnn.dequantize"
    src = x.args[0] if dequantize else None
    return (
        src is not None
        and src.checked_type.dtype in EIGHT_BIT
        and all(isinstance(a, Constant) and const_array(a).size == 1 for a in x.args[1:])
    )


def _perm(call: Call) -> list[int]:
    rank = len(call.args[0].checked_type.shape)
    axes = call.attrs.axes
    return [a % rank for a in axes] if axes is not None else list(range(rank))[::-1]


def quant_params(call: Call, out: str) -> tuple[dict, dict]:
    """QUANT's parameters and per-channel arrays (one entry per tensor when per-tensor): the
    channel of flat element e is (e // inner) % C along the op's axis."""
    shape = [int(d) for d in call.args[0].checked_type.shape]
    scale = np.asarray(const_array(call.args[1]), np.float32).reshape(-1)
    zp = np.asarray(const_array(call.args[2]), np.int64).reshape(-1)
    axis = call.attrs.axis % len(shape) if shape else 0
    channels = max(scale.size, zp.size)
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64)) if channels > 1 else 1
    params = {"C": channels, "inner": inner, "round": call.attrs.semantics, "out_dtype": out}
    arrays = {"scale": np.broadcast_to(scale, (channels,)).astype(np.float32),
              "zp": np.broadcast_to(zp, (channels,)).astype(np.int32)}
    return params, arrays


def lower(fn: Function, isa: str = "plain", threads: int = 1) -> Plan:
    """The kernels of host function ``fn`` (an LLVMError names the first op it cannot take);
    ``isa`` picks the conv/dense kernels: vnni, avx2 (vector) or plain (scalar loops);
    ``threads`` 2 splits the large float matrix products over a second thread."""
    return LowerContext(fn, isa, threads).run()


__all__ = ["EIGHT_BIT", "Kernel", "LLVMError", "LowerContext", "Plan", "Var", "lower", "where"]
