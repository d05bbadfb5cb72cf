"""What a kernel's speed is out of: its multiply-adds, the tier's peak multiply-adds per cycle
and this core's clock, measured (``partita profile``'s GMAC/s and fraction of peak).

Peak per core, in multiply-adds per cycle, of the fastest instruction each tier's kernels use
for a product (two vector multiply-add ports, as Skylake/Ice Lake/Sapphire Rapids and Zen 3/4/5
have; a part with one 512-bit port, or Zen 4's double-pumped AVX-512, reaches half the
AVX-512 rates; ``benchmarks/product_rates.py`` measures each row on the CPU at hand: an AMD
EPYC Zen 5 reached every row, 127 for VPDPBUSD zmm, 32 for VFMADD zmm):

    tier      int8 products                                    float32 products
    plain     16   SSE2 PMADDWD, 8 int16 pairs x 2 ports        8   SSE MULPS + ADDPS, 4 lanes x 2
    avx2      64   VPMADDUBSW, 32 u8 x s8 x 2 ports (then        16   VFMADD, 8 lanes x 2 ports
                   VPMADDWD widens; exact sums by VPMADDWD of
                   int16 operands: 32, half the peak)
    avxvnni   64   VPDPBUSD ymm, 32 x 2 ports                   16   VFMADD ymm
    vnni      128  VPDPBUSD zmm, 64 x 2 ports                   32   VFMADD zmm, 16 lanes x 2
    amx       1024 TDPBUSD, 16 x 16 x 64 per 16 cycles           32   VFMADD zmm (AMX-BF16 unused)

The nominal int8 figure is not reachable into int32 sums on AVX2: VPMADDUBSW leaves int16 pair
sums, and widening them (VPMADDWD with ones) takes a second multiply-port op, as does the exact
route (VPMADDWD on int16-widened operands, 16 products per op). Either way two multiply-pipe
ops per 32 products, so the achievable int32-accumulation rate is 32 per cycle
(``ACHIEVABLE_INT8``). Measured on the AMD EPYC Zen 3 (``int8_route_rates``, inline-assembly
loops of 12 independent chains, cycles at the measured clock, load ~6 on 2 cores): VPMADDUBSW
alone 65 products/cycle, VPMADDWD alone 32, VPMADDUBSW + VPMADDWD(ones) + VPADDD 30. Profiles
show both fractions: of the nominal peak (``utilisation``) and of the achievable one
(``achievable_utilisation``).

``plain`` is generic IR compiled for the host, so LLVM vectorizes it at the host's widths; its
peak is scaled by them (``plain_width``: ymm 2x, zmm 4x the SSE2 row).

The clock is measured, not read: a chain of dependent 64-bit register adds (one cycle each on
every x86 core since the Pentium 4; not immediate adds, which Golden Cove folds at rename)
timed over ~20 ms gives the cycles per second this core runs at under the current load and
turbo state (``measured_clock_hz``). A kernel's fraction of peak is
``macs / seconds / (peak_per_cycle * clock)``: one core's peak (a two-thread kernel can exceed
1.0 of it)."""

from __future__ import annotations

import ctypes
import functools
import time

from llvmlite import ir

from .kinds import Kind

# multiply-adds per cycle per core: (int8, float32)
PEAK = {
    "plain": (16, 8),
    "avx2": (64, 16),
    "avxvnni": (64, 16),
    "vnni": (128, 32),
    "amx": (1024, 32),
}
# int8 products per cycle that can reach int32 sums, where it differs from the nominal PEAK
ACHIEVABLE_INT8 = {"avx2": 32}
FLOAT_PRODUCTS = {Kind.FDENSE, Kind.FBMM, Kind.FCONV, Kind.FDW, Kind.FCONVT, Kind.FWINO}
INT_PRODUCTS = {Kind.VCONV, Kind.VDW, Kind.DYNQ_DENSE, Kind.QBMM, Kind.EXACT_INT_DENSE,
                Kind.IBMM, Kind.FC, Kind.CONV, Kind.DWCONV, Kind.WMAC, Kind.GCONV}
CHAIN = 1 << 22  # adds per timing of the clock (~1.4 ms at 3 GHz), best of several


def kernel_macs(k) -> int:
    """The multiply-adds a product kernel does (0 for other kernels or unknown geometry):
    M x N x K (times batches), or output pixels x channels x taps (x input channels)."""
    if k.kind not in FLOAT_PRODUCTS | INT_PRODUCTS:
        return 0
    p = k.params
    if all(key in p for key in ("M", "N", "K")):
        count = int(p["M"]) * int(p["N"]) * int(p["K"])
        return count * int(p.get("B", 1)) * int(p.get("batch", 1))
    if k.kind == Kind.FCONV and all(key in p for key in ("images", "size", "G", "M", "Kg")):
        return int(p["images"] * p["size"] * p["G"] * p["M"] * p["Kg"])
    if all(key in p for key in ("OH", "OW", "OC")):
        depth = p.get("C", 1) if k.kind == Kind.VCONV else 1
        count = p["OH"] * p["OW"] * p["OC"] * p.get("KH", 1) * p.get("KW", 1) * depth
        return int(count * p.get("batch", 1))
    return 0


def kernel_depth(k) -> int:
    """The length of each output's sum (K; a convolution's taps x input channels), 0 unknown."""
    if k.kind not in FLOAT_PRODUCTS | INT_PRODUCTS:
        return 0
    p = k.params
    if "K" in p:
        return int(p["K"])
    if k.kind == Kind.FCONV and "Kg" in p:
        return int(p["Kg"])
    if "OC" in p:
        return int(p.get("KH", 1) * p.get("KW", 1) * (p.get("C", 1) if k.kind == Kind.VCONV else 1))
    return 0


def kernel_class(kind: str) -> str | None:
    """"float" or "int8" for a product kernel's peak; None for other kernels."""
    if kind in FLOAT_PRODUCTS:
        return "float"
    return "int8" if kind in INT_PRODUCTS else None


def peak_per_cycle(isa: str, cls: str) -> int:
    """The tier's multiply-adds per cycle per core for ``cls`` ("int8" or "float"). ``plain`` is
    generic IR compiled for this host, which LLVM vectorizes at the host's widest vectors: its
    peak is the SSE2 figure times ``plain_width()`` (VPMADDWD / VFMADD on ymm or zmm)."""
    int8, f32 = PEAK.get(isa, PEAK["plain"])
    if isa not in PEAK or isa == "plain":
        scale = plain_width()
        int8, f32 = int8 * scale, f32 * scale
    return int8 if cls == "int8" else f32


def plain_width() -> int:
    """How many SSE widths LLVM's own vectorization reaches on this host: 4 with AVX-512BW
    (zmm), 2 with AVX2 (ymm), else 1."""
    from .host_cpu import host_features

    have = host_features()
    if {"+avx512f", "+avx512bw"} <= have:
        return 4
    return 2 if "+avx2" in have else 1


@functools.cache
def measured_clock_hz() -> float:
    """This core's cycles per second: the best of 5 timings of CHAIN dependent adds (inline
    assembly, so LLVM cannot fold the chain), compiled once per process."""
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import Loaded, compile_ir, ensure_initialized

    ensure_initialized()
    llvm.initialize_native_asmparser()  # the chain is inline assembly

    module = ir.Module(name="partita_clock")
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(i64, [i64]), "partita_add_chain")
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    v = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    v.add_incoming(fn.args[0], entry)
    add8 = ir.InlineAsm(ir.FunctionType(i64, [i64]), "add $0, $0\n" * 8, "=r,0")
    # 8 dependent adds: 8 cycles; the counter runs beside them. v += v, not v += 1: Intel's
    # Golden Cove and later fold chains of immediate adds at rename (20 GHz "measured")
    nv = b.call(add8, [v])
    ni = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(ni, loop)
    v.add_incoming(nv, loop)
    b.cbranch(b.icmp_signed("<", ni, ir.Constant(i64, CHAIN // 8)), loop, done)
    b.position_at_end(done)
    b.ret(nv)
    loaded = Loaded(compile_ir(str(module))[0])
    chain = loaded.function("partita_add_chain", [ctypes.c_int64], ctypes.c_int64)
    chain(0)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        chain(1)
        best = min(best, time.perf_counter() - t)
    measured_clock_hz.loaded = loaded  # keep the code alive with the answer
    return CHAIN / best


@functools.cache
def vector_clock_hz(register: str = "zmm") -> float:
    """This core's cycles per second while it runs multiply-adds on ``register`` ("zmm" or
    "ymm") vectors: measured_clock_hz's chain of dependent adds with one independent VFMADD
    beside each add, so the core runs at the frequency its vector license grants that load
    (Intel parts may lower the clock for dense 512-bit arithmetic; AMD's Zen 4 / 5 do not).
    A kernel's fraction of peak at this clock is what its tier can reach while it runs."""
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import Loaded, compile_ir, ensure_initialized

    ensure_initialized()
    llvm.initialize_native_asmparser()
    module = ir.Module(name="partita_vector_clock")
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(i64, [i64, i64]), "partita_vector_chain")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i, v = b.phi(i64), b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    v.add_incoming(fn.args[1], entry)
    body = "".join(f"add $0, $0\nvfmadd231ps %{register}1, %{register}0, %{register}{2 + r}\n"
                   for r in range(8))
    clobbers = "=r,0," + ",".join(f"~{{xmm{r}}}" for r in range(10))
    nv = b.call(ir.InlineAsm(ir.FunctionType(i64, [i64]), body, clobbers, side_effect=True), [v])
    ni = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(ni, loop)
    v.add_incoming(nv, loop)
    b.cbranch(b.icmp_signed("<", ni, fn.args[0]), loop, done)
    b.position_at_end(done)
    b.ret(nv)
    loaded = Loaded(compile_ir(str(module))[0])
    chain = loaded.function("partita_vector_chain", [ctypes.c_int64, ctypes.c_int64],
                            ctypes.c_int64)
    chain(CHAIN // 8, 1)  # a warm-up long enough for the license to settle
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        chain(CHAIN // 8, 1)
        best = min(best, time.perf_counter() - t)
    vector_clock_hz.loaded = loaded
    return CHAIN / best


def speed_metrics(kind: str, macs: int, seconds: float | None, isa: str | None,
                  depth: int = 0) -> dict:
    """A product kernel's profile metrics: macs, GMAC/s (float kernels: GFLOP/s, two per
    multiply-add, as well), the tier's peak and the fraction of it reached (``utilisation``)."""
    cls = kernel_class(kind)
    if not macs or cls is None or not seconds or seconds <= 0 or isa is None:
        return {"macs": int(macs)} if macs else {}
    clock = measured_clock_hz()
    per_cycle = peak_per_cycle(isa, cls)
    rate = macs / seconds
    out = {
        "macs": int(macs),
        "gmac_s": round(rate / 1e9, 3),
        "tier": isa,
        "peak_macs_per_cycle": per_cycle,
        "clock_ghz": round(clock / 1e9, 3),
        "peak_gmac_s": round(per_cycle * clock / 1e9, 3),
        "utilisation": round(rate / (per_cycle * clock), 4),
    }
    if cls == "int8" and isa in ACHIEVABLE_INT8:
        reach = ACHIEVABLE_INT8[isa]
        out["achievable_macs_per_cycle"] = reach
        out["achievable_gmac_s"] = round(reach * clock / 1e9, 3)
        out["achievable_utilisation"] = round(rate / (reach * clock), 4)
    if depth:
        out["k"] = int(depth)
    if cls == "float":
        out["gflop_s"] = round(2 * rate / 1e9, 3)
    return out


def _chains(op: str, reg: str, vex: bool = False) -> str:
    prefix = "{vex} " if vex else ""
    return "".join(f"{prefix}{op} %{reg}1, %{reg}0, %{reg}{r}\n" for r in range(2, 14))


_AVX2 = frozenset({"+avx2"})
# (name, products per repetition, AT&T body, the host features it needs): 12 independent
# chains, so throughput not latency; the AVX2 sequences into int32 sums
_ROUTES = (
    ("vpmaddubsw", 12 * 32, _chains("vpmaddubsw", "ymm"), _AVX2),
    ("vpmaddwd", 12 * 16, _chains("vpmaddwd", "ymm"), _AVX2),
    ("vpmaddubsw+vpmaddwd+vpaddd", 6 * 32, "".join(
        f"vpmaddubsw %ymm1, %ymm0, %ymm{2 + r}\nvpmaddwd %ymm15, %ymm{2 + r}, %ymm{2 + r}\n"
        f"vpaddd %ymm{2 + r}, %ymm{8 + r}, %ymm{8 + r}\n" for r in range(6)), _AVX2),
    # the exact sign kernel's step (vconv sign_step): the weights signed by the activations
    ("vpsignb+vpmaddubsw+vpmaddwd+vpaddd", 6 * 32, "".join(
        f"vpsignb %ymm0, %ymm1, %ymm{2 + r}\nvpmaddubsw %ymm{2 + r}, %ymm0, %ymm{2 + r}\n"
        f"vpmaddwd %ymm15, %ymm{2 + r}, %ymm{2 + r}\n"
        f"vpaddd %ymm{2 + r}, %ymm{8 + r}, %ymm{8 + r}\n" for r in range(6)), _AVX2),
)


# every tier's product instruction, as a throughput loop of 12 independent chains: (name,
# multiply-adds per repetition, AT&T body, the host features it needs); the rows
# benchmarks/product_rates.py times, and TIER_ROUTES' sources
PRODUCT_ROUTES = (
    ("vpdpbusd zmm", 12 * 64, _chains("vpdpbusd", "zmm"), frozenset({"+avx512vnni"})),
    ("vpdpbusd ymm (vex)", 12 * 32, _chains("vpdpbusd", "ymm", vex=True),
     frozenset({"+avxvnni"})),
    ("vpmaddubsw zmm", 12 * 64, _chains("vpmaddubsw", "zmm"), frozenset({"+avx512bw"})),
    ("vpmaddubsw ymm", 12 * 32, _chains("vpmaddubsw", "ymm"), _AVX2),
    ("vpmaddwd ymm", 12 * 16, _chains("vpmaddwd", "ymm"), _AVX2),
    ("vpmaddwd xmm", 12 * 4, _chains("vpmaddwd", "xmm"), frozenset()),
    ("vfmadd231ps zmm", 12 * 16, _chains("vfmadd231ps", "zmm"), frozenset({"+avx512f"})),
    ("vfmadd231ps ymm", 12 * 8, _chains("vfmadd231ps", "ymm"), frozenset({"+fma"})),
)
# the product each tier's kernels run, by (tier, "int8" | "float"): the rate PEAK (or, on
# avx2, ACHIEVABLE_INT8) assumes for it; avx2's int8 one is the route into int32 sums
TIER_ROUTES = {
    ("vnni", "int8"): "vpdpbusd zmm",
    ("avxvnni", "int8"): "vpdpbusd ymm (vex)",
    ("avx2", "int8"): "vpmaddubsw+vpmaddwd+vpaddd",
    ("vnni", "float"): "vfmadd231ps zmm",
    ("amx", "float"): "vfmadd231ps zmm",
    ("avxvnni", "float"): "vfmadd231ps ymm",
    ("avx2", "float"): "vfmadd231ps ymm",
}


def tier_rate(isa: str, cls: str, reps: int = 1 << 15) -> tuple[str, float] | None:
    """The product instruction ``isa``'s ``cls`` kernels run and the multiply-adds per cycle
    this core runs it at (its throughput loop, best of 7 timings at the measured clock), or
    None for a tier without one row (plain, amx's int8: benchmarks/amx_loop_ceiling.py) or
    one this CPU cannot run. A CPU with one 512-bit multiply port runs the vnni rows at half
    PEAK's rate: a kernel's fraction of peak is then against a rate the core cannot reach."""
    from partita.backends.llvm.host_cpu import host_features

    name = TIER_ROUTES.get((isa, cls))
    routes = {r[0]: r for r in (*PRODUCT_ROUTES, *_ROUTES)}
    if name is None or not routes[name][3] <= host_features():
        return None
    return name, route_rates([routes[name]], reps, timings=7)[name]


def int8_route_rates(reps: int = 1 << 16) -> dict[str, float]:
    """int8 products per cycle of each AVX2 product sequence (``_ROUTES``), measured: the best
    of 5 timings of ``reps`` repetitions at the measured clock. AVX2 CPUs only."""
    return route_rates(_ROUTES, reps, timings=5)


def route_rates(routes, reps: int = 1 << 16, timings: int = 5) -> dict[str, float]:
    """Products per cycle of each (name, products per repetition, AT&T body, features) in
    ``routes``: an inline-assembly loop of the body, the best of ``timings`` timings of
    ``reps`` repetitions at the measured clock (benchmarks/product_rates.py: every tier's rows)."""
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import Loaded, compile_ir, ensure_initialized

    ensure_initialized()
    llvm.initialize_native_asmparser()
    module = ir.Module(name="partita_routes")
    i64 = ir.IntType(64)
    clobbers = ",".join(f"~{{xmm{r}}}" for r in range(16))
    for k, (_, _, body, *_) in enumerate(routes):
        fn = ir.Function(module, ir.FunctionType(i64, [i64]), f"route{k}")
        entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
        b = ir.IRBuilder(entry)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        b.call(ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), body, clobbers,
                            side_effect=True), [])
        ni = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(ni, loop)
        b.cbranch(b.icmp_signed("<", ni, fn.args[0]), loop, done)
        b.position_at_end(done)
        b.ret(ni)
    loaded = Loaded(compile_ir(str(module))[0])
    clock = measured_clock_hz()
    rates = {}
    for k, (name, products, *_) in enumerate(routes):
        f = loaded.function(f"route{k}", [ctypes.c_int64], ctypes.c_int64)
        f(1000)
        best = float("inf")
        for _ in range(timings):
            t = time.perf_counter()
            f(reps)
            best = min(best, time.perf_counter() - t)
        rates[name] = products * reps / (best * clock)
    return rates


__all__ = ["ACHIEVABLE_INT8", "PEAK", "PRODUCT_ROUTES", "TIER_ROUTES", "int8_route_rates",
           "kernel_depth", "kernel_macs", "measured_clock_hz", "peak_per_cycle", "route_rates",
           "speed_metrics", "tier_rate", "vector_clock_hz"]
