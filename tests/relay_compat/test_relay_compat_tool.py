"""tools/relay_compat.py's exclusions: the 17 tests needing TVM's runtime/codegen and the 2
needing ADTs, each with a reason, so the count through the shim is reproducible."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).parents[2] / "tools" / "relay_compat.py"


def _tool():
    spec = importlib.util.spec_from_file_location("relay_compat_tool", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exclusions_are_17_runtime_and_2_adt_each_with_a_reason():
    tool = _tool()
    reasons = [r for tests in tool.EXCLUDED.values() for r in tests.values()]
    assert sum(r.startswith("runtime") for r in reasons) == 17
    assert sum(r.startswith("ADT") for r in reasons) == 2
    assert all(len(r.split(":", 1)[1].strip()) > 5 for r in reasons)
    assert set(tool.EXCLUDED) <= set(tool.FILES) and len(tool.FILES) == 5
