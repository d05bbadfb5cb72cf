"""Pause Python's cyclic garbage collector during whole-graph work.

Walking a 100k-node graph allocates hundreds of thousands of acyclic objects; each full
collection then traverses all of them, which makes time per node grow with the graph. The IR
never creates reference cycles during these walks, so pausing the collector is safe and keeps
InferType, the interpreter, the printer and the parser linear.
"""

from __future__ import annotations

import functools
import gc


def gc_paused(fn):
    """Decorator: run ``fn`` with the cyclic collector disabled (re-enabled afterwards)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper
