"""See partita/ops/qnn.py."""

from __future__ import annotations
