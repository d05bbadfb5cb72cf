"""Shared test set-up: this folder is on sys.path (pytest's prepend mode), so test folders can
import the shared builders in common_graphs.py.

The suite runs on pytest-xdist with one worker per core and a module's tests on one worker
(`--dist loadscope`). A module that starts last decides when the suite ends, so the modules are
handed out longest first (the classic longest-processing-time rule): their seconds are read from
tests/durations.json, which `PARTITA_RECORD_DURATIONS=1 python -m pytest` rewrites at the end of a
whole run. Modules the file does not know keep their collection order, after the known ones.

Builds compile their parts one after another (PARTITA_COMPILE_JOBS=1 unless set): the workers
already use every core. The LLVM object and region cache (PARTITA_CACHE_DIR) is one fresh
folder per run, shared by the run's workers and removed at its end, unless PARTITA_CACHE_DIR is
set: a run measures what a fresh clone in CI does (no objects carried over from an earlier
run), a region one module compiled is not compiled again by another, and the tests neither
fill nor trim ~/.cache.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")


_RUN_CACHE = "_PARTITA_TEST_RUN_CACHE"  # set where this run made the folder (the controller)


def pytest_configure(config):
    # The controller's environment is the workers' (xdist starts them after this hook).
    # One worker per core already keeps the cores busy: a build's parts compiled in forked
    # children (jit.compile_parts) only add the fork's cost (~30% more CPU on the small models
    # of the kernel tests). test_llvm_jit.py tests the forked compiles with the default.
    os.environ.setdefault("PARTITA_COMPILE_JOBS", "1")
    if not os.environ.get("PARTITA_CACHE_DIR"):
        folder = tempfile.mkdtemp(prefix="partita-test-cache-")
        os.environ["PARTITA_CACHE_DIR"] = os.environ[_RUN_CACHE] = folder


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        return
    folder = os.environ.pop(_RUN_CACHE, None)
    if folder and os.environ.get("PARTITA_CACHE_DIR") == folder:
        del os.environ["PARTITA_CACHE_DIR"]
        shutil.rmtree(folder, ignore_errors=True)


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
