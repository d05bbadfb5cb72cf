"""Running generated code: the JIT and object-code cache (jit.py), the region cache (cache.py),
the buffer arena (arena.py) and the worker thread with its two-mode driver choice (threads.py) and
the reading of whether other processes leave a second CPU free (idle.py)."""
