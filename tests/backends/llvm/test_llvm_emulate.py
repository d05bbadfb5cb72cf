"""-emulate=yes: the x86 instructions a CPU lacks become exact generic-IR stand-ins
(backends/llvm/emit/emulate.py), so the kernel families of every tier run, bit for bit, on any
x86-64 host. Each stand-in is held here to numpy's reading of Intel's pseudo-code on random and
extreme operands, and where this CPU executes the instruction, to the instruction itself; the
kernels built with it are held to the interpreter by test_llvm_kernels.py, test_llvm_amx.py and
test_llvm_threads.py."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_checks import build_graph
from partita.backends.llvm.emit import emulate as emulate_module
from partita.backends.llvm.emit.emulate import emulate_ir, lacking_instructions
from partita.backends.llvm.runtime import jit

import partita as P

_KEEP = []  # engines stay alive while their functions may be called


def _compiled(text: str, name: str = "f"):
    jit.ensure_initialized()
    module = llvm.parse_assembly(text)
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=jit.host_features(), opt=2)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    _KEEP.append(engine)
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)(engine.get_function_address(name))


def _call(fn, *arrays):
    fn(*[a.ctypes.data for a in arrays], *[None] * (4 - len(arrays)))


# intrinsic, its result and operand vector types, numpy's reading of the pseudo-code
DOTS = {
    "llvm.x86.avx512.vpdpbusd.512": ("<16 x i32>", ["<16 x i32>", "<64 x i8>", "<64 x i8>"]),
    "llvm.x86.avx512.vpdpbusd.256": ("<8 x i32>", ["<8 x i32>", "<32 x i8>", "<32 x i8>"]),
    "llvm.x86.avx512.vpdpwssd.512": ("<16 x i32>", ["<16 x i32>", "<32 x i16>", "<32 x i16>"]),
    "llvm.x86.avx2.pmadd.ub.sw": ("<16 x i16>", ["<32 x i8>", "<32 x i8>"]),
    "llvm.x86.avx2.pmadd.wd": ("<8 x i32>", ["<16 x i16>", "<16 x i16>"]),
    "llvm.x86.avx2.psign.b": ("<32 x i8>", ["<32 x i8>", "<32 x i8>"]),
    "llvm.x86.avx512.packssdw.512": ("<32 x i16>", ["<16 x i32>", "<16 x i32>"]),
    "llvm.x86.avx512.packsswb.512": ("<64 x i8>", ["<32 x i16>", "<32 x i16>"]),
    "llvm.x86.avx512.packuswb.512": ("<64 x i8>", ["<32 x i16>", "<32 x i16>"]),
    "llvm.x86.avx2.packssdw": ("<16 x i16>", ["<8 x i32>", "<8 x i32>"]),
    "llvm.x86.avx2.packsswb": ("<32 x i8>", ["<16 x i16>", "<16 x i16>"]),
    "llvm.x86.avx2.packuswb": ("<32 x i8>", ["<16 x i16>", "<16 x i16>"]),
}


def _reference(name, ops):
    wrap = lambda v: ((v + 2**31) % 2**32 - 2**31).astype(np.int32)  # noqa: E731
    if name.endswith("vpdpbusd.512") or name.endswith("vpdpbusd.256"):
        acc, a, b = ops
        prod = a.view(np.uint8).astype(np.int64) * b.view(np.int8).astype(np.int64)
        return wrap(acc.astype(np.int64) + prod.reshape(-1, 4).sum(1))
    if name.endswith("vpdpwssd.512"):
        acc, a, b = ops
        prod = a.astype(np.int64) * b.astype(np.int64)
        return wrap(acc.astype(np.int64) + prod.reshape(-1, 2).sum(1))
    if name.endswith("pmadd.ub.sw"):
        a, b = ops
        prod = a.view(np.uint8).astype(np.int64) * b.astype(np.int64)
        return np.clip(prod.reshape(-1, 2).sum(1), -32768, 32767).astype(np.int16)
    if name.endswith("pmadd.wd"):
        a, b = ops
        return wrap((a.astype(np.int64) * b.astype(np.int64)).reshape(-1, 2).sum(1))
    if ".pack" in name:  # per 128-bit lane: a's elements, then b's, saturated
        a, b = ops
        n = a.size * a.itemsize // 16  # 128-bit lanes
        lanes = np.concatenate([a.reshape(n, -1), b.reshape(n, -1)], axis=1).ravel()
        out = np.int16 if "packssdw" in name else np.int8
        lo, hi = (0, 255) if "packus" in name else (np.iinfo(out).min, np.iinfo(out).max)
        return np.clip(lanes.astype(np.int64), lo, hi).astype(np.int64).astype(
            np.uint8 if "packus" in name else out).view(out)
    a, b = ops  # psign.b: a negated (wrapping) where b < 0, zero where b == 0
    neg = (-a.astype(np.int64) + 128) % 256 - 128
    return np.where(b < 0, neg, np.where(b == 0, 0, a)).astype(np.int8)


def _dot_module(name):
    ret, params = DOTS[name]
    loads = "\n".join(f"  %v{i} = load {t}, ptr %p{i}, align 1" for i, t in enumerate(params))
    args = ", ".join(f"{t} %v{i}" for i, t in enumerate(params))
    ptrs = ", ".join(f"ptr %p{i}" for i in range(len(params)))
    return (f'declare {ret} @"{name}"({", ".join(params)})\n'
            f"define void @f({ptrs}, ptr %out) {{\n{loads}\n"
            f'  %r = call {ret} @"{name}"({args})\n'
            f"  store {ret} %r, ptr %out, align 1\n  ret void\n}}\n")


def _operands(name, rng, extreme):
    _, params = DOTS[name]
    out = []
    for t in params:
        n, bits = (int(x) for x in t.strip("<>").replace(" x i", " ").split())
        dtype = {8: np.int8, 16: np.int16, 32: np.int32}[bits]
        info = np.iinfo(dtype)
        if extreme:  # the corners: where sums wrap or saturate
            v = rng.choice(np.array([info.min, info.max, 0, -1, 1], dtype=dtype), n)
        else:
            v = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        out.append(v)
    return out


@pytest.mark.parametrize("name", sorted(DOTS))
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), extreme=st.booleans())
def test_each_dot_product_stand_in_is_the_instruction(name, seed, extreme):
    text = _dot_module(name)
    emulated = emulate_ir(text, have=set())
    assert f"@\"{name}\"" not in emulated and "partita.emu." in emulated
    ops = _operands(name, np.random.default_rng(seed), extreme)
    want = _reference(name, ops)
    got = np.zeros_like(want)
    _call(_compiled(emulated), *ops, got)
    assert np.array_equal(got, want)
    have = set(jit.host_features().split(","))
    if not lacking_instructions(text, have):  # this CPU runs it: the instruction agrees too
        native = np.zeros_like(want)
        _call(_compiled(text), *ops, native)
        assert np.array_equal(native, want)


GATHERS = {
    "llvm.x86.avx2.gather.d.d.256": ("<8 x i32>", "<8 x i32>", "i8", 8),
    "llvm.x86.avx512.mask.gather.dpi.512": ("<16 x i32>", "<16 x i1>", "i32", 16),
}


@pytest.mark.parametrize("name", sorted(GATHERS))
@pytest.mark.parametrize("scale", [1, 4])
def test_gather_stand_ins_load_only_the_lanes_their_mask_sets(name, scale):
    vec, mask_ty, scale_ty, n = GATHERS[name]
    rng = np.random.default_rng(scale)
    table = rng.integers(-2**31, 2**31, 64, dtype=np.int64).astype(np.int32)
    index = rng.integers(0, (256 - 4) // scale, n).astype(np.int32)
    on = rng.integers(0, 2, n).astype(bool)
    src = np.arange(n, dtype=np.int32) - 1000
    if mask_ty == "<16 x i1>":
        mask_load = "  %mb = load i16, ptr %pm, align 1\n  %m = bitcast i16 %mb to <16 x i1>\n"
        mask = np.array([np.packbits(on[::-1]).view(">u2")[0]], dtype=np.uint16)
    else:
        mask_load = f"  %m = load {mask_ty}, ptr %pm, align 1\n"
        mask = np.where(on, -1, 0).astype(np.int32)
    text = (f'declare {vec} @"{name}"({vec}, ptr, {vec}, {mask_ty}, {scale_ty})\n'
            f"define void @f(ptr %base, ptr %pi, ptr %pm, ptr %out) {{\n"
            f"  %i = load {vec}, ptr %pi, align 1\n{mask_load}"
            f"  %s = load {vec}, ptr %out, align 1\n"
            f'  %r = call {vec} @"{name}"({vec} %s, ptr %base, {vec} %i, {mask_ty} %m, '
            f"{scale_ty} {scale})\n  store {vec} %r, ptr %out, align 1\n  ret void\n}}\n")
    raw = table.view(np.uint8)
    want = np.array([raw[i * scale:i * scale + 4].view(np.int32)[0] if m else s
                     for i, m, s in zip(index, on, src)], dtype=np.int32)
    got = src.copy()
    _call(_compiled(emulate_ir(text, have=set())), table, index, mask, got)
    assert np.array_equal(got, want)


def test_the_tile_stand_ins_follow_the_configuration():
    """ldtilecfg with tiles of fewer rows and bytes than the maximum; a load zero-fills past
    them; TDPBUSD (u8 x s8) and TDPBSSD (s8 x s8) accumulate into C over the configured K;
    a store writes only the configured part."""
    m, n4, k4 = 7, 5, 6  # rows of A and C, dwords per C row, quads per A row
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    for t, (rows, width) in {0: (m, 4 * n4), 4: (m, 4 * k4), 6: (k4, 4 * n4)}.items():
        cfg[16 + 2 * t:18 + 2 * t] = np.array([width], "<u2").view(np.uint8)
        cfg[48 + t] = rows
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, 4 * k4 + 3), dtype=np.int8)  # a wider row stride
    b = rng.integers(-128, 128, (k4, 4 * n4), dtype=np.int8)
    for dot, signed in (("tdpbusd", False), ("tdpbssd", True)):
        text = ("declare void @llvm.x86.ldtilecfg(ptr)\ndeclare void @llvm.x86.tilezero(i8)\n"
                "declare void @llvm.x86.tileloadd64(i8, ptr, i64)\n"
                f"declare void @llvm.x86.{dot}(i8, i8, i8)\n"
                "declare void @llvm.x86.tilestored64(i8, ptr, i64)\n"
                "declare void @llvm.x86.tilerelease()\n"
                "define void @f(ptr %cfg, ptr %a, ptr %b, ptr %c) {\nentry:\n"
                "  call void @llvm.x86.ldtilecfg(ptr %cfg)\n"
                "  call void @llvm.x86.tilezero(i8 0)\n"
                f"  call void @llvm.x86.tileloadd64(i8 4, ptr %a, i64 {4 * k4 + 3})\n"
                f"  call void @llvm.x86.tileloadd64(i8 6, ptr %b, i64 {4 * n4})\n"
                f"  call void @llvm.x86.{dot}(i8 0, i8 4, i8 6)\n"
                f"  call void @llvm.x86.{dot}(i8 0, i8 4, i8 6)\n"
                "  call void @llvm.x86.tilestored64(i8 0, ptr %c, i64 32)\n"
                "  call void @llvm.x86.tilerelease()\n  ret void\n}\n")
        c = np.full((m + 1, 8), 77, np.int32)  # 32-byte rows: the last 3 dwords untouched
        _call(_compiled(emulate_ir(text, have=set())), cfg, a, b, c)
        av = a[:, :4 * k4].astype(np.int64)
        if not signed:
            av = a[:, :4 * k4].view(np.uint8).astype(np.int64)
        want = 2 * np.einsum("mki,kni->mn", av.reshape(m, k4, 4),
                             b.astype(np.int64).reshape(k4, n4, 4))
        assert np.array_equal(c[:m, :n4], want)
        assert (c[:m, n4:] == 77).all() and (c[m:] == 77).all()


def test_a_module_this_cpu_runs_is_left_alone():
    text = _dot_module("llvm.x86.avx2.pmadd.wd")
    assert emulate_ir(text, have={"+avx2"}) == text
    assert lacking_instructions(text, {"+avx2"}) == []
    assert lacking_instructions(text, set()) == ["llvm.x86.avx2.pmadd.wd"]


def _conv():
    geo = {"hw": (8, 8), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
           "padding": (0, 0, 0, 0)}
    return build_graph("conv", "int8", 64, 32, geo, 1, True, None)[0]


def test_an_emulated_region_records_no_needs_and_loads_anywhere(tmp_path, monkeypatch):
    """An emulated -isa=amx build needs nothing of the CPU: saved, it loads where AMX is not
    granted, and gives the interpreter's bits."""
    monkeypatch.setattr(jit, "_AMX", False)
    mod = _conv()
    exe = P.build(mod, "llvm -isa=amx -emulate=yes")
    assert exe.steps[0].region.needs == []
    path = tmp_path / "m.partita"
    exe.save(path)
    data = np.random.default_rng(2).integers(-128, 128, (1, 8, 8, 64), dtype=np.int8)
    assert np.array_equal(P.load(path).run(data)[0], P.interpret(mod, [data])[0])


def test_the_option_is_checked():
    mod = _conv()
    with pytest.raises(P.PartitaError, match="-emulate"):
        P.build(mod, "llvm -isa=vnni -emulate=maybe")
    with pytest.raises(P.PartitaError, match="does not combine with -mcpu"):
        P.build(mod, "llvm -isa=vnni -emulate=yes -mcpu=znver3")


def test_a_cpu_without_avx2_runs_the_avx2_kernels(monkeypatch, tmp_path):
    """A host reporting no AVX, AVX2 or FMA (an older x86-64) builds -isa=avx2 with stand-ins
    for VPMADDUBSW, VPMADDWD and VPSIGNB, compiled for that CPU: the interpreter's bits."""
    real = jit.host_features()
    old = ",".join("-" + f[1:] if f[1:].startswith(("avx", "fma", "f16c", "amx")) else f
                   for f in real.split(","))
    monkeypatch.setattr(jit, "host_features", lambda: old)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))  # compiled here, not fetched,
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")  # and in this process
    assert not jit.runs_isa("avx2")
    seen = []
    real_emulate = emulate_module.emulate_ir

    def emulate(text, have, tiles):
        seen.extend(lacking_instructions(text, have, tiles))
        return real_emulate(text, have, tiles)

    monkeypatch.setattr(emulate_module, "emulate_ir", emulate)
    mod = _conv()
    exe = P.build(mod, "llvm -isa=avx2 -emulate=yes")
    assert "llvm.x86.avx2.pmadd.wd" in seen
    data = np.random.default_rng(3).integers(-128, 128, (1, 8, 8, 64), dtype=np.int8)
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])


def test_emulated_amx_split_kernels_run_their_chunks_on_the_parts_configuration(
        tmp_path, monkeypatch):
    """A split AMX kernel's parts load the tile configuration once and its chunk functions use
    the tiles without loading it (emit/int8/amx.py): emulated, such a function's tile state
    starts from TILE_CONFIG (its own frame's), so a -threads=2 AMX build runs anywhere with
    the interpreter's bits, both drivers: a pointwise convolution (64 x 64 pixels in blocks of
    32) and a dynamic-int8 product (40 rows, into K's transposed heads)."""
    from test_llvm_dynq_epilogue import heads_module

    monkeypatch.setattr(jit, "_AMX", False)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    geo = {"hw": (64, 64), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
           "padding": (0, 0, 0, 0)}
    conv = build_graph("conv", "int8", 64, 64, geo, 3, True, None)[0]
    data = np.random.default_rng(4).integers(-128, 128, (1, 64, 64, 64), dtype=np.int8)
    dense, feeds = heads_module(40, (0, 2, 3, 1))
    for mod, inputs in ((conv, [data]), (dense, feeds)):
        exe = P.build(mod, "llvm -isa=amx -emulate=yes -threads=2")
        regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
        assert regions and all(r.needs == [] for r in regions)
        for r in regions:
            turns = iter(["pool", "alone"] * 2)
            r.modes.choose = lambda turns=turns: next(turns)  # both drivers
        want = P.interpret(mod, inputs)[0]
        for _ in range(3):
            assert exe.run(*inputs)[0].tobytes() == want.tobytes()
