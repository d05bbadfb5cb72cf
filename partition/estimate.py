"""The whole-system estimate of a partitioned module, without compiling code for it.

    est = estimate(partition_for(mod, "npu, llvm"), "npu, llvm", host_model="cortex-a55")
    print(est.table())        # accelerator cycles and time, host time, transfers, SRAM, ...

Every accelerator partition is estimated by its backend's estimator (the NPU: its compiler to a
Program and its cycle model at the preset's clock, ``backends.cost``), every op left in main by
the host model (its MACs and bytes at a declared core's rates or this machine's measured LLVM
kernels), and every value that crosses between the host and an accelerator by the preset's
bandwidth. The steps run one after another (the executable's schedule is sequential), so the
end-to-end latency is their sum.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from partita.backends.cost import HostModel, estimate_region, parse_host, type_bytes

from partita.errors import PartitaError
from partita.ir.graph import Graph
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Function, GlobalVar, TupleGetItem, Var
from partita.ir.structural import fingerprint
from partita.ir.types import TupleType
from partita.passes.infer_type import infer_type

from .regions import op_calls
from .target import parse_target


@dataclass
class StepEstimate:
    """One accelerator partition, or one op left on the host."""

    name: str
    target: str
    seconds: float
    cycles: float = 0.0
    in_bytes: int = 0
    out_bytes: int = 0
    transfer_s: float = 0.0
    call_overhead_s: float = 0.0
    sram_peak: int = 0
    weight_bytes: int = 0
    host_seconds: float = 0.0  # what the same ops would cost on the host
    ops: list = field(default_factory=list)
    bytes_per_s: float = 0.0  # the accelerator's boundary bandwidth (0: none)
    transfer_latency_s: float = 0.0  # per tensor moved

    @property
    def total_s(self) -> float:
        return self.seconds + self.transfer_s + self.call_overhead_s


@dataclass
class SystemEstimate:
    """Totals over the steps; ``measured`` is filled after a run (``with_measured``)."""

    host_model: str
    steps: list
    host_arena_bytes: int
    measured: dict | None = None
    host_target: str = "llvm"  # the host backend's name

    def totals(self) -> dict:
        """The table's rows as numbers."""
        acc = [s for s in self.steps if not s.name.startswith("%")]
        host = [s for s in self.steps if s.name.startswith("%")]
        out = {
            "accelerator_cycles": sum(s.cycles for s in acc),
            "accelerator_s": sum(s.seconds + s.call_overhead_s for s in acc),
            "host_s": sum(s.seconds for s in host),
            "transfer_bytes": sum(s.in_bytes + s.out_bytes for s in acc),
            "transfer_s": sum(s.transfer_s for s in acc),
            "sram_peak_bytes": max((s.sram_peak for s in acc), default=0),
            "weight_bytes": sum(s.weight_bytes for s in acc),
            "host_arena_bytes": self.host_arena_bytes,
        }
        out["total_s"] = out["accelerator_s"] + out["host_s"] + out["transfer_s"]
        return out

    @property
    def total_s(self) -> float:
        return self.totals()["total_s"]

    def with_measured(self, executable, profile) -> SystemEstimate:
        """This estimate with the measured column filled from a run (``measured``)."""
        self.measured = measured(self, executable, profile)
        return self

    def to_dict(self) -> dict:
        return {
            "host_model": self.host_model,
            "estimated": self.totals(),
            "measured": self.measured,
            "steps": [asdict(s) for s in self.steps],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self) -> str:
        """One row per quantity: estimated, and measured when a run filled it."""
        est, meas = self.totals(), self.measured or {}
        lines = [f"whole-system estimate (host: {self.host_model})"]
        lines.append(f"  {'':<22} {'estimated':>14} {'measured':>14}")
        for key, label, kind in ESTIMATE_ROWS:
            m = meas.get(key)
            lines.append(
                f"  {label:<22} {_fmt(est[key], kind):>14} "
                f"{_fmt(m, kind) if m is not None else '-':>14}"
            )
        return "\n".join(lines) + "\n"


# (key, label, unit) of each line of an estimate, in order (the CLI's HTML page shows them too)
ESTIMATE_ROWS = (
    ("accelerator_cycles", "accelerator cycles", "n"),
    ("accelerator_s", "accelerator time", "s"),
    ("host_s", "host time", "s"),
    ("transfer_bytes", "boundary transfers", "B"),
    ("transfer_s", "transfer time", "s"),
    ("sram_peak_bytes", "SRAM peak", "B"),
    ("weight_bytes", "weights (flash/DRAM)", "B"),
    ("host_arena_bytes", "host arena", "B"),
    ("total_s", "end to end", "s"),
)


def _fmt(value, kind: str) -> str:
    if kind == "s":
        return f"{value * 1e3:.3f} ms"
    if kind == "B":
        for scale, unit in ((1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= scale:
                return f"{value / scale:.1f} {unit}"
        return f"{int(value)} B"
    return f"{value:,.0f}"


def host_model_of(host_model, target=None) -> HostModel:
    """A HostModel from one, from a declared name (``"cortex-a55:1.8GHz"``) or None: then the
    target's ``-host=`` when ``target`` declares one, else this machine, measured. A name that
    differs from the target's ``-host=`` is an error (which one would the estimate believe?)."""
    if isinstance(host_model, HostModel):
        return host_model
    declared = parse_target(target).host_model if target is not None else None
    if host_model is not None and declared is not None and str(host_model) != declared:
        raise PartitaError(
            f"two hosts declared: host_model={host_model!r} and -host={declared} in the "
            f"target {str(target)!r}; give one"
        )
    return parse_host(declared if host_model is None else host_model)


class EstimateValues:
    """Which side produces each value of main, and who reads it."""

    def __init__(self, main: Function, mod: IRModule):
        self.graph = Graph(main.body)
        self.mod = mod
        self.result = main.body

    def partition_of(self, node):
        """The partition function a value comes from (a partition call or an item of one)."""
        if type(node) is TupleGetItem:
            node = node.tuple_value
        if type(node) is Call and type(node.op) is GlobalVar:
            fn = self.mod[node.op.name_hint]
            if "Compiler" in fn.attrs:
                return node
        return None


def partition_calls(mod: IRModule) -> list:
    """The calls of accelerator partitions in main, in dataflow order."""
    values = EstimateValues(mod["main"], mod)
    return [n for n in values.graph.order if values.partition_of(n) is n]


def estimate(
    partitioned: IRModule, target="npu, llvm", host_model=None, cache: dict | None = None
) -> SystemEstimate:
    """The whole-system estimate of a partitioned module (see the module docstring).
    ``cache``: name -> AcceleratorEstimate, reused across calls (what-if)."""
    host = host_model_of(host_model, target)
    composite = parse_target(target)
    options = {spec.name: spec.options for spec in composite.targets}
    infer_type(partitioned["main"], partitioned)
    values = EstimateValues(partitioned["main"], partitioned)
    steps = []
    for node in values.graph.order:
        if type(node) is not Call:
            continue
        call = values.partition_of(node)
        if call is node:
            steps.append(_partition_step(node, partitioned, options, values, host, cache))
        elif call is None and type(node.op) is not GlobalVar:
            ops = op_calls(node) if type(node.op) is Function else [node]
            seconds = sum(host.op_seconds(c) for c in ops)
            steps.append(
                StepEstimate(
                    f"%{node.op_name}",
                    composite.host.name,
                    seconds,
                    host_seconds=seconds,
                    ops=[_op_label(c) for c in ops],
                )
            )
    return SystemEstimate(host.describe(), steps, _host_arena(values), None, composite.host.name)


def _partition_step(
    call, mod, options, values: EstimateValues, host: HostModel, cache
) -> StepEstimate:
    name = call.op.name_hint
    fn = mod[name]
    target = str(fn.attrs["Compiler"])
    key = _cache_key(fn, options.get(target))
    est = cache.get(key) if cache is not None else None
    if est is None:
        est = estimate_region(target, fn, options.get(target))
        if cache is not None and est is not None:
            cache[key] = est
    ops = op_calls(fn.body)
    host_s = sum(host.op_seconds(c) for c in ops)
    in_bytes, out_bytes, n_in, n_out = boundary(call, values)
    if est is None:  # a backend without an estimator: count it as the host would run it
        return StepEstimate(
            name,
            target,
            host_s,
            0.0,
            in_bytes,
            out_bytes,
            host_seconds=host_s,
            ops=[_op_label(c) for c in ops],
        )
    transfer = (in_bytes + out_bytes) / est.bytes_per_s + (n_in + n_out) * est.transfer_latency_s
    return StepEstimate(
        name,
        target,
        est.seconds,
        est.cycles,
        in_bytes,
        out_bytes,
        transfer,
        est.call_overhead_s,
        est.sram_peak,
        est.weight_bytes,
        host_s,
        [_op_label(c) for c in ops],
        est.bytes_per_s,
        est.transfer_latency_s,
    )


def _cache_key(fn, options) -> tuple:
    """The same partition (structurally, names aside) with the same options estimates the same
    (what-if and the split search re-partition the model and meet most partitions again)."""
    try:
        return (fingerprint(fn, names=False), repr(sorted((options or {}).items())))
    except TypeError:  # an attribute the fingerprint cannot encode: this object only
        return (id(fn), repr(sorted((options or {}).items())))


def boundary(call, values: EstimateValues) -> tuple[int, int, int, int]:
    """Bytes (and tensors) a partition call takes from the host and gives back to it: inputs
    made by host ops or given by the caller; outputs read by host ops or returned."""
    in_bytes = n_in = 0
    seen = set()
    for arg in call.args:
        if id(arg) in seen or type(arg) is Constant:
            continue
        seen.add(id(arg))
        if values.partition_of(arg) is None or type(arg) is Var:
            in_bytes += type_bytes(arg.type_or_none)
            n_in += 1
    out_bytes = n_out = 0
    users = values.graph.users
    outs = [call] + [u for u in users.get(id(call), ()) if type(u) is TupleGetItem]
    for value in outs:
        if type(value) is TupleGetItem or not isinstance(value.type_or_none, TupleType):
            readers = users.get(id(value), ())
            to_host = value is values.result or any(
                values.partition_of(r) is None and type(r) is not TupleGetItem for r in readers
            )
            if to_host:
                out_bytes += type_bytes(value.type_or_none)
                n_out += 1
    return in_bytes, out_bytes, n_in, n_out


def _host_arena(values: EstimateValues) -> int:
    """The peak bytes of host-made values alive at once, walking main in order (a value lives
    from its op to its last reader; the executable's arena plan packs at least this much)."""
    order = values.graph.order
    pos = {id(n): i for i, n in enumerate(order)}
    users = values.graph.users
    last = {}
    sizes = {}
    for node in order:
        if type(node) is Call and values.partition_of(node) is None:
            if type(node.op) is GlobalVar:
                continue
            sizes[id(node)] = type_bytes(node.type_or_none)
            readers = users.get(id(node), ())
            last[id(node)] = max((pos[id(r)] for r in readers), default=len(order))
    live = peak = 0
    ends: dict[int, int] = {}
    for i, node in enumerate(order):
        live -= ends.pop(i, 0)
        size = sizes.get(id(node))
        if size:
            live += size
            peak = max(peak, live)
            ends[last[id(node)] + 1] = ends.get(last[id(node)] + 1, 0) + size
    return peak


def _op_label(call: Call) -> str:
    span = call.span
    if span is not None and span.index is not None:
        return f"{call.op_name} #{span.index}"
    return call.op_name


def measured(est: SystemEstimate, executable, profile) -> dict:
    """The table's quantities from a run: the NPU's simulated cycles and their time at the
    preset's clock (plus the same invocation overhead the estimate counts), the host steps'
    measured kernel time, the compiled regions' SRAM peak and arena sizes; transfers are the
    estimate's (nothing on this machine moves them)."""
    totals = profile.totals
    acc_cycles = sum(t.get("cycles", 0) for name, t in totals.items() if name != _host(est))
    acc_s = sum(t.get("time_at_clock_s", 0.0) for name, t in totals.items() if name != _host(est))
    calls = [s for s in profile.steps if s.target != _host(est)]
    overhead = {s.name: s.call_overhead_s for s in est.steps}
    acc_s += sum(overhead.get(s.symbol, 0.0) for s in calls)
    host_s = sum(_host_step_s(s) for s in profile.steps if s.target == _host(est))
    sram = arena = 0
    for step in getattr(executable, "steps", ()):
        region = getattr(step, "region", None)
        summary = region.summary() if hasattr(region, "summary") else {}
        sram = max(sram, int(summary.get("sram_peak_bytes", 0) or 0))
        arena += int(getattr(region, "arena_bytes", 0) or 0)
    est_totals = est.totals()
    weights = est_totals["weight_bytes"]  # the same constants the compiler packed
    out = {
        "accelerator_cycles": acc_cycles,
        "accelerator_s": acc_s,
        "host_s": host_s,
        "transfer_bytes": est_totals["transfer_bytes"],
        "transfer_s": est_totals["transfer_s"],
        "sram_peak_bytes": sram,
        "weight_bytes": weights,
        "host_arena_bytes": arena,
    }
    out["total_s"] = out["accelerator_s"] + out["host_s"] + out["transfer_s"]
    return out


def _host_step_s(step) -> float:
    """A host step's kernels' time where its profile timed them (the step's wall time counts
    the profiler's own bookkeeping, tens of microseconds a region), else its wall time."""
    kernels = sum(op.time_s for op in step.ops) if step.ops else 0.0
    return kernels if kernels > 0 else step.time_s


def _host(est: SystemEstimate) -> str:
    return est.host_target


def fallback_costs(partitioned: IRModule, report, host_model=None):
    """Fill each host row of ``report`` with what its fallback costs: the host model's time
    for its ops, and the bytes that cross between them and accelerator partitions (inputs
    made by a partition, outputs a partition reads). Returns ``report``."""
    host = host_model_of(host_model)
    infer_type(partitioned["main"], partitioned)
    values = EstimateValues(partitioned["main"], partitioned)
    users = values.graph.users
    by_key = {}
    for row in report.host_rows:
        by_key.setdefault((row.index, row.op), row)
        row.host_s, row.transfer_bytes = 0.0, 0
    for node in values.graph.order:
        if type(node) is not Call or values.partition_of(node) is not None:
            continue
        if type(node.op) is GlobalVar:
            continue
        for call in op_calls(node) if type(node.op) is Function else [node]:
            span = call.span
            key = (
                (span.index, span.op_type or call.op.name)
                if span is not None and span.index is not None
                else None
            )
            row = by_key.get(key) if key else None
            if row is None:
                row = next(
                    (r for r in report.host_rows if r.index is None and r.op == call.op.name),
                    None,
                )
            if row is None:
                continue
            row.host_s += host.op_seconds(call)
        moved = sum(
            type_bytes(a.type_or_none) for a in node.args if values.partition_of(a) is not None
        )
        if any(values.partition_of(u) is not None for u in users.get(id(node), ())):
            moved += type_bytes(node.type_or_none)
        span = node.span
        row = by_key.get((span.index, span.op_type or node.op_name)) if span is not None else None
        if row is not None:
            row.transfer_bytes += moved
    return report
