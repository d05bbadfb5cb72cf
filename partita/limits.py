"""The memory budget: no model may make partita allocate more than this for one tensor.

    PARTITA_MEMORY_BUDGET=2g partita compile model.onnx ...

Type inference checks every op's result (and a convolution's padded input, which its reference
allocates) against the budget before anything is allocated, so a model with absurd shapes, pads
or dilations is refused at import or build with the size it would need. Backends check their own
intermediate buffers with ``check_bytes``. The default is 4 GiB.
"""

from __future__ import annotations

import os

from partita.errors import TypeInferenceError

DEFAULT_BUDGET = 4 << 30
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class MemoryBudgetError(TypeInferenceError):
    """A tensor larger than the memory budget (PARTITA_MEMORY_BUDGET)."""


def parse_bytes(text: str) -> int:
    """``"4g"`` / ``"512m"`` / ``"1048576"`` -> bytes."""
    s = str(text).strip().lower().rstrip("b")
    scale = _UNITS.get(s[-1:], 1)
    return int(float(s[:-1] if scale > 1 else s) * scale)


def memory_budget() -> int:
    """The budget in bytes: PARTITA_MEMORY_BUDGET, or 4 GiB."""
    text = os.environ.get("PARTITA_MEMORY_BUDGET")
    if not text:
        return DEFAULT_BUDGET
    try:
        value = parse_bytes(text)
    except ValueError:
        raise MemoryBudgetError(
            f"PARTITA_MEMORY_BUDGET={text!r}: write a size such as 4g, 512m or 1048576"
        ) from None
    return max(value, 1)


def check_bytes(nbytes: int, what) -> None:
    """Refuse ``what`` (a str, or a function that makes it) if it needs more than the budget."""
    budget = memory_budget()
    if nbytes > budget:
        what = what() if callable(what) else what
        raise MemoryBudgetError(
            f"{what} would need {_human(nbytes)}, over the memory budget of {_human(budget)} "
            f"(PARTITA_MEMORY_BUDGET)"
        )


def check_shape(shape, itemsize: int, what) -> None:
    """``check_bytes`` for a tensor of ``shape``, without overflowing on absurd dimensions."""
    n = itemsize
    for d in shape:
        n *= max(int(d), 0)
    check_bytes(n, what)


def _human(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"
