"""The kernel emitter (the emit context, composed of one instance of each kernel family), the
drivers, and what a plan's object code is made from: constants in argument order, signatures
(kernels of one signature share a function), the modules of a parallel compile. Each kernel is
``void name(ptr in..., ptr out, ptr const...)``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.float.bmm import FloatBatchedProducts
from partita.backends.llvm.emit.float.chunks import DenseChunks
from partita.backends.llvm.emit.float.conv import FloatConvKernels
from partita.backends.llvm.emit.float.depthwise import FloatDepthwiseKernels
from partita.backends.llvm.emit.float.gemm import FloatGemm
from partita.backends.llvm.emit.float.kernels import FloatKernels
from partita.backends.llvm.emit.float.rows import RowKernels
from partita.backends.llvm.emit.float.scalar import FloatScalarKernels
from partita.backends.llvm.emit.float.spatial import SpatialKernels
from partita.backends.llvm.emit.float.winograd import FloatWinograd
from partita.backends.llvm.emit.int8.amx import AMXTiles
from partita.backends.llvm.emit.int8.dynq_dense import DynqDenseKernels
from partita.backends.llvm.emit.int8.exact_avx2 import ExactAVX2Steps
from partita.backends.llvm.emit.int8.pack_input import InputPacking
from partita.backends.llvm.emit.int8.qbinary import QBinaryKernels
from partita.backends.llvm.emit.int8.quant_vectors import QuantVectors
from partita.backends.llvm.emit.int8.scalar import ScalarKernels
from partita.backends.llvm.emit.int8.tables import TableKernels
from partita.backends.llvm.emit.int8.tile_epilogue import TileEpilogue
from partita.backends.llvm.emit.int8.transformer import QTransformerKernels
from partita.backends.llvm.emit.int8.vconv import VectorKernels
from partita.backends.llvm.emit.int8.vdepthwise import DepthwiseKernels
from partita.backends.llvm.emit.int8.vector_output_stage import OutputStage
from partita.backends.llvm.emit.int8.vnni_dense import VNNIDense
from partita.backends.llvm.emit.int8.wide_mac import WideMacKernels
from partita.backends.llvm.kinds import Kind, emitter_for
from partita.backends.llvm.plan import Kernel
from partita.backends.llvm.runtime.threads import ALONE, ThreadPool

from .base import DRIVER, I8, PTR, TIMED, TSC, VOID, Emitter, Family, c64, for_range
from .data import DataKernels
from .int_products import ProductKernels
from .integer import IntKernels
from .reductions import ReduceKernels
from .softmax16 import Softmax16Kernels

FLOAT_KINDS = (
    Kind.EWISE, Kind.FDENSE, Kind.FBMM, Kind.FSOFTMAX, Kind.FLAYERNORM, Kind.FREDUCE,
    Kind.TAKE, Kind.CONST, Kind.DYNQ_DENSE, Kind.DYNQ, Kind.GATHER, Kind.FIM2COL, Kind.FCONV,
    Kind.FPAD, Kind.FDW, Kind.FGAP, Kind.FCONVT, Kind.FWINO,
)  # fmt: skip


# the kernel families, each one instance per emitter, by the attribute its peers reach it by
# (a family names what it uses of another with ``via("attribute")``, emit/base.py)
FAMILIES = {
    "int8": ScalarKernels, "float_scalar": FloatScalarKernels, "qtransformer": QTransformerKernels,
    "fconv": FloatConvKernels, "fdw": FloatDepthwiseKernels, "floats": FloatKernels,
    "rows": RowKernels, "data": DataKernels,
    "spatial": SpatialKernels, "ints": IntKernels, "gemm": FloatGemm, "vector": VectorKernels,
    "vstage": OutputStage, "vdw": DepthwiseKernels, "products": ProductKernels,
    "qbinary": QBinaryKernels, "reduce": ReduceKernels, "wmac": WideMacKernels, "pool": ThreadPool,
    "softmax16": Softmax16Kernels, "amx": AMXTiles, "exact_avx2": ExactAVX2Steps,
    "tiles": TileEpilogue,
    "qvec": QuantVectors, "vdense": VNNIDense, "dynq": DynqDenseKernels, "pack": InputPacking,
    "tables": TableKernels, "fchunks": DenseChunks, "bmm": FloatBatchedProducts,
    "wino": FloatWinograd,
}


def family_of(fn) -> type[Family]:
    """The family class whose method ``fn`` (an ``@emits`` function) is."""
    owner = fn.__qualname__.split(".")[0]
    for cls in FAMILIES.values():
        if cls.__name__ == owner and cls.__dict__.get(fn.__name__) is fn:
            return cls
    raise ValueError(f"llvm: emitter {fn.__qualname__} is not a method of a kernel family")


class KernelEmitter(Emitter):
    """The emit context of one plan, composed of the kernel families: a kernel of kind K is
    emitted by ``emitter_for(K)`` called on this emitter's instance of its family."""

    def __init__(self, plan):
        super().__init__(plan)
        self.only = self.bodies = None
        self.cargs: dict = {}
        self.families: dict[type, Family] = {}
        for attr, cls in FAMILIES.items():
            setattr(self, attr, cls(self))
            self.families[cls] = getattr(self, attr)

    def emit_kernel(self, k: Kernel) -> ir.Function:
        """The kernel's function, by its kind's registered emitter."""
        fn = emitter_for(k.kind)
        return fn(self.families[family_of(fn)], k)

    def function(self, k: Kernel, n_inputs: int):
        """``void name(ptr in..., ptr out, ptr const...)``; the constants' pointers (weights,
        tables, per-channel parameters, in ``constants(k)`` order) go to ``self.cargs``."""
        names = [name for name, _ in constants(k)]
        ty = ir.FunctionType(VOID, [PTR] * (n_inputs + 1 + len(names)))
        fn = ir.Function(self.module, ty, name=k.name)
        for arg in fn.args:  # buffers that live at once never share memory (memory.py)
            arg.add_attribute("noalias")
        # external: profile() calls each kernel on its own (the driver calls them all)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.cargs = dict(zip(names, fn.args[n_inputs + 1 :]))
        return fn, b, list(fn.args[: n_inputs + 1])

    def globals_of(self, k: Kernel) -> dict:
        return self.cargs

    def emit(
        self, only: set | None = None, driver: bool = True, bodies: set | None = None,
        wholes: set | None = None,
    ) -> ir.Module:
        """One function per distinct kernel signature, and the driver that calls them in order
        with pointers from its table (buffers first, then the constants). With ``only`` (a set
        of signatures) the others are declared, not defined: another module defines them;
        ``driver`` False leaves the drivers out. ``bodies``: the split int8 kernels whose
        row-range function (the heavy code) this module defines (``range_mode``); ``wholes``:
        the split kernels whose one-thread form (``{name}_whole``, what partita_run_alone
        calls) this module defines (None: every one)."""
        self.only, self.bodies = only, bodies
        fns, made, whole_fns, whole_made = [], {}, [], {}
        for k, args in zip(self.plan.kernels, call_args(self.plan)):
            sig = signature(self.plan, k)
            if sig not in made:
                if only is None or sig in only:
                    made[sig] = self.kernel_function(k)
                elif bodies and sig in bodies:  # only its row-range function lives here
                    made[sig] = self.kernel_function(k)
                else:  # defined in another part, called by the driver
                    ty = ir.FunctionType(VOID, [PTR] * len(args))
                    made[sig] = ir.Function(self.module, ty, name=k.name)
                if k.params.get("threads", 1) > 1:
                    whole_made[sig] = self.whole_function(k, args, wholes is None or sig in wholes)
            fns.append(made[sig])
            whole_fns.append(whole_made.get(sig, made[sig]))
        if not driver:
            return self.module
        for fn in {*fns, *whole_fns}:
            # kernels stay out of the drivers: inlining a whole model's kernels into them made
            # one huge function whose optimisation took 4x the kernels' own (a 148-kernel
            # EfficientNet's driver part: 8.2 s -> 2.2 s CPU), for a call's worth of gain
            fn.attributes.add("noinline")
        split = any(k.params.get("threads", 1) > 1 for k in self.plan.kernels)
        # with split kernels: partita_run starts a worker for their second halves, and
        # partita_run_alone (no worker: the kernels run both halves) is the busy machine's;
        # partita_run_timed is partita_run that also stores the time stamp counter before the
        # first kernel and after each (region.profile)
        drivers = [(DRIVER, split, False), (TIMED, split, True)]
        drivers += [(ALONE, False, False)] if split else []
        for name, pooled, timed in drivers:
            ty = ir.FunctionType(VOID, [PTR, PTR] if timed else [PTR])
            driver = ir.Function(self.module, ty, name=name)
            b = ir.IRBuilder(driver.append_basic_block("entry"))
            table = driver.args[0]
            state = self.pool.pool_start(b) if pooled else None
            stamp = self.stamper(b, driver.args[1]) if timed else (lambda b, j: None)
            stamp(b, 0)
            # without the worker: the split kernels' one-thread forms, the code a one-thread
            # build runs (so a busy machine's runs cost what one thread's do)
            for j, (fn, args) in enumerate(zip(fns if pooled else whole_fns,
                                               call_args(self.plan))):
                b.call(fn, [self.load_at(b, table, c64(i), PTR) for i in args])
                stamp(b, j + 1)
            if state is not None:
                self.pool.pool_stop(b, state)
            b.ret_void()
        tsc = ir.Function(self.module, ir.FunctionType(ir.IntType(64), []), name=TSC)
        b = ir.IRBuilder(tsc.append_basic_block("entry"))
        b.ret(b.call(self.module.globals["llvm.readcyclecounter"], []))
        self.pool.pool_finish()
        return self.module

    def stamper(self, b, stamps):
        """``stamp(b, j)``: stamps[j] = the time stamp counter (llvm.readcyclecounter)."""
        counter = self.module.globals.get("llvm.readcyclecounter") or ir.Function(
            self.module, ir.FunctionType(ir.IntType(64), []), "llvm.readcyclecounter")

        def stamp(b, j: int) -> None:
            self.store_at(b, b.call(counter, []), stamps, c64(j), ir.IntType(64))

        return stamp

    def whole_function(self, k: Kernel, args, define: bool) -> ir.Function:
        """A split kernel's one-thread form, ``{name}_whole``: defined here, or declared (another
        part defines it)."""
        whole = dataclasses.replace(k, name=f"{k.name}_whole",
                                    params={**k.params, "threads": 1})
        if not define:
            ty = ir.FunctionType(VOID, [PTR] * len(args))
            return ir.Function(self.module, ty, name=whole.name)
        bodies, self.bodies = self.bodies, None  # range_mode "full": all of it here
        try:
            return self.kernel_function(whole)
        finally:
            self.bodies = bodies

    def kernel_function(self, k: Kernel) -> ir.Function:
        """The kernel's function; with ``batch`` N (a convolution's images) the kernel's code
        computes one image and a loop calls it N times, its data input and its output advanced
        by one image each time."""
        batch = k.params.get("batch", 1)
        if batch == 1 or self.range_mode(k) == "body":
            name = k.name if batch == 1 else f"{k.name}_image"
            return self.emit_kernel(dataclasses.replace(k, name=name))
        one = self.emit_kernel(dataclasses.replace(k, name=f"{k.name}_image"))
        one.linkage = "internal"
        fn = ir.Function(self.module, one.function_type, name=k.name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n_in = len(k.inputs)
        steps = [self.image_bytes(k.inputs[0]), self.image_bytes(k.output)]
        with for_range(b, batch, "image") as i:
            args = list(fn.args)
            args[0] = b.gep(args[0], [b.mul(i, c64(steps[0]))], source_etype=I8)
            args[n_in] = b.gep(args[n_in], [b.mul(i, c64(steps[1]))], source_etype=I8)
            b.call(one, args)
        b.ret_void()
        return fn

    def range_mode(self, k: Kernel) -> str:
        """Where a split VCONV/VDW kernel's row-range function goes: "full" (here, with the
        kernel), "declare" (the kernel here, the range function in another module) or "body"
        (only the range function here)."""
        bodies = self.bodies
        if bodies is None:
            return "full"
        sig = signature(self.plan, k)
        here = sig in bodies
        if self.only is None or sig in self.only:
            return "full" if here else "declare"
        return "body"

    def constant_names(self, k: Kernel) -> list[str]:
        return [name for name, _ in constants(k)]

    def image_bytes(self, i: int) -> int:
        shape, dtype = self.plan.buffers[i]
        return int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize

    def shape(self, i: int):
        return self.plan.buffers[i][0]

    def dtype(self, i: int):
        return self.plan.buffers[i][1]


def constants(k: Kernel) -> list[tuple[str, np.ndarray]]:
    """A kernel's constant arrays as the kernel reads them (weights and tables as bytes, or int16
    weights, scales as float64, per-channel parameters as int32), in argument order."""
    out = []
    for name, a in sorted(k.arrays.items()):
        if k.kind in FLOAT_KINDS:  # operands in their own dtype (bools as bytes)
            a = a.astype(np.uint8) if a.dtype == np.bool_ else a
        elif k.kind in (Kind.VCONV, Kind.VDW):  # int16 weights: the exact AVX2 kernel's,
            # pre-widened
            keep = a.dtype.itemsize == 1 or a.dtype in (np.float32, np.float64, np.int16,
                                                        np.int64)
            a = a if keep else a.astype(np.int32)
        elif name == "table":
            keep = a.dtype in (np.float32, np.int16)  # int16: 16x8 LOGISTIC / TANH
            a = a if keep else a.astype(np.int64).astype(np.uint8)
        elif a.dtype.kind == "f":
            a = a.astype(np.float64)
        else:
            a = a.astype(np.int64).astype(np.uint8) if name == "weights" else a.astype(np.int32)
        out.append((name, np.ascontiguousarray(a)))
    return out


def signature(plan, k: Kernel) -> str:
    """What a kernel's code depends on (not its constants' values): equal signatures share
    one function."""
    shapes = [plan.buffers[i] for i in (*k.inputs, k.output)]
    consts = [(n, str(a.dtype), a.shape) for n, a in constants(k)]
    return json.dumps([k.kind, k.params, shapes, consts], sort_keys=True, default=str)


def call_args(plan) -> list[list[int]]:
    """Each kernel's table indices: its buffers, then its constants (numbered after the
    buffers, in kernel order)."""
    out, n = [], len(plan.buffers)
    for k in plan.kernels:
        m = len(k.arrays)
        out.append([*k.inputs, k.output, *range(n, n + m)])
        n += m
    return out


def generate(plan) -> ir.Module:
    """The module with every kernel and the driver."""
    return KernelEmitter(plan).emit()


# rough relative LLVM time per kernel function, to balance the parts of a parallel compile
SPLIT_BODIES = (Kind.VCONV, Kind.VDW)  # split kernels whose row-range function may live elsewhere
COST = {Kind.VCONV: 6, Kind.VDW: 3, Kind.FDENSE: 3, Kind.FWINO: 3, Kind.FCONV: 3, Kind.FDW: 2,
        Kind.EWISE: 2, Kind.QSOFTMAX: 3, Kind.QBMM: 3}


def wants_unrolling(plan) -> bool:
    """Whether LLVM's loop unroller pays for this plan: the float kernels' loops gain from it
    (float ResNet50 v2 3% faster), the int8 vector kernels, unrolled by hand, do not (MobileNetV2
    equal within 1%) and then compile about 30% faster without it."""
    return any(k.kind in FLOAT_KINDS or k.kind.startswith("F") for k in plan.kernels)


def generate_parts(plan, parts: int = 2) -> list:
    """Functions making ``parts`` modules that together define every kernel (each signature
    once), the drivers in the last; split kernels (``threads`` 2: they share the driver's
    worker state) stay with the drivers. For jit.compile_parts."""
    first: dict[str, Kernel] = {}
    for k in plan.kernels:
        first.setdefault(signature(plan, k), k)
    groups: list[set] = [set() for _ in range(parts)]
    bodies: list[set] = [set() for _ in range(parts)]
    wholes: list[set] = [set() for _ in range(parts)]
    load = [0] * parts
    pinned = [s for s, k in first.items() if k.params.get("threads", 1) > 1]
    for sig in pinned:  # split kernels stay with the drivers (they share the worker's state)
        groups[-1].add(sig)
        if first[sig].kind not in SPLIT_BODIES:
            load[-1] += COST.get(first[sig].kind, 1)
    movable = [s for s in pinned if first[s].kind in SPLIT_BODIES]  # ... but not their bodies
    rest = sorted((s for s in first if s not in pinned or s in movable),
                  key=lambda s: -COST.get(first[s].kind, 1))
    work = [(s, "body" if s in movable else "kernel") for s in rest]
    work += [(s, "whole") for s in pinned]  # the one-thread forms, for the alone driver
    work.sort(key=lambda w: -COST.get(first[w[0]].kind, 1))
    for sig, what in work:  # largest first, to the lightest part
        i = min(range(parts), key=lambda j: load[j])
        {"body": bodies, "kernel": groups, "whole": wholes}[what][i].add(sig)
        load[i] += COST.get(first[sig].kind, 1)
    return [
        (lambda g=g, m=m, w=w, last=(i == parts - 1):
         str(KernelEmitter(plan).emit(g, driver=last, bodies=m, wholes=w)))
        for i, (g, m, w) in enumerate(zip(groups, bodies, wholes))
    ]
