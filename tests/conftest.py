"""Shared test set-up: this folder is on sys.path (pytest's prepend mode), so test folders can
import the shared builders in common_graphs.py.

The suite runs on pytest-xdist with one worker per core and a module's tests on one worker
(`--dist loadscope`). A module that starts last decides when the suite ends, so the modules are
handed out longest first (the classic longest-processing-time rule): their seconds are read from
tests/durations.json, which `PARTITA_RECORD_DURATIONS=1 python -m pytest` rewrites at the end of a
whole run. Modules the file does not know keep their collection order, after the known ones.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _recorded() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def pytest_collection_modifyitems(session, config, items):
    seconds = _recorded()
    if not seconds:
        return
    first = {}
    for index, item in enumerate(items):
        first.setdefault(_module(item.nodeid), index)

    # Sorting is stable: a module's own tests keep their order; every worker sorts the same way.
    def key(item):
        module = _module(item.nodeid)
        return -seconds.get(module, 0.0), first[module]

    items.sort(key=key)


_spent: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    if os.environ.get("PARTITA_RECORD_DURATIONS"):
        _spent[_module(report.nodeid)] += report.duration


def pytest_sessionfinish(session, exitstatus):
    # On xdist the controller receives every worker's reports; a worker writes nothing.
    if not os.environ.get("PARTITA_RECORD_DURATIONS") or hasattr(session.config, "workerinput"):
        return
    if _spent:
        ranked = sorted(_spent.items(), key=lambda kv: -kv[1])
        DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in ranked}, indent=0) + "\n")
