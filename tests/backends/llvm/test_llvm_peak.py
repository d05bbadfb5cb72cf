"""``partita profile``'s per-kernel speed (backends/llvm/peak.py): multiply-adds, GMAC/s
(GFLOP/s for float products), the tier's peak at the measured clock and the fraction reached.
The numbers are checked for presence and consistency, not for speed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from partita.backends.llvm.peak import (
    ACHIEVABLE_INT8,
    PEAK,
    int8_route_rates,
    measured_clock_hz,
    peak_per_cycle,
    vector_clock_hz,
)
from test_llvm_dynq_dense import dense_module, inputs

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var, get_op
from partita.runtime.artifact import load_executable_bytes


def test_the_measured_clock_is_a_clock():
    hz = measured_clock_hz()
    assert 3e8 < hz < 8e9  # a dependent add per cycle: this core's cycles per second


@pytest.mark.parametrize("register, needs", [("zmm", "+avx512f"), ("ymm", "+fma")])
def test_the_clock_under_vector_multiply_adds_is_a_clock(register, needs):
    """The add chain beside VFMADDs on ``register``: a clock at most the scalar one's (a
    vector license may lower it), not far below it (the FMAs hide in the chain's shadow)."""
    from partita.backends.llvm.host_cpu import host_features

    if needs not in host_features():
        pytest.skip(f"this host has no {needs[1:]}")
    ratio = vector_clock_hz(register) / measured_clock_hz()
    assert 0.4 < ratio < 1.15, ratio


@pytest.mark.parametrize(
    "features, width",
    [({"+sse2"}, 1), ({"+sse2", "+avx2"}, 2), ({"+avx2", "+avx512f", "+avx512bw"}, 4),
     ({"+avx2", "+avx512f"}, 2)],
)
def test_plain_peak_follows_the_host_vector_width(monkeypatch, features, width):
    """-isa=plain is generic IR compiled for the host: LLVM vectorizes it with the host's widest
    vectors, so its peak scales with them (a fraction over 1 on an AVX-512 host otherwise)."""
    from partita.backends.llvm import host_cpu

    monkeypatch.setattr(host_cpu, "host_features", lambda: features)
    assert peak_per_cycle("plain", "int8") == PEAK["plain"][0] * width
    assert peak_per_cycle("plain", "float") == PEAK["plain"][1] * width
    assert peak_per_cycle("vnni", "int8") == PEAK["vnni"][0]  # the tiers name their own


def _float_dense(m, k, n):
    x = Var("x", TensorType((m, k), "float32"))
    w = np.random.default_rng(0).standard_normal((n, k)).astype(np.float32)
    return P.InferType()(IRModule({"main": Function([x], get_op("nn.dense")(x, Constant(w)))}))


@pytest.mark.parametrize("isa", ["plain", "avx2"])
def test_product_kernels_report_their_speed_and_fraction_of_peak(isa):
    from partita.backends.llvm.host_cpu import lacking

    if lacking([isa]):
        pytest.skip(f"this CPU cannot run -isa={isa}")
    m, k, n = 16, 96, 40
    cases = [(dense_module(m, k, n, "uint8", "int8", "vpmaddubsw", 1), inputs(m, k, "uint8", 1),
              "DYNQ_DENSE", "int8"),
             (_float_dense(m, k, n), [np.ones((m, k), np.float32)], "FDENSE", "float")]
    for mod, xs, kind, cls in cases:
        exe = P.build(mod, f"llvm -isa={isa}")
        prof = exe.profile(*xs)
        (op,) = [op for s in prof.steps for op in s.ops if op.metrics.get("kernel") == kind]
        mt = op.metrics
        assert mt["macs"] == m * k * n and mt["k"] == k
        assert mt["tier"] == isa
        assert mt["peak_macs_per_cycle"] == peak_per_cycle(isa, cls)
        rate = m * k * n / op.time_s
        assert mt["gmac_s"] == pytest.approx(rate / 1e9, rel=1e-2, abs=1e-3)
        assert mt["peak_gmac_s"] == pytest.approx(mt["peak_macs_per_cycle"] * mt["clock_ghz"],
                                                  rel=1e-2)
        assert mt["utilisation"] == pytest.approx(rate / 1e9 / mt["peak_gmac_s"], rel=1e-2,
                                                  abs=1e-4)
        reach = ACHIEVABLE_INT8.get(isa) if cls == "int8" else None
        assert mt.get("achievable_macs_per_cycle") == reach
        if reach:  # avx2 int8: the fraction of the int32-reachable rate as well, shown
            assert mt["achievable_utilisation"] == pytest.approx(
                rate / 1e9 / (reach * mt["clock_ghz"]), rel=1e-2, abs=1e-4)
            assert "reachable into int32 sums" in prof.table()
        assert ("gflop_s" in mt) == (cls == "float")
        if cls == "float":
            assert mt["gflop_s"] == pytest.approx(2 * mt["gmac_s"], rel=1e-2, abs=1e-3)
        table = prof.table()
        assert "GMAC/s" in table and f"{isa} {cls} products: 1 kernels" in table
        assert "% of the tier's peak" in table
        # a saved and loaded executable keeps the kernels' multiply-adds and tier
        again = load_executable_bytes(exe.to_bytes(), trust=True)
        ops = [o for s in again.profile(*xs).steps for o in s.ops
               if o.metrics.get("kernel") == kind]
        assert ops[0].metrics["macs"] == m * k * n and ops[0].metrics["tier"] == isa
        data = json.loads(prof.to_json())  # --json: the same metrics as plain JSON
        (row,) = [o for s in data["steps"] for o in s["ops"] if o.get("kernel") == kind]
        assert row["gmac_s"] == mt["gmac_s"] and row["utilisation"] == mt["utilisation"]


def test_int8_route_rates_measure_every_route():
    """The measurement behind ACHIEVABLE_INT8["avx2"] runs and reports a rate per instruction
    sequence (the figures themselves are in docs/performance.md: speed is not asserted here)."""
    from partita.backends.llvm.host_cpu import lacking

    if lacking(["avx2"]):
        pytest.skip("this CPU cannot run AVX2")
    rates = int8_route_rates(1 << 14)
    assert {"vpmaddubsw", "vpmaddubsw+vpmaddwd+vpaddd"} <= set(rates)
    assert all(np.isfinite(r) and r > 0 for r in rates.values())


def test_tier_rate_times_the_instruction_each_tier_runs(monkeypatch):
    """cpu.py's check of the peak table on the CPU at hand: each tier's product instruction
    (TIER_ROUTES) this CPU can run is timed, one it cannot is not tried (None, not a fault of
    the assembler), and plain has no one instruction to time."""
    from partita.backends.llvm import host_cpu
    from partita.backends.llvm.peak import PRODUCT_ROUTES, TIER_ROUTES, tier_rate

    features = host_cpu.host_features()
    needs = {r[0]: r[3] for r in PRODUCT_ROUTES}
    for (isa, cls), name in TIER_ROUTES.items():
        found = tier_rate(isa, cls, reps=1 << 10)
        runnable = needs.get(name, frozenset({"+avx2"})) <= features
        assert (found is not None) == runnable, (isa, cls)
        if found is not None:
            assert found[0] == name and np.isfinite(found[1]) and found[1] > 0
    assert tier_rate("plain", "int8") is None and tier_rate("amx", "int8") is None
    monkeypatch.setattr(host_cpu, "host_features", lambda: set())
    assert all(tier_rate(isa, cls) is None for isa, cls in TIER_ROUTES)
