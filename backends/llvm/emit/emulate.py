"""Exact stand-ins for the x86 instructions a host lacks, so that any kernel family runs on any
x86-64 CPU (option ``-emulate=yes``): the generated module keeps its ISA's structure (register
tiles, data layouts, loop order, AVX-512 vector widths) and only the calls of the instructions
this CPU cannot execute become calls of generic-IR functions with the same semantics (Intel's
pseudo-code: wrapping dword sums for VPDPBUSD/VPDPWSSD, signed-word saturation for VPMADDUBSW,
per-128-bit-lane saturating packs (VPACKSSDW, VPACKSSWB, VPACKUSWB), per-lane masks for
gathers, the configured rows and bytes of AMX tiles). The result is slow and
bit-identical to what the instructions compute; tests use it to check vnni, avxvnni and amx code
on an AVX2 machine (tests/backends/llvm/test_llvm_emulate.py holds each stand-in to numpy's
reading of the pseudo-code).

AMX tiles are state: the stand-ins keep it in a 64-byte configuration plus eight 1 KB tiles on
the stack frame of each function that configures tiles (no thread-local storage: MCJIT has
none), so two threads running tile kernels keep separate tiles as on hardware. A function that
uses tiles without configuring them (a split kernel's chunk function: its part loaded the
configuration once, emit/int8/amx.py) starts from partita's one configuration, TILE_CONFIG,
as its caller left the tiles configured."""

from __future__ import annotations

import re

from llvmlite import ir
from partita.backends.llvm.emit.int8.amx import TILE_CONFIG

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
PTR = ir.PointerType()
PREFIX = "partita.emu."
STATE_BYTES = 64 + 8 * 1024  # tile configuration, then tiles 0-7 of 16 rows x 64 bytes
STATE = f'%"{PREFIX}state"'

# the instruction behind each intrinsic, and the host features that execute it natively
NATIVE = {
    "llvm.x86.avx512.vpdpbusd.512": {"+avx512vnni", "+avx512bw", "+avx512f"},
    "llvm.x86.avx512.vpdpwssd.512": {"+avx512vnni", "+avx512bw", "+avx512f"},
    "llvm.x86.avx512.mask.gather.dpi.512": {"+avx512f"},
    "llvm.x86.avx512.vpdpbusd.256": {"+avxvnni"},
    "llvm.x86.avx2.pmadd.ub.sw": {"+avx2"},
    "llvm.x86.avx2.pmadd.wd": {"+avx2"},
    "llvm.x86.avx2.psign.b": {"+avx2"},
    "llvm.x86.avx2.gather.d.d.256": {"+avx2"},
    "llvm.x86.avx512.packssdw.512": {"+avx512bw"},
    "llvm.x86.avx512.packsswb.512": {"+avx512bw"},
    "llvm.x86.avx512.packuswb.512": {"+avx512bw"},
    "llvm.x86.avx2.packssdw": {"+avx2"},
    "llvm.x86.avx2.packsswb": {"+avx2"},
    "llvm.x86.avx2.packuswb": {"+avx2"},
}
AMX = ("ldtilecfg", "tilezero", "tileloadd64", "tdpbusd", "tdpbssd", "tilestored64",
       "tilerelease")
AMX_NATIVE = {"+amx-int8", "+amx-tile"}

_DECLARE = re.compile(r'^declare [^@]*@"?([\w.]+)"?\((.*)\).*$')


def emulate_ir(text: str, have: set[str], amx_native: bool = False) -> str:
    """``text`` (one module's IR) with every call of an instruction the features ``have`` do
    not execute replaced by its stand-in, defined at the end of the module."""
    wanted: dict[str, list[str]] = {}
    lines = []
    for line in text.splitlines():
        m = _DECLARE.match(line)
        if m and _emulated(m.group(1), have, amx_native):
            wanted[m.group(1)] = _param_types(m.group(2))
            continue  # the declaration goes: a definition of the stand-in replaces it
        lines.append(line)
    if not wanted:
        return text
    body = "\n".join(lines)
    for name in wanted:
        short = name.removeprefix("llvm.x86.")
        new = f'@"{PREFIX}{short}"'
        if short in AMX:  # tile instructions take the function's tile state first
            body = re.sub(rf'@"?{re.escape(name)}"?\(\)', f"{new}(ptr {STATE})", body)
            body = re.sub(rf'@"?{re.escape(name)}"?\(', f"{new}(ptr {STATE}, ", body)
        else:
            body = re.sub(rf'@"?{re.escape(name)}"?\(', f"{new}(", body)
    if any(n.removeprefix("llvm.x86.") in AMX for n in wanted):
        body, unconfigured = _tile_state_allocas(body)
        if unconfigured:  # their state starts from TILE_CONFIG: the stand-in ldtilecfg's
            wanted.setdefault("llvm.x86.ldtilecfg", ["ptr"])
            cfg = ", ".join(f"i8 {v}" for v in TILE_CONFIG)
            body += (f'\n@"{PREFIX}tile_config" = internal constant [64 x i8] [{cfg}], '
                     f"align 64\n")
    module = ir.Module(name="emulate")
    for name, params in wanted.items():
        _define(module, name.removeprefix("llvm.x86."), params)
    defs = [ln for ln in str(module).splitlines()
            if not ln.startswith(("; ModuleID", "target triple", "target datalayout"))]
    return body + "\n" + "\n".join(defs) + "\n"


def emulated_parts(parts, digest: bytes, have: set[str], amx_native: bool):
    """``parts`` (functions making modules' IR, as generate_parts gives them) with stand-ins for
    what ``have`` lacks, and the object-code key ``digest`` extended to say so."""
    parts = [lambda make=make: emulate_ir(make(), have, amx_native) for make in parts]
    tag = "|emulate:" + ",".join(sorted(have)) + f"|amx:{amx_native}"
    return parts, digest + tag.encode()


def lacking_instructions(text: str, have: set[str], amx_native: bool = False) -> list[str]:
    """The instructions of ``text`` the features ``have`` do not execute (by intrinsic name)."""
    return sorted(m.group(1) for m in map(_DECLARE.match, text.splitlines())
                  if m and _emulated(m.group(1), have, amx_native))


def _emulated(name: str, have: set[str], amx_native: bool) -> bool:
    if name.removeprefix("llvm.x86.") in AMX and name.startswith("llvm.x86."):
        return not amx_native
    return name in NATIVE and not NATIVE[name] <= have


def _param_types(params: str) -> list[str]:
    """The parameter types of a declaration's parameter list (names dropped)."""
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch in "<[(":
            depth += 1
        elif ch in ">])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [re.sub(r'\s+%("[^"]*"|[\w.]+)\s*$', "", p.strip()) for p in out]


def _tile_state_allocas(body: str) -> tuple[str, bool]:
    """An alloca of the tile state at the entry of every function that uses tiles, configured
    there with TILE_CONFIG where the function loads no configuration itself; and whether any
    was."""
    out: list[str] = []
    func: list[str] | None = None
    unconfigured = False
    for line in body.splitlines():
        if line.startswith("define "):
            func = [line]
        elif func is not None:
            func.append(line)
            if line == "}":
                if any(STATE in ln for ln in func):
                    entry = next(i for i, ln in enumerate(func) if ln.rstrip().endswith(":"))
                    start = [f"  {STATE} = alloca [{STATE_BYTES} x i8], align 64"]
                    if not any(f'@"{PREFIX}ldtilecfg"' in ln for ln in func):
                        unconfigured = True
                        start.append(f'  call void @"{PREFIX}ldtilecfg"(ptr {STATE}, '
                                     f'ptr @"{PREFIX}tile_config")')
                    func[entry + 1:entry + 1] = start
                out += func
                func = None
        else:
            out.append(line)
    return "\n".join(out), unconfigured


# -- the stand-ins ---------------------------------------------------------------------------


def _vec(n, ty):
    return ir.VectorType(ty, n)


def _parse_type(text: str) -> ir.Type:
    text = text.strip()
    if text == "ptr" or text.endswith("*"):  # typed pointer syntax reads as ptr
        return PTR
    m = re.fullmatch(r"<(\d+) x i(\d+)>", text)
    if m:
        return _vec(int(m.group(1)), ir.IntType(int(m.group(2))))
    m = re.fullmatch(r"i(\d+)", text)
    if m:
        return ir.IntType(int(m.group(1)))
    raise ValueError(f"emulate: no stand-in takes a {text}")


def _lanes(b, v, idx):
    """The lanes ``idx`` of vector ``v`` as a new vector."""
    mask = ir.Constant(_vec(len(idx), I32), list(idx))
    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), mask)


def _function(module, short, ret, params):
    fn = ir.Function(module, ir.FunctionType(ret, params), name=PREFIX + short)
    fn.linkage = "internal"
    fn.attributes.add("noinline")  # one copy: the kernels around it compile as fast as native
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _define(module, short, param_text):
    params = [_parse_type(t) for t in param_text]
    if short in AMX:
        return _define_amx(module, short, [PTR, *params])
    kind = short.split(".")[1] if short.startswith("avx") else short
    if kind in ("vpdpbusd", "vpdpwssd"):
        acc_ty = params[0]
        n = acc_ty.count
        fn, b = _function(module, short, acc_ty, params)
        acc, x, y = fn.args
        if kind == "vpdpbusd":  # four u8 x s8 products per dword, wrapping sums
            xs = b.zext(b.bitcast(x, _vec(4 * n, I8)), _vec(4 * n, I32))
            ys = b.sext(b.bitcast(y, _vec(4 * n, I8)), _vec(4 * n, I32))
            width = 4
        else:  # two s16 x s16 products per dword, wrapping sums
            xs = b.sext(b.bitcast(x, _vec(2 * n, I16)), _vec(2 * n, I32))
            ys = b.sext(b.bitcast(y, _vec(2 * n, I16)), _vec(2 * n, I32))
            width = 2
        prod = b.mul(xs, ys)
        total = acc
        for j in range(width):
            total = b.add(total, _lanes(b, prod, [width * i + j for i in range(n)]))
        b.ret(total)
    elif short in ("avx2.pmadd.ub.sw", "avx2.pmadd.wd"):
        ubsw = short.endswith("ub.sw")
        n = 16 if ubsw else 8
        ret = _vec(n, I16 if ubsw else I32)
        fn, b = _function(module, short, ret, params)
        x, y = fn.args
        if ubsw:  # u8 x s8 pairs, the pair sum saturated to int16
            xs = b.zext(b.bitcast(x, _vec(32, I8)), _vec(32, I32))
            ys = b.sext(b.bitcast(y, _vec(32, I8)), _vec(32, I32))
        else:  # s16 x s16 pairs, the pair sum wrapping in int32
            xs = b.sext(b.bitcast(x, _vec(16, I16)), _vec(16, I32))
            ys = b.sext(b.bitcast(y, _vec(16, I16)), _vec(16, I32))
        prod = b.mul(xs, ys)
        s = b.add(_lanes(b, prod, range(0, 2 * n, 2)), _lanes(b, prod, range(1, 2 * n, 2)))
        if ubsw:
            lo, hi = ir.Constant(_vec(n, I32), -32768), ir.Constant(_vec(n, I32), 32767)
            s = b.select(b.icmp_signed("<", s, lo), lo, s)
            s = b.select(b.icmp_signed(">", s, hi), hi, s)
            s = b.trunc(s, ret)
        b.ret(s)
    elif short == "avx2.psign.b":  # a negated where b < 0, zero where b == 0 (wrapping)
        fn, b = _function(module, short, params[0], params)
        x, y = fn.args
        zero = ir.Constant(params[0], 0)
        neg = b.select(b.icmp_signed("<", y, zero), b.sub(zero, x), x)
        b.ret(b.select(b.icmp_signed("==", y, zero), zero, neg))
    elif short.split(".")[1] in ("packssdw", "packsswb", "packuswb"):
        # per 128-bit lane: a's elements of the lane, then b's, each saturated to the
        # narrower type (signed, or unsigned for packus)
        count, wide = params[0].count, params[0].element
        lanes = count * wide.width // 128
        per = count // lanes
        ret = _vec(2 * count, I8 if "wb" in short else I16)
        fn, b = _function(module, short, ret, params)
        x, y = fn.args
        order = [k + i * per + j for i in range(lanes) for k in (0, count) for j in range(per)]
        v = b.shuffle_vector(x, y, ir.Constant(_vec(2 * count, I32), order))
        bits = ret.element.width
        lo, hi = ((0, (1 << bits) - 1) if "packus" in short
                  else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
        lo, hi = ir.Constant(_vec(2 * count, wide), lo), ir.Constant(_vec(2 * count, wide), hi)
        v = b.select(b.icmp_signed("<", v, lo), lo, v)
        v = b.select(b.icmp_signed(">", v, hi), hi, v)
        b.ret(b.trunc(v, ret))
    elif short in ("avx2.gather.d.d.256", "avx512.mask.gather.dpi.512"):
        _define_gather(module, short, params)
    else:
        raise ValueError(f"emulate: no stand-in for llvm.x86.{short}")


def _define_gather(module, short, params):
    """dword gathers: lane i loads base + index[i] * scale where its mask is set (AVX2: the
    mask dword's top bit; AVX-512: the mask bit), else keeps ``src``'s lane."""
    ret = params[0]
    n = ret.count
    fn, b = _function(module, short, ret, params)
    src, base, index, mask, scale = fn.args
    result = src
    scale64 = b.sext(scale, I64)
    for i in range(n):
        lane = ir.Constant(I32, i)
        if isinstance(mask.type, ir.VectorType) and mask.type.element == I1:
            on = b.extract_element(mask, lane)
        else:
            on = b.icmp_signed("<", b.extract_element(mask, lane), ir.Constant(I32, 0))
        pre = b.block
        with b.if_then(on):
            off = b.mul(b.sext(b.extract_element(index, lane), I64), scale64)
            word = b.load(b.gep(base, [off], source_etype=I8), typ=I32, align=1)
            loaded = b.insert_element(result, word, lane)
            then = b.block
        merged = b.phi(ret)
        merged.add_incoming(loaded, then)
        merged.add_incoming(result, pre)
        result = merged
    b.ret(result)


def _define_amx(module, short, params):
    """Tile instructions over the state ``st``: [0, 64) the configuration (palette, bytes per
    row of tile t as a u16 at 16 + 2t, rows of tile t at 48 + t), then tile t's 16 x 64 bytes at
    64 + 1024 t."""
    fn, b = _function(module, short, ir.VoidType(), params)
    st = fn.args[0]

    def at(off):
        return b.gep(st, [off], source_etype=I8)

    def rows_of(t):
        return b.zext(b.load(at(b.add(ir.Constant(I64, 48), b.zext(t, I64))), typ=I8), I64)

    def bytes_of(t):
        off = b.add(ir.Constant(I64, 16), b.mul(b.zext(t, I64), ir.Constant(I64, 2)))
        return b.zext(b.load(at(off), typ=I16, align=1), I64)

    def tile(t):
        return b.add(ir.Constant(I64, 64), b.mul(b.zext(t, I64), ir.Constant(I64, 1024)))

    def loop(count, name):
        return _Loop(b, count, name)

    if short == "ldtilecfg":
        cfg = fn.args[1]
        with loop(ir.Constant(I64, 64), "i") as i:
            b.store(b.load(b.gep(cfg, [i], source_etype=I8), typ=I8), at(i))
    elif short == "tilerelease":
        with loop(ir.Constant(I64, 64), "i") as i:
            b.store(ir.Constant(I8, 0), at(i))
    elif short == "tilezero":
        t0 = tile(fn.args[1])
        with loop(ir.Constant(I64, 1024), "i") as i:
            b.store(ir.Constant(I8, 0), at(b.add(t0, i)))
    elif short in ("tileloadd64", "tilestored64"):
        t, ptr, stride = fn.args[1:]
        t0, rows, width = tile(t), rows_of(t), bytes_of(t)
        load = short == "tileloadd64"
        if load:  # the rows and bytes past the configuration read as zero
            with loop(ir.Constant(I64, 1024), "z") as i:
                b.store(ir.Constant(I8, 0), at(b.add(t0, i)))
        with loop(rows, "r") as r:
            with loop(width, "c") as c:
                mem = b.gep(ptr, [b.add(b.mul(r, stride), c)], source_etype=I8)
                cell = at(b.add(t0, b.add(b.mul(r, ir.Constant(I64, 64)), c)))
                if load:
                    b.store(b.load(mem, typ=I8), cell)
                else:
                    b.store(b.load(cell, typ=I8), mem)
    elif short in ("tdpbusd", "tdpbssd"):
        dst, ta, tb = fn.args[1:]
        c0, a0, b0 = tile(dst), tile(ta), tile(tb)
        m_rows, n_cols = rows_of(dst), b.udiv(bytes_of(dst), ir.Constant(I64, 4))
        k_quads = b.udiv(bytes_of(ta), ir.Constant(I64, 4))
        signed_a = short == "tdpbssd"
        with loop(m_rows, "m") as m:
            with loop(n_cols, "n") as n:
                cptr = at(b.add(c0, b.add(b.mul(m, ir.Constant(I64, 64)),
                                          b.mul(n, ir.Constant(I64, 4)))))
                with loop(k_quads, "k") as k:
                    total = b.load(cptr, typ=I32, align=1)
                    for i in range(4):
                        ia = b.add(a0, b.add(b.mul(m, ir.Constant(I64, 64)),
                                             b.add(b.mul(k, ir.Constant(I64, 4)),
                                                   ir.Constant(I64, i))))
                        ib = b.add(b0, b.add(b.mul(k, ir.Constant(I64, 64)),
                                             b.add(b.mul(n, ir.Constant(I64, 4)),
                                                   ir.Constant(I64, i))))
                        va = b.load(at(ia), typ=I8)
                        va = b.sext(va, I32) if signed_a else b.zext(va, I32)
                        vb = b.sext(b.load(at(ib), typ=I8), I32)
                        total = b.add(total, b.mul(va, vb))
                    b.store(total, cptr, align=1)
    else:
        raise ValueError(f"emulate: no stand-in for llvm.x86.{short}")
    b.ret_void()


class _Loop:
    """``for i in range(count)`` in IR (count >= 0, i64)."""

    def __init__(self, b, count, name):
        self.b, self.count, self.name = b, count, name

    def __enter__(self):
        b = self.b
        fn = b.function
        self.pre = b.block
        self.head = fn.append_basic_block(f"{self.name}.head")
        self.body = fn.append_basic_block(f"{self.name}.body")
        self.end = fn.append_basic_block(f"{self.name}.end")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.i = b.phi(I64, name=self.name)
        self.i.add_incoming(ir.Constant(I64, 0), self.pre)
        b.cbranch(b.icmp_unsigned("<", self.i, self.count), self.body, self.end)
        b.position_at_end(self.body)
        return self.i

    def __exit__(self, *exc):
        b = self.b
        nxt = b.add(self.i, ir.Constant(I64, 1))
        self.i.add_incoming(nxt, b.block)
        b.branch(self.head)
        b.position_at_end(self.end)
        return False
