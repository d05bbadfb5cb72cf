"""Why an op stays on the CPU, in one line for the placement report.

In order of precedence: the failing check's text (a composite's check, recorded by MergeComposite
or asked again, and each target's single-op check); a pattern that matches but whose match cannot
be taken (an interior value used outside it); otherwise "no pattern matched" with the nearest
partial match: the pattern, among those that mention the op, whose match got furthest through
the op, at the op or at one of its consumers (a conv is matched from the requantize above it).
"""

from __future__ import annotations

import re
from collections import deque

from partita.backends.verdict import requirements_of, run_check
from partita.patterns import OpPattern, pattern_text
from partita.patterns.claims import Claimer

from partita.ir.graph import Graph, node_key
from partita.ir.nodes import Call, Expr
from partita.ops.registry import Op

ROOT_DISTANCE = 3  # how far above an op a pattern's root may sit


def pattern_ops(pattern) -> set[str]:
    """The op names a pattern mentions."""
    out, stack, seen = set(), [pattern], set()
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        if isinstance(p, OpPattern):
            out.add(p.op.name)
        stack.extend(p.children())
    return out


def describe(node: Expr) -> str:
    """``qnn.requantize (CONV_2D #3)``: the op and, when known, the source op."""
    if type(node) is not Call:
        return node.short()
    text = node.op_name
    span = node.span
    if span is not None and span.index is not None:
        text += f" ({span.op_type + ' ' if span.op_type else ''}#{span.index})"
    return text


class Explainer:
    """Reasons for the ops of one graph; ``entries`` are the pattern-table rows in force."""

    def __init__(self, graph: Graph, entries, targets: list[str], refusals: dict | None = None):
        self.graph, self.entries, self.targets = graph, list(entries), targets
        self.refusals = refusals or {}
        self.by_op: dict[str, list] = {}
        for entry in self.entries:
            for op in pattern_ops(entry.pattern):
                self.by_op.setdefault(op, []).append(entry)

    def reason(self, node: Call, single_op_refusals=()) -> str:
        """Why ``node`` stays on the CPU (``single_op_refusals``: (target, reason) pairs)."""
        parts = []
        recorded = self.refusals.get(id(node))
        if recorded is not None and recorded[0] is node:
            parts.append(recorded[1])
        parts.extend(f"{t}: {r}" for t, r in single_op_refusals)
        if parts:
            return nearest_variant("; ".join(dict.fromkeys(parts)))
        if not self.targets:
            return "no accelerator target was given"
        return nearest_variant(self.pattern_reason(node))

    def pattern_reason(self, node: Call) -> str:
        """What the pattern tables say about ``node``: a match that was refused, or the nearest
        partial match."""
        op = node.op.name if isinstance(node.op, Op) else node.op_name
        relevant = self.by_op.get(op, [])
        names = "/".join(self.targets)
        if not relevant:
            quantized = self.quantized_variant(node, op)
            if quantized:
                return quantized
            return (
                f"no pattern matched: no {names} pattern contains {op}, and no target "
                f"supports it alone"
            )
        best = None  # (binds the node, depth, text)
        for root in self._roots(node):
            for entry in relevant:
                keys = entry.pattern.root_keys()
                if keys is not None and node_key(root) not in keys:
                    continue
                found = self._try(entry, root, node)
                if isinstance(found, str):
                    return found
                if found is not None and (best is None or found[:2] > best[:2]):
                    best = found
        quantized = self.quantized_variant(node, op)  # a float op no pattern took: quantize
        if quantized:
            return quantized
        if best is None:
            return f"no pattern matched: no {names} pattern can have {op} where it is"
        return f"no pattern matched; nearest: {best[2]}"

    def _roots(self, node: Call) -> list:
        """The node and the calls above it, nearest first."""
        out, seen = [node], {id(node)}
        queue = deque([(node, 0)])
        users = self.graph.users
        while queue:
            current, dist = queue.popleft()
            if dist == ROOT_DISTANCE:
                continue
            for user in users.get(id(current), ()):
                if id(user) not in seen and type(user) is Call and isinstance(user.op, Op):
                    seen.add(id(user))
                    out.append(user)
                    queue.append((user, dist + 1))
        return out

    def _try(self, entry, root: Call, node: Call):
        """A reason string when ``entry`` matches through ``node``; else (binds node, depth,
        text) for the deepest partial match, or None."""
        claimer = Claimer(self.graph, explain=True)
        found = claimer.claim(entry.pattern, root, set())
        if found is not None:
            if id(node) not in found.interior:
                return None
            if found.problem:
                return f"{entry.name} matches at {describe(root)}, but {found.problem}"
            if entry.check is not None:
                verdict = run_check(entry.check, root, found.match)
                if not verdict.ok:
                    return f"{entry.name}: {verdict.reason}"
            return f"{entry.name} matches at {describe(root)}, but another composite took part"
        depth, failed_p, failed_e, why, binds = claimer.nearest
        through = any(v is node for v in binds.values())
        text = (
            f"{entry.name} at {describe(root)} ({depth} sub-patterns matched, then "
            f"{pattern_text(failed_p, depth=2)} failed on "
            f"{describe(failed_e) if isinstance(failed_e, Expr) else failed_e}: {why})"
        )
        return (through, depth, text)

    def quantized_variant(self, node: Call, op: str) -> str | None:
        """For a float op whose quantized form a pattern takes: the dtype it has, the ones
        the target runs, and the fix (quantize the model)."""
        dtype = _dtype(node)
        if dtype is None or not dtype.startswith(("float", "bfloat")):
            return None
        base = op.split(".", 1)[1] if op.startswith("nn.") else op
        for name in (f"qnn.{base}", f"qnn.{op}"):
            entries = self.by_op.get(name)
            if not entries:
                continue
            entry = entries[0]
            owner = entry.name.split(".", 1)[0] if "." in entry.name else "/".join(self.targets)
            runs = _int_dtypes(entry.check) or self._table_dtypes()
            return (
                f"{dtype}: the {owner} runs quantized ops{' on ' + runs if runs else ''} "
                f"({entry.name} takes {name}, not {op} on {dtype}); quantize the model "
                f"(full-integer post-training quantization)"
            )
        if any(op.startswith("qnn.") for op in self.by_op):
            runs = self._table_dtypes()
            names = "/".join(self.targets)
            return (
                f"{dtype}: the {names} runs quantized ops{' on ' + runs if runs else ''}, and "
                f"no {names} pattern contains {op}; quantize the model (in a quantized model "
                f"most float ops become qnn ops or fold into their neighbours)"
            )
        return None

    def _table_dtypes(self) -> str:
        for entry in self.entries:
            found = _int_dtypes(entry.check)
            if found:
                return found
        return ""


def _dtype(node: Call) -> str | None:
    t = node.type_or_none
    dtype = getattr(t, "dtype", None)
    if dtype is None and node.args:
        dtype = getattr(node.args[0].type_or_none, "dtype", None)
    return dtype


def _int_dtypes(check) -> str:
    """``int8 and uint8``: the feature-map dtypes a check's requirements name (not those of a
    parenthesis: "(16x8: int8 weights, int64 bias)")."""
    for text in requirements_of(check):
        found = re.findall(r"\bu?int\d+\b", re.sub(r"\([^)]*\)", "", text))
        if found and "must be" in text:
            names = list(dict.fromkeys(found))
            return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return ""


_RANGE = re.compile(
    r"(?P<what>[A-Z][a-z]+(?: [a-z]+)*?)(?: height and width)? must be in the range "
    r"\[(?P<lo>\d+), (?P<hi>\d+)\][^(;]*\(got (?P<a>\d+)x(?P<b>\d+)\)"
)


def nearest_variant(reason: str) -> str:
    """``reason`` with, for each range requirement it broke, the nearest values that run:
    ``Stride ... [1, 3] (got 4x4)`` -> ``...; nearest that runs: stride 3x3``."""
    hints = []
    for m in _RANGE.finditer(reason):
        lo, hi = int(m["lo"]), int(m["hi"])
        a, b = (min(max(int(v), lo), hi) for v in (m["a"], m["b"]))
        what = m["what"].lower()
        hints.append(
            f"{what} {m['a']}x{m['b']} where {lo}..{hi} is allowed; nearest that runs: "
            f"{what} {a}x{b}"
        )
    return reason if not hints else f"{reason} -- {'; '.join(hints)}"
