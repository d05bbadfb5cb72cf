"""Walking a pattern tree: every node once, and the capture names it uses (any object with
``children()`` and ``name``, so this module imports nothing of the language)."""

from __future__ import annotations


def walk_pattern(root) -> list:
    """Every pattern node under ``root`` once (pre-order, iterative)."""
    out, seen, stack = [], set(), [root]
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        out.append(p)
        stack.extend(reversed(p.children()))
    return out


def capture_names(root) -> list[str]:
    """The capture names used in a pattern, in pre-order."""
    names = []
    for p in walk_pattern(root):
        if p.name is not None and p.name not in names:
            names.append(p.name)
    return names
