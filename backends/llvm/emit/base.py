"""LLVM IR for a lowered Plan, written with llvmlite (opaque pointers, loops through one
``for_range`` helper, constants as module globals). A region has three drivers (module.py):

    void partita_run(ptr* buffers)              // buffers[i]: the i-th planned buffer, inputs
                                                //   first; with split kernels, the worker helps
    void partita_run_alone(ptr* buffers)        // split kernels only: the same, no worker
    void partita_run_timed(ptr* buffers, ptr t) // partita_run storing a time stamp per kernel

so an inference is a single native call. The output stage is TFLite's fixed-point arithmetic
(SaturatingRoundingDoublingHighMul with its nudge, RoundingDivideByPOT), in 64-bit integers.
"""

from __future__ import annotations

import contextlib

import numpy as np
from llvmlite import ir
from partita.backends.llvm.plan import Kernel, Plan

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F64 = ir.DoubleType()
F32 = ir.FloatType()
PTR = ir.PointerType()
VOID = ir.VoidType()
ELEM = {"int8": I8, "uint8": I8, "int32": I32, "float32": ir.FloatType()}
DRIVER = "partita_run"
TIMED = "partita_run_timed"  # the driver that stores a time stamp after each kernel
TSC = "partita_tsc"  # the time stamp counter, to calibrate TIMED's stamps


@contextlib.contextmanager
def for_range(b: ir.IRBuilder, count, name: str = "i"):
    """``for (i = 0; i < count; i++)``; yields i (i64)."""
    count = count if isinstance(count, ir.Value) else ir.Constant(I64, int(count))
    pre = b.block
    head = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    end = b.append_basic_block(f"{name}.end")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name)
    i.add_incoming(ir.Constant(I64, 0), pre)
    b.cbranch(b.icmp_signed("<", i, count), body, end)
    b.position_at_end(body)
    yield i
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(end)


@contextlib.contextmanager
def claimed_chunks(b: ir.IRBuilder, counter, count: int):
    """Run the block for each chunk index ``c`` in [0, count) this thread claims from the
    atomic ``counter`` the threads share (so a descheduled thread holds up one chunk at most);
    yields ``c`` (i64)."""
    loop, work, done = (b.function.append_basic_block(n) for n in ("claim", "chunk", "no_chunk"))
    b.branch(loop)
    b.position_at_end(loop)
    c = b.atomic_rmw("add", counter, c64(1), "acq_rel")
    b.cbranch(b.icmp_signed("<", c, c64(count)), work, done)
    b.position_at_end(work)
    yield c
    b.branch(loop)
    b.position_at_end(done)


def c64(v) -> ir.Constant:
    return ir.Constant(I64, int(v))


def layout_index(b, nchw: bool, dims, n, c, y, x):
    """The flat index of element (n, c, y, x) of a tensor of ``dims`` (N, C, H, W) stored NCHW
    or (``nchw`` False) NHWC."""
    _, cc, hh, ww = dims
    if nchw:
        return b.add(b.mul(b.add(b.mul(b.add(b.mul(n, c64(cc)), c), c64(hh)), y), c64(ww)), x)
    return b.add(b.mul(b.add(b.mul(b.add(b.mul(n, c64(hh)), y), c64(ww)), x), c64(cc)), c)


class Emitter:
    """The emit context: the plan, the module being written, the current kernel's constant
    arguments (``cargs``) and the primitives every kernel family uses (CONTEXT_API). The
    composing emitter (module.KernelEmitter) holds one instance of each kernel family as an
    attribute (``self.ints``, ``self.pool``, ...), each given this context."""

    ints: Family  # emit/integer.py's IntKernels (mbqm_upward), set by the composing emitter

    def __init__(self, plan: Plan):
        self.plan = plan
        self.module = ir.Module(name="partita")
        self.module.triple = ""

    def _intrinsic(self, name, ret, args):
        """The LLVM intrinsic ``name`` (fully mangled), declared once per module."""
        return self.module.declare_intrinsic(name, (), ir.FunctionType(ret, args))

    def global_array(self, name: str, array: np.ndarray, ty=I32) -> ir.GlobalVariable:
        flat = np.asarray(array).ravel()
        arr_ty = ir.ArrayType(ty, max(1, flat.size))
        if ty is I8:  # bytes as a string literal: compact IR for weights and tables
            init = ir.Constant(
                arr_ty, bytearray(flat.astype(np.int64).astype(np.uint8).tobytes() or b"\0")
            )
        else:
            conv = float if ty in (F64, F32) else int
            init = ir.Constant(arr_ty, [conv(v) for v in flat] or [0])
        g = ir.GlobalVariable(self.module, arr_ty, name=name)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = init
        return g

    def window_tap(self, b, out_yx, tap_yx, strides, dilation, top_left, hw):
        """(iy, ix, inside): the input pixel that kernel tap (ky, kx) of output pixel (oy, ox)
        reads (i64 values; constants for the rest) and whether it lies inside the h x w input
        (outside it reads padding)."""
        (oy, ox), (ky, kx), (sh, sw), (dh, dw), (top, left), (h, w) = (
            out_yx, tap_yx, strides, dilation, top_left, hw)
        iy = b.sub(b.add(b.mul(oy, c64(sh)), b.mul(ky, c64(dh))), c64(top))
        ix = b.sub(b.add(b.mul(ox, c64(sw)), b.mul(kx, c64(dw))), c64(left))
        inside = b.and_(
            b.and_(b.icmp_signed(">=", iy, c64(0)), b.icmp_signed("<", iy, c64(h))),
            b.and_(b.icmp_signed(">=", ix, c64(0)), b.icmp_signed("<", ix, c64(w))),
        )
        return iy, ix, inside

    def load_at(self, b, ptr, index, ty):
        return b.load(b.gep(ptr, [index], source_etype=ty), typ=ty)

    def store_at(self, b, value, ptr, index, ty):
        b.store(value, b.gep(ptr, [index], source_etype=ty))

    def signed(self, b, value, dtype: str):
        """An 8-bit (or int16) element widened to i64 with its dtype's signedness."""
        return b.sext(value, I64) if dtype in ("int8", "int16") else b.zext(value, I64)

    # -- TFLite's fixed-point output stage ------------------------------------------------
    def mbqm(self, b, x, q, shift):
        """MultiplyByQuantizedMultiplier(int32 x, q, shift) in i64 arithmetic."""
        zero = c64(0)
        left = b.select(b.icmp_signed(">", shift, zero), shift, zero)
        right = b.select(b.icmp_signed("<", shift, zero), b.neg(shift), zero)
        x = b.sext(b.trunc(b.shl(x, left), I32), I64)  # int32 wrap-around, as TFLite
        ab = b.mul(x, q)
        nudge = b.select(b.icmp_signed(">=", ab, zero), c64(1 << 30), c64(1 - (1 << 30)))
        high = b.sdiv(b.add(ab, nudge), c64(1 << 31))
        overflow = b.and_(
            b.icmp_signed("==", x, c64(-(1 << 31))), b.icmp_signed("==", q, c64(-(1 << 31)))
        )
        high = b.select(overflow, c64((1 << 31) - 1), high)
        mask = b.sub(b.shl(c64(1), right), c64(1))
        remainder = b.and_(high, mask)
        threshold = b.add(b.ashr(mask, c64(1)), b.zext(b.icmp_signed("<", high, zero), I64))
        up = b.zext(b.icmp_signed(">", remainder, threshold), I64)
        return b.add(b.ashr(high, right), up)

    def round_double(self, b, x, scale):
        """round half away from zero of double(x) * scale (TFLite's reference FC)."""
        v = b.fmul(b.sitofp(x, F64), scale)
        fabs = self.module.declare_intrinsic("llvm.fabs", [F64])
        floor = self.module.declare_intrinsic("llvm.floor", [F64])
        a = b.call(fabs, [v])
        fl = b.call(floor, [a])
        r = b.fadd(fl, b.uitofp(b.fcmp_ordered(">=", b.fsub(a, fl), ir.Constant(F64, 0.5)), F64))
        r = b.select(b.fcmp_ordered("<", v, ir.Constant(F64, 0.0)), b.fneg(r), r)
        return b.fptosi(r, I64)

    def clamp(self, b, v, lo, hi):
        v = b.select(b.icmp_signed("<", v, c64(lo)), c64(lo), v)
        return b.select(b.icmp_signed(">", v, c64(hi)), c64(hi), v)

    def output_stage(self, b, acc, k: Kernel, g: dict, channel):
        """acc (i64, exact) -> the output element (i8; i32 for "raw", the accumulator)."""
        p = k.params
        acc = b.sext(b.trunc(acc, I32), I64)  # the accumulator register is 32 bits
        bias = b.sext(self.load_at(b, g["bias"], channel, I32), I64)
        if p["rounding"] == "raw":
            return b.trunc(b.add(acc, bias), I32)  # int32 + int32 wraps
        acc = b.sext(b.trunc(b.add(acc, bias), I32), I64)  # int32 + int32 wraps
        x = b.sub(acc, c64(p["rq_zp"]))
        if p["rounding"] == "tflite_double":
            y = self.round_double(b, x, self.load_at(b, g["scale"], channel, F64))
        elif p["rounding"] == "tflite_builtin":  # ties upward twice (integer.py)
            q = b.sext(self.load_at(b, g["multiplier"], channel, I32), I64)
            s = b.sext(self.load_at(b, g["shift"], channel, I32), I64)
            y = self.ints.mbqm_upward(b, x, q, s)
        else:
            q = b.sext(self.load_at(b, g["multiplier"], channel, I32), I64)
            s = b.sext(self.load_at(b, g["shift"], channel, I32), I64)
            y = self.mbqm(b, x, q, s)
        y = self.clamp(b, b.add(y, c64(p["out_zp"])), p["lo"], p["hi"])
        return b.trunc(y, I8)


# What every kernel family reads of its emit context: these names on a family are the context's
CONTEXT_API = (
    "plan", "module", "cargs", "_intrinsic", "global_array", "window_tap", "load_at", "store_at",
    "signed", "mbqm", "round_double", "clamp", "output_stage", "function", "globals_of",
    "constant_names", "range_mode", "image_bytes", "shape", "dtype",
)


class via:
    """In a kernel family's class body, ``split_run = via("pool")`` names a method of another
    family of the same emit context: ``self.split_run`` is ``self.em.pool.split_run``. With no
    family, the name is the context's own (CONTEXT_API). So each family lists what it uses of
    the others at the top of its class, and nothing is found through a shared base."""

    def __init__(self, family: str | None = None, name: str | None = None):
        self.family, self.name = family, name

    def __set_name__(self, owner, name: str) -> None:
        self.name = self.name or name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        holder = obj.em if self.family is None else getattr(obj.em, self.family)
        return getattr(holder, self.name)


class Family:
    """A family of kernels (one file's ``@emits`` functions and their helpers), composed into
    the kernel emitter with an explicit emit context, ``self.em`` (an Emitter)."""

    def __init__(self, em: Emitter):
        self.em = em


for _name in CONTEXT_API:
    setattr(Family, _name, via(None, _name))
del _name
