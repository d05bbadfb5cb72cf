"""Lower a host function to kernels: fuse, precompute constants, plan buffers.

    qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip]   one CONV kernel (depthwise too)
    qnn.dense  -> [nn.bias_add] -> qnn.requantize -> [clip]   one FC kernel
    any int8/uint8 -> int8/uint8 function of one value         LUT (256 entries, from the op)
    qnn.add/subtract/mul of two 8-bit tensors, per-tensor     LUT2 (256 x 256, from the op)
    qnn.mean over H, W ("tflite"), nn.max_pool2d, reshape      MEAN, MAXPOOL, COPY
    transpose (any dtype)                                        TRANSPOSE
    float32 mean over H, W of dequantized 8-bit data             FMEAN
    float16 products, norms, reductions, pools: float32 kernels between casts (half.py)

Tables are evaluated with the op's own reference implementation at compile time, so those kernels
are exact by construction; conv, FC and mean carry TFLite's fixed-point output stage (multiplier
and shift per channel, computed here as QuantizeMultiplier does). Anything else is refused with
the op's name: the host part of the model then needs ``ref``.
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind
from partita.backends.llvm.plan import Kernel, Plan

from partita.ir import Call, Constant, Function, If, Let, Tuple, TupleGetItem, TupleType, Var
from partita.ir.graph import dataflow_order
from partita.ir.refs import REF_NODES

from .dynq_epilogue import dynq_epilogues
from .flip_input import flip_into_producers
from .float_bn_reads import float_bn_reads
from .float_conv import weight_only
from .float_halos import float_into_pads
from .half import lower_half, lower_tuple_item
from .int8_halos import write_into_halos
from .registry import FLOAT, lowering_for
from .tables import const_array

EIGHT_BIT = ("int8", "uint8")
# -threads=2: a TRANSPOSE or an int8 IM2COL (one image) of this many output elements or more
# splits its first axis longer than 1 over both threads (emit/int8/scalar.py first_axis)
SPLIT_COPY = 1 << 16
MEAN_ROW = 1 << 14  # MEAN sums up to this many channels at once, in a stack row of int32


class LowerContext:
    """The state of lowering one host function, and the API a lowering function uses:

        low.src(expr)                   the buffer holding ``expr`` (a constant: a CONST copy)
        low.emit(kind, call, inputs, params, arrays)   a kernel computing ``call``
        low.scratch(kind, inputs, shape, dtype, params, arrays)   a kernel into a new buffer
        low.workspace(size)             a scratch buffer of bytes for a kernel's own use
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

    def __init__(self, fn: Function, isa: str = "plain", threads: int = 1,
                 winograd: bool = True):
        self.fn, self.isa, self.threads = fn, isa, threads
        self.winograd = winograd  # float 3 x 3 convolutions may take Winograd's form
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
        # inputs first; control flow (If, Let, references) is a leaf: refused where it is read
        order = dataflow_order(self.fn.body, leaves=(If, Let, *REF_NODES))
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
        flip_into_producers(plan)
        float_into_pads(plan)
        float_bn_reads(plan)
        dynq_epilogues(plan)
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
        kind = Kind(kind)
        if kind == Kind.MEAN:  # sums a row of channels at once in int32 where they fit
            params["row_sums"] = params["inner"] <= MEAN_ROW and params["n"] < (1 << 23)
        out = self.buffer(call)
        name = f"{kind.lower()}_{len(self.kernels)}"
        self.kernels.append(Kernel(kind, name, inputs, out, params or {}, arrays or {}))

    def workspace(self, size: int) -> int:
        """A uint8 buffer of ``size`` bytes no IR value names, that a kernel uses as scratch
        memory (the vector convolutions' padded input)."""
        self.buffers.append(((int(size),), "uint8"))
        return len(self.buffers) - 1

    def scratch(self, kind, inputs, shape, dtype: str, params, arrays=None) -> int:
        """A kernel writing an intermediate buffer no IR value names (IM2COL's windows)."""
        kind = Kind(kind)
        self.buffers.append((tuple(int(d) for d in shape), dtype))
        out = len(self.buffers) - 1
        name = f"{kind.lower()}_{len(self.kernels)}"
        self.kernels.append(Kernel(kind, name, list(inputs), out, params, arrays or {}))
        return out

def where(call: Call) -> str:
    """The op's name and span, as a refusal names them."""
    name = call.op.name if not isinstance(call.op, Function) else "<function>"
    return f"{name}" + (f" ({call.span})" if call.span is not None else "")


def data_operands(call: Call) -> tuple[list, list, str | None]:
    """The operands that are not constants, their dtypes, the result's dtype."""
    data = [a for a in call.args if not isinstance(a, Constant)]
    out = call.checked_type.dtype if hasattr(call.checked_type, "dtype") else None
    return data, [a.checked_type.dtype for a in data], out


def lower(fn: Function, isa: str = "plain", threads: int = 1, winograd: bool = True) -> Plan:
    """The kernels of host function ``fn`` (an LLVMError names the first op it cannot take);
    ``isa`` picks the conv/dense kernels: vnni, avx2 (vector) or plain (scalar loops);
    ``threads`` 2 splits the large float matrix products over a second thread; ``winograd``
    False keeps float 3 x 3 convolutions direct (lower/float_winograd.py)."""
    return LowerContext(fn, isa, threads, winograd).run()


__all__ = ["EIGHT_BIT", "Kernel", "LLVMError", "LowerContext", "Plan", "Var", "lower", "where"]
