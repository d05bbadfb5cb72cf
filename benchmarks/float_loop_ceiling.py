"""The rate gemm.py's float inner loop can reach on this core: inline-assembly loops of its
register tile, multiply-adds per cycle at backends/llvm/peak.py's measured clock.

    python benchmarks/float_loop_ceiling.py [--rounds 3] [--isa avx512|avx2]

Each loop runs k steps of gemm_tile's tile (6 x 4 zmm; 6 x 2 ymm for AVX2): the B vectors
loaded (a packed panel, on cache lines or 16 bytes off one), one broadcast of x a row, an FMA
per accumulator; 64 steps a pass (the panel in L1) or 1,024 (from L2 on AVX-512). A loop of
FMAs on registers alone is the FMA ports' own ceiling. Peak is two vector FMAs a cycle
(peak.py's float rows); a product kernel's fraction of peak cannot exceed its loop's. Thread CPU
time, best of 7 calls a round, rounds interleaved: quote ``uptime`` with the figures.
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

STEPS_L1, STEPS_L2 = 64, 1024  # k steps a pass: 16 KB or 256 KB of 4-zmm panel


def loop_asm(rows: int, vecs: int, width: int, steps: int, loads: bool) -> str:
    """AT&T assembly of ``steps`` k steps (then again, rdi times): B at rsi (vecs vectors of
    ``width`` bytes a step), x's rows 8 KB apart at rdx (a 4-byte broadcast a row and step)."""
    reg = "zmm" if width == 64 else "ymm"
    acc = rows * vecs
    b0, a0 = acc, acc + vecs  # registers: accumulators, then B, then the broadcast
    out = [f"vxorps %{reg}{i}, %{reg}{i}, %{reg}{i}" for i in range(a0 + 1)]
    out += ["movq %rdi, %r8", "1:", "movq %rcx, %rsi", "movq %r9, %rdx",
            f"movq $${steps}, %r10", "2:"]
    if loads:
        out += [f"vmovaps {width * v}(%rsi), %{reg}{b0 + v}" for v in range(vecs)]
    for r in range(rows):
        if loads:
            out.append(f"vbroadcastss {8192 * r}(%rdx), %{reg}{a0}")
        out += [f"vfmadd231ps %{reg}{b0 + v}, %{reg}{a0}, %{reg}{r * vecs + v}"
                for v in range(vecs)]
    if loads:
        out += [f"addq $${width * vecs}, %rsi", "addq $$4, %rdx"]
    out += ["decq %r10", "jnz 2b", "decq %r8", "jnz 1b"]
    return "\\0A".join(out)


def compile_loop(text: str, regs: list[str], features: str):
    """A ``void f(i64 passes, ptr b, ptr a)`` running the loop, through llvmlite's MCJIT."""
    import llvmlite.binding as llvm
    from partita.backends.llvm.runtime.jit import ensure_initialized

    ensure_initialized()
    llvm.initialize_native_asmparser()  # the loop is inline assembly
    clobbers = ",".join(["~{rdi}", "~{rsi}", "~{rdx}", "~{rcx}", "~{r8}", "~{r9}", "~{r10}",
                         "~{memory}"] + [f"~{{{r}}}" for r in regs])
    ir_text = f"""
define void @f(i64 %n, ptr %b, ptr %a) {{
  call void asm sideeffect "movq $0, %rdi\\0Amovq $1, %rcx\\0Amovq $2, %r9\\0A{text}",
    "r,r,r,{clobbers}"(i64 %n, ptr %b, ptr %a)
  ret void
}}"""
    module = llvm.parse_assembly(ir_text)
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=features, opt=2)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("f"))
    return fn, engine


def main(argv=None) -> int:
    import llvmlite.binding as llvm
    from partita.backends.llvm.peak import measured_clock_hz

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--isa", choices=["avx512", "avx2"], default=None,
                    help="default: avx512 where the host has it")
    args = ap.parse_args(argv)
    features = llvm.get_host_cpu_features()
    isa = args.isa or ("avx512" if features.get("avx512f") else "avx2")
    width, rows, vecs = (64, 6, 4) if isa == "avx512" else (32, 6, 2)  # gemm_tile's tiles
    lanes = width // 4
    raw_b = np.zeros(STEPS_L2 * vecs * lanes + 64, np.float32)
    start = -(raw_b.ctypes.data // 4) % 16
    a = np.ones(2048 * rows + 64, np.float32)
    loops = [("FMAs on registers alone", STEPS_L1, False, 0),
             ("B in L1 (64 steps), aligned", STEPS_L1, True, 0),
             ("B from L2 (1,024 steps), aligned", STEPS_L2, True, 0),
             ("B in L1, 16 bytes off a line", STEPS_L1, True, 4)]
    made = []
    for name, steps, loads, skew in loops:
        text = loop_asm(rows, vecs, width, steps, loads)
        if skew:  # vmovaps would fault off a boundary: the skewed loop loads unaligned
            text = text.replace("vmovaps", "vmovups")
        regs = [f"zmm{i}" for i in range(32)] if width == 64 else [f"ymm{i}" for i in range(16)]
        made.append((name, steps, skew, *compile_loop(text, regs, features.flatten())))
    clock = measured_clock_hz()
    fmas_per_step = rows * vecs
    best: dict[str, list[float]] = {name: [] for name, *_ in made}
    for _ in range(args.rounds):
        for name, steps, skew, fn, _engine in made:
            passes = max(1, 40000 * STEPS_L1 // steps)
            b = raw_b[start + skew:]
            t = min(_timed(fn, passes, b, a) for _ in range(7))
            best[name].append(passes * steps * fmas_per_step / t / clock)
    print(f"{isa}: a {rows} x {vecs} tile of {lanes}-float vectors; clock {clock / 1e9:.2f} GHz "
          f"(peak.measured_clock_hz); load average {os.getloadavg()[0]:.2f}")
    for name, rates in best.items():
        print(f"  {name:34s} {' '.join(f'{r:.2f}' for r in rates)} FMA/cycle "
              f"(of 2: {50 * max(rates):.0f}% of peak at best)")
    return 0


def _timed(fn, passes: int, b: np.ndarray, a: np.ndarray) -> float:
    t = time.thread_time()
    fn(passes, b.ctypes.data, a.ctypes.data)
    return time.thread_time() - t


if __name__ == "__main__":
    sys.exit(main())
