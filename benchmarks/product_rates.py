"""Multiply-adds per cycle of each tier's product instructions on this core, against the peaks
backends/llvm/peak.py assumes (two vector multiply-add ports):

    python benchmarks/product_rates.py [--reps 32768]

Each row is an inline-assembly loop of 12 independent chains of one instruction (or a short
sequence), timed at peak.py's measured clock, best of 15 timings: the instruction's throughput
on this CPU, not a kernel's. A CPU whose rate is half the table's (one 512-bit port, or
double-pumped AVX-512 as on Zen 4) reaches half the tier's nominal peak; the profile's fractions
of peak are then against a rate it cannot reach. Rows this CPU cannot run are skipped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

import partita  # noqa: E402, F401  (the source tree's import hook)

PEAK_NOTE = {"vpdpbusd zmm": "vnni int8 128", "vpdpbusd ymm (vex)": "avxvnni int8 64",
             "vpmaddubsw ymm": "avx2 int8 nominal 64", "vpmaddwd ymm": "avx2 exact int8 32",
             "vfmadd231ps zmm": "vnni / amx float 32", "vfmadd231ps ymm": "avx2 float 16"}


def rates(reps: int) -> dict[str, float]:
    """Each peak.PRODUCT_ROUTES row this CPU runs: multiply-adds per cycle (peak.route_rates)."""
    from partita.backends.llvm.host_cpu import host_features
    from partita.backends.llvm.peak import PRODUCT_ROUTES, measured_clock_hz, route_rates

    have = host_features()
    routes = [r for r in PRODUCT_ROUTES if r[3] <= have]
    return {"clock GHz": measured_clock_hz() / 1e9, **route_rates(routes, reps, timings=15)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1 << 15)
    args = ap.parse_args()
    from partita.backends.llvm.host_cpu import host_cpu

    found = rates(args.reps)
    print(f"CPU: {host_cpu()} (LLVM's name); measured clock {found.pop('clock GHz'):.3f} GHz")
    print(f"{'instruction':24s} {'multiply-adds / cycle':>22s}   peak.py's row")
    for name, rate in found.items():
        print(f"{name:24s} {rate:22.1f}   {PEAK_NOTE.get(name, '')}")


if __name__ == "__main__":
    main()
