"""Running a two-thread build through both of TwoModes' drivers, whatever the machine's load:
each region's choice alternates "pool" (the worker's driver) and "alone" (the one-thread one)."""

from __future__ import annotations


def alternate_drivers(exe, rounds: int) -> list:
    """The regions of ``exe`` that have the two-thread driver, each set to alternate its two
    drivers for ``rounds`` pairs of runs."""
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    for region in regions:
        turns = iter(["pool", "alone"] * rounds)
        region.modes.choose = lambda turns=turns: next(turns)
    return regions
