"""partita.partition: carve a model into accelerator partitions and a host remainder.

    from partita.partition import partition_for, placement_report
    mod = partition_for(mod, "npu -config=npu-256, llvm")
    print(placement_report(mod))

The steps, each a named pass: MergeComposite(table) -> AnnotateTarget(targets) ->
MergeCompilerRegions() -> RegionPolicies(...) -> PartitionGraph(). See docs/backends.md.
"""

from .annotate_target import AnnotateTarget
from .merge_composite import MergeComposite
from .merge_regions import MergeCompilerRegions, merge_regions
from .partition_graph import PartitionGraph
from .pipeline import StrictPartitionError, partition_for, partition_pipeline
from .policies import Overrides, RegionPolicies
from .regions import Region, RegionError
from .report import PlacementReport, PlacementRow, placement_report
from .target import CompositeTarget, TargetError, TargetSpec, parse_target

__all__ = [
    "AnnotateTarget",
    "CompositeTarget",
    "MergeCompilerRegions",
    "MergeComposite",
    "Overrides",
    "PartitionGraph",
    "PlacementReport",
    "PlacementRow",
    "Region",
    "RegionError",
    "RegionPolicies",
    "StrictPartitionError",
    "TargetError",
    "TargetSpec",
    "merge_regions",
    "parse_target",
    "partition_for",
    "partition_pipeline",
    "placement_report",
]
