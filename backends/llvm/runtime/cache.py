"""Whole regions cached on disk, keyed before lowering: a second build of a model is a lookup.

The object-code cache (jit.py) skips LLVM but still lowers the region and packs its weights;
this cache skips that too. Its key is the region function's fingerprint (partita.ir.fingerprint:
graph, ops, attributes, types, constants bit for bit, spans and names) with the options the
lowering reads (instruction set, threads, CPU, features), the host key (llvmlite version,
triple, CPU name and features) and a digest of partita's own source, so an edited compiler never
reads a region an older one made. The entry is the region as an executable saves it
(``LLVMRegion.to_bytes``), with a SHA-256 beside it: a corrupt entry is detected and rebuilt.
``PARTITA_REGION_CACHE=0`` turns it off (for work that patches the lowering at run time, as
some tests do: the source digest cannot see a patched constant).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

import partita.ir as ir
from partita.ir import fingerprint

from .jit import key_path, read_entry, trim_cache, write_entry


@functools.cache
def source_digest() -> bytes:
    """partita's source (the core package and the backends), hashed once per process."""
    roots = {Path(ir.__file__).resolve().parents[1], Path(__file__).resolve().parents[2]}
    h = hashlib.sha256(f"{sys.version}|numpy {np.__version__}".encode())
    for root in sorted(roots):
        for path in sorted(root.rglob("*.py")):
            h.update(f"\0{path.relative_to(root)}\0".encode())
            h.update(path.read_bytes())
    return h.digest()


def region_key(function, isa: str, threads: int, cpu, features) -> Path | None:
    """Where the region compiled from ``function`` with these options lives, or None when the
    function holds an attribute its fingerprint cannot encode exactly (then it is not cached)
    or the cache is turned off."""
    if os.environ.get("PARTITA_REGION_CACHE", "1") == "0":
        return None
    try:
        digest = fingerprint(function)
    except TypeError:
        return None
    material = b"region\0" + source_digest() + repr((isa, threads)).encode() + digest
    return key_path(material, cpu, features, ".region")


def fetch(path: Path | None) -> bytes | None:
    return None if path is None else read_entry(path)


def keep(path: Path | None, data: bytes) -> None:
    """Store the entry, then trim the cache to its size limit (regions carry their weights:
    the entries that grow it)."""
    if path is not None:
        write_entry(path, data)
        trim_cache(keep=path)
