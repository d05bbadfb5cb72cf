"""The rate emit/int8/amx.py's tile loop can reach on this core: inline-assembly loops of its
2 x 2 block (four int32 accumulator tiles, two A tiles of 16 pixels x 64 bytes, two 1 KB B
tiles), TDPBUSD per 16 cycles at backends/llvm/peak.py's measured clock (1.0 is the tier's
peak, 1,024 multiply-adds a cycle).

    python benchmarks/amx_loop_ceiling.py [--rounds 3]

Each loop runs k steps of the block: the four tiles loaded (A from rows 64 bytes apart, B from
a panel of 1 KB slabs), then four TDPBUSD; or parts of that, to show what bounds it: TDPBUSD on
tiles alone (the unit's own rate), the loads alone (TILELOADD's throughput), the stores alone
(TILESTORED, which every block pays four times), the loads one per four products. The tiles'
rows start on a cache line or 16 bytes off one (the A rows of a convolution whose channel
count is no multiple of 64, read in place: emit/int8/amx.py stages those). B comes from L1 (a
32 KB panel), L2 (1 MB) or beyond (4 MB). Thread CPU time, best of 5 calls a round, rounds
interleaved: quote ``uptime`` with the figures. Linux with AMX only (the OS grants the tiles).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's partita

import numpy as np  # noqa: E402

import partita  # noqa: E402, F401  (the source tree's import hook)

A_LOADS = ["tileloadd (%rdx,%r12,1), %tmm4", "tileloadd 1024(%rdx,%r12,1), %tmm5"]
B_LOADS = ["tileloadd (%rsi,%r11,1), %tmm6", "tileloadd 1024(%rsi,%r11,1), %tmm7"]
PRODUCTS = ["tdpbusd %tmm6, %tmm4, %tmm0", "tdpbusd %tmm7, %tmm4, %tmm1",
            "tdpbusd %tmm6, %tmm5, %tmm2", "tdpbusd %tmm7, %tmm5, %tmm3"]
STORES = [f"tilestored %tmm{t}, {1024 * t}(%rdx,%r11,1)" for t in range(4)]
# (name, loop body, B bytes a step, k steps a pass, counted operations a step)
LOOPS = [
    ("TDPBUSD on tiles alone", PRODUCTS, 0, 64, 4),
    ("2 x 2 block, B in L1", A_LOADS + B_LOADS + PRODUCTS, 2048, 16, 4),
    ("2 x 2 block, B from L2 (1 MB)", A_LOADS + B_LOADS + PRODUCTS, 2048, 512, 4),
    ("2 x 2 block, B from beyond L2 (4 MB)", A_LOADS + B_LOADS + PRODUCTS, 2048, 2047, 4),
    ("one B load per 4 TDPBUSD, in L1", B_LOADS[:1] + PRODUCTS, 2048, 16, 4),
    ("4 TILELOADD alone, in L1", A_LOADS + B_LOADS, 2048, 16, 4),
    ("4 TILESTORED alone, in L1", STORES, 0, 16, 4),
]


def loop_asm(body: list[str], b_step: int, steps: int) -> str:
    """AT&T assembly: the tile configuration from rax, then ``steps`` k steps of ``body`` (B
    at rsi advancing ``b_step`` bytes a step, A at rdx 64 bytes a step, rows 64 bytes apart),
    rdi passes."""
    out = ["ldtilecfg (%rax)"] + [f"tilezero %tmm{t}" for t in range(8)]
    out += ["movq $$64, %r11", "movq $$64, %r12", "movq %rdi, %r8", "1:", "movq %rcx, %rsi",
            "movq %r9, %rdx", f"movq $${steps}, %r10", "2:"]
    out += body
    if b_step:
        out += [f"addq $${b_step}, %rsi", "addq $$64, %rdx"]
    out += ["decq %r10", "jnz 2b", "decq %r8", "jnz 1b", "tilerelease"]
    return "\\0A".join(out)


def compile_loop(text: str):
    """``void f(i64 passes, ptr b, ptr a, ptr config)`` running the loop (llvmlite's MCJIT)."""
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import ensure_initialized

    ensure_initialized()
    llvm.initialize_native_asmparser()
    clobbers = ",".join(f"~{{{r}}}" for r in ("rdi", "rsi", "rdx", "rcx", "rax", "r8", "r9",
                                             "r10", "r11", "r12", "memory"))
    head = "\\0A".join(["movq $0, %rdi", "movq $1, %rcx", "movq $2, %r9", "movq $3, %rax"])
    ir_text = f"""
define void @f(i64 %n, ptr %b, ptr %a, ptr %cfg) {{
  call void asm sideeffect "{head}\\0A{text}",
    "r,r,r,r,{clobbers}"(i64 %n, ptr %b, ptr %a, ptr %cfg)
  ret void
}}"""
    module = llvm.parse_assembly(ir_text)
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)(engine.get_function_address("f"))
    return fn, engine


def buffer(nbytes: int, skew: int) -> np.ndarray:
    """``nbytes`` of ones starting ``skew`` bytes past a cache line."""
    raw = np.ones(nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + skew
    return raw[start : start + nbytes]


def main(argv=None) -> int:
    from partita.backends.llvm.emit.int8.amx import TILE_CONFIG
    from partita.backends.llvm.peak import measured_clock_hz
    from partita.backends.llvm.runtime.jit import amx_permitted

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if not amx_permitted():
        print("this CPU or OS grants no AMX tiles: nothing to measure", file=sys.stderr)
        return 2
    config = np.array(TILE_CONFIG, np.uint8)
    made = [(name, steps, ops, *compile_loop(loop_asm(body, b_step, steps)))
            for name, body, b_step, steps, ops in LOOPS]
    buffers = {skew: (buffer(4 << 20, skew), buffer(4 << 20, skew)) for skew in (0, 16)}
    clock = measured_clock_hz()
    rates: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for name, steps, ops, fn, _engine in made:
            for skew, (b, a) in buffers.items():
                if skew and name.startswith(("TDPBUSD", "4 TILESTORED")):
                    continue  # no loads: the rows' offset does not apply
                passes = max(1, 200_000 // steps)
                best = min(_timed(fn, passes, b, a, config) for _ in range(5))
                rates.setdefault((name, skew), []).append(passes * steps * ops * 16 / best
                                                          / clock)
    print(f"AMX 2 x 2 tile loop; clock {clock / 1e9:.2f} GHz (peak.measured_clock_hz); "
          f"load average {os.getloadavg()[0]:.2f}")
    print("  operations per 16 cycles (TDPBUSD's peak rate is 1.0; for the loads and stores "
          "alone, tile loads or stores)")
    for (name, skew), values in rates.items():
        where = "rows 16 bytes off a line" if skew else "rows on cache lines"
        print(f"  {name:40s} {where:26s} {' '.join(f'{v:.2f}' for v in values)}")
    return 0


def _timed(fn, passes: int, b: np.ndarray, a: np.ndarray, config: np.ndarray) -> float:
    t = time.thread_time()
    fn(passes, b.ctypes.data, a.ctypes.data, config.ctypes.data)
    return time.thread_time() - t


if __name__ == "__main__":
    sys.exit(main())
