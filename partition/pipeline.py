"""``partition_for(mod, target)``: the composite target's partition pipeline, as a visible list.

    partition_pipeline("npu -config=npu-256, llvm")
        -> <Sequential partition_for: InferType, MergeComposite, AnnotateTarget,
                                      MergeCompilerRegions, RegionPolicies, PartitionGraph>

The pattern table is the targets' tables in target order (the first entry that matches wins, so
an earlier target has priority); backends may add passes that run before MergeComposite.
"""

from __future__ import annotations

from partita.errors import PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Var
from partita.ir.refs import REF_NODES
from partita.ir.visitor import post_order
from partita.passes.infer_type import InferType
from partita.passes.infra import Sequential

from .annotate_target import AnnotateTarget
from .cost_placement import CostPlacement
from .merge_composite import MergeComposite
from .merge_regions import MergeCompilerRegions
from .partition_graph import PartitionGraph
from .policies import Overrides, RegionPolicies
from .record import record_of
from .report import PlacementReport, placement_report
from .target import parse_target


class StrictPartitionError(PartitaError):
    """Strict mode: some ops were left off the accelerators. ``report`` says which and why."""

    def __init__(self, report: PlacementReport):
        self.report = report
        rows = report.host_rows
        head = (
            f"strict mode: {len(rows)} source op{'s' * (len(rows) != 1)} left on the {report.host}:"
        )
        lines = [
            f"  {r.op}{' #' + str(r.index) if r.index is not None else ''}: {r.reason}"
            for r in rows
        ]
        super().__init__("\n".join([head, *lines, "", str(report)]))


def _check_references(mod: IRModule, target) -> None:
    """References are effects that only the reference interpreter host runs; calls of
    let-bound functions (closures, recursion) only partita.interpret runs."""
    host = parse_target(target).host.name
    for name, fn in mod.items():
        for n in post_order(fn):
            if type(n) is Call and type(n.op) is Var:
                raise PartitaError(
                    f"@{name}: {n.short()}: a call of a let-bound function runs only in the "
                    "interpreter (partita.interpret); build() schedules dataflow graphs"
                )
            if type(n) in REF_NODES and host != "ref":
                raise PartitaError(
                    f"@{name}: {n.short()}: references (ref, ref_read, ref_write) run only on "
                    f"the 'ref' host, not on {host!r}; build for a target that ends in ', ref'"
                )


PLACEMENTS = ("all", "cost")


def partition_pipeline(
    target="llvm",
    *,
    min_region_size: int = 1,
    overrides=None,
    placement: str = "all",
    host_model=None,
    npu_nodes=(),
    estimate_cache: dict | None = None,
) -> Sequential:
    """The passes ``partition_for`` runs for ``target`` (a tvmc-style string); ``placement``
    "all" (everything the accelerators support, Vela's way) or "cost" (CostPlacement last:
    partitions that the host runs faster, transfers included, go back to it)."""
    if placement not in PLACEMENTS:
        raise PartitaError(
            f"placement must be one of {', '.join(map(repr, PLACEMENTS))}, got {placement!r}"
        )
    composite = parse_target(target)
    backends = [(spec, spec.backend) for spec in composite.targets]
    table = [e for spec, b in backends for e in b.pattern_table(spec.options)]
    extra = [p for spec, b in backends for p in b.passes(spec.options)]
    extra += composite.host.backend.passes(composite.host.options)  # the host's own, last
    host = composite.host.name
    return _Pipeline(
        [
            InferType(),
            *extra,
            MergeComposite(table, overrides=overrides),
            AnnotateTarget(composite.targets, host=host, overrides=overrides),
            MergeCompilerRegions(),
            RegionPolicies(min_size=min_region_size, targets=composite.targets, host=host),
            PartitionGraph(host=host),
            *(
                [CostPlacement(target, host_model, npu_nodes, estimate_cache)]
                if placement == "cost"
                else []
            ),
        ],
        name="partition_for",
    )


class _Pipeline(Sequential):
    """The partition passes with the cyclic collector paused across all of them, not pass by
    pass: each pass pauses it already (gc_pause.py), and re-enabling it between passes made
    the next allocation traverse every object the pass had just allocated (100k-node graphs:
    a tenth of a second a pipeline, outside the passes' own timings)."""

    @gc_paused
    def transform(self, mod, ctx):
        return super().transform(mod, ctx)


def partition_for(
    mod: IRModule,
    target="llvm",
    *,
    min_region_size: int = 1,
    cpu_ops=(),
    cpu_nodes=(),
    strict: bool = False,
    placement: str = "all",
    host_model=None,
    npu_nodes=(),
) -> IRModule:
    """Partition ``mod`` for a composite target such as ``"npu -config=npu-256, llvm"``.

    ``cpu_ops`` (op types) and ``cpu_nodes`` (source op indices or names) are forced onto the
    CPU; regions under ``min_region_size`` source ops go back to it; ``strict`` raises
    StrictPartitionError, with the placement report, if any op is left on the CPU.
    ``placement="cost"`` sends back to the host the partitions it runs faster (estimated with
    ``host_model``: a declared core such as ``"cortex-a55:1.8GHz"``, or None for this machine's
    measured LLVM kernels); ``npu_nodes`` (partition names, source op indices or names) stay
    on the accelerator whatever the estimate (docs/placement.md).
    """
    if not isinstance(mod, IRModule):
        raise PartitaError(f"partition_for takes an IRModule, got {type(mod).__name__}")
    overrides = Overrides(cpu_ops, cpu_nodes)
    unmatched = overrides.unmatched(mod)
    if unmatched:
        raise PartitaError(
            f"CPU override{'s' * (len(unmatched) > 1)} "
            f"{', '.join(map(str, unmatched))} match no op of the model"
        )
    _check_references(mod, target)
    pipeline = partition_pipeline(
        target,
        min_region_size=min_region_size,
        overrides=overrides or None,
        placement=placement,
        host_model=host_model,
        npu_nodes=npu_nodes,
    )
    out = pipeline(mod)
    if placement == "cost":
        out = split_by_cost(
            mod, target, out, host_model, npu_nodes, list(cpu_nodes), cpu_ops, min_region_size
        )
    if strict:
        report = placement_report(out)
        if report.host_rows:
            raise StrictPartitionError(report)
    return out


SPLIT_TRIALS = 16  # re-partitionings the split search may spend


def split_by_cost(
    mod, target, out, host_model, npu_nodes, cpu_nodes, cpu_ops, min_region_size
) -> IRModule:
    """Splits for placement="cost": try sending a partition's first or last source op to the
    host (so the partition shrinks rather than goes whole) and keep a split while the
    end-to-end estimate drops; at most SPLIT_TRIALS re-partitionings. A split op's reason says
    what it saved."""
    from .estimate import estimate, host_model_of

    host = host_model_of(host_model, target)
    cache: dict = {}
    best = estimate(out, target, host, cache).total_s
    tried: set = set()
    budget = SPLIT_TRIALS
    improved = True
    while improved and budget > 0:
        improved = False
        pinned = {str(n) for n in npu_nodes}
        for span in _partition_ends(out):
            index = span.index
            if index in tried or {str(index), span.tensor} & pinned or budget <= 0:
                continue
            tried.add(index)
            budget -= 1
            trial = partition_pipeline(
                target,
                min_region_size=min_region_size,
                overrides=Overrides(cpu_ops, [*cpu_nodes, index]),
                placement="cost",
                host_model=host,
                npu_nodes=npu_nodes,
                estimate_cache=cache,
            )(mod)
            total = estimate(trial, target, host, cache).total_s
            if total < best - 1e-12:
                why = (
                    f"cost: split off the accelerator partition, end to end "
                    f"{best * 1e3:.3f} -> {total * 1e3:.3f} ms"
                )
                _relabel(trial, f"forced onto the CPU (source op #{index})", why)
                out, best, improved = trial, total, True
                cpu_nodes = [*cpu_nodes, index]
                break
    return out


def _partition_ends(mod: IRModule) -> list:
    """The spans of the source ops at the start and end of each partition (dataflow order)."""
    out = []
    for name, fn in mod.items():
        if name == "main" or "Compiler" not in fn.attrs:
            continue
        spans = [
            n.span
            for n in post_order(fn.body)
            if type(n) is Call and n.span is not None and n.span.index is not None
        ]
        if len({s.index for s in spans}) > 1:
            out += [spans[0], spans[-1]]
    return list(dict.fromkeys(out))


def _relabel(mod: IRModule, old: str, new: str) -> None:
    placement = record_of(mod).placement
    if placement is None:
        return
    for key, (node, reason) in list(placement.reasons.items()):
        if reason == old:
            placement.reasons[key] = (node, new)
