"""Where a saved executable was written: this machine's user, or somewhere else.

A saved file's hashes catch corruption, not intent: anyone who can write a file can recompute
them. Native object code (an ``llvm`` region) runs as the user who loads it, so ``load`` uses it
only when the file was written by this user on this machine, or when the caller says it trusts
the file (``trust=True``, ``--trust``); otherwise the host regions are compiled again from the IR
the file carries (artifact.py).

"Written here" is an HMAC-SHA256 of the manifest keyed by a secret that ``save`` creates on first
use: 32 random bytes in ``$PARTITA_KEY_FILE``, else ``$XDG_CACHE_HOME/partita/origin.key``
(``~/.cache/partita/origin.key``), made with mode 0600 in a directory of mode 0700. Another user,
another machine, or a file edited after saving does not have a valid tag.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

ORIGIN = "origin.hmac"  # the zip member that holds the tag (not listed in the manifest)
KEY_BYTES = 32


def key_path() -> Path:
    explicit = os.environ.get("PARTITA_KEY_FILE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "partita" / "origin.key"


def _read_key(path: Path) -> bytes | None:
    try:
        st = path.stat()
        if st.st_mode & 0o077 or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            return None  # readable or writable by others: not a secret of this user's
        data = path.read_bytes()
    except OSError:
        return None
    return data if len(data) == KEY_BYTES else None


def secret(create: bool) -> bytes | None:
    """This user's key; made (0600) when ``create`` and missing. None when there is none or it
    cannot be made (then every file is foreign, and ``save`` writes no tag)."""
    path = key_path()
    key = _read_key(path)
    if key is not None or not create:
        return key
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made by another process meanwhile: wait for its 32 bytes
        for _ in range(50):
            key = _read_key(path)
            if key is not None:
                return key
            time.sleep(0.01)
        return None
    except OSError:
        return None
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(KEY_BYTES))
    return _read_key(path)


def tag(manifest: bytes) -> bytes | None:
    """The tag ``save`` writes for ``manifest`` (None when no key can be had)."""
    key = secret(create=True)
    if key is None:
        return None
    return hmac.new(key, manifest, hashlib.sha256).hexdigest().encode()


def written_here(manifest: bytes, stored: bytes | None) -> bool:
    """Whether ``stored`` is this user's tag of ``manifest``."""
    if not stored:
        return False
    key = secret(create=False)
    if key is None:
        return False
    want = hmac.new(key, manifest, hashlib.sha256).hexdigest().encode()
    return hmac.compare_digest(want, stored.strip())
