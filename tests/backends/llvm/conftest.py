"""Every LLVM test module compiles into its own temporary object-code cache."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def llvm_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("PARTITA_CACHE_DIR", str(tmp_path_factory.mktemp("llvm-cache")))
    yield
    mp.undo()
