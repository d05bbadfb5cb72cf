"""``tvm.relay.transform`` spellings: the generic passes and the BYOC passes, TVM's arguments."""

from __future__ import annotations

from partita.errors import PartitaError
from partita.partition import AnnotateTarget as _AnnotateTarget
from partita.partition import MergeCompilerRegions
from partita.partition import MergeComposite as _MergeComposite
from partita.partition import PartitionGraph as _PartitionGraph
from partita.passes import (
    ConvertLayout,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    InferType,
    PassContext,
    Sequential,
    SimplifyExpr,
)

from .op_attr import sanitise_table, target_name


def MergeComposite(pattern_table):  # noqa: N802 (TVM's name)
    """TVM's ``MergeComposite(table)``; composite names get the sanitised target prefix
    (``"ethos-n.qnn_conv2d"`` -> ``"ethos_n.qnn_conv2d"``)."""
    return _MergeComposite(sanitise_table(pattern_table))


def AnnotateTarget(targets, include_non_call_ops: bool = True):  # noqa: N802 (TVM's name)
    """TVM's ``AnnotateTarget(targets)``: a name or a list of names of registered targets."""
    if not include_non_call_ops:
        raise PartitaError(
            "AnnotateTarget(include_non_call_ops=False) is not supported: partita places tuples "
            "and tuple items with their producers/consumers (docs/migrating-from-tvm.md)"
        )
    if isinstance(targets, str):
        targets = [targets]
    return _AnnotateTarget([target_name(t) if isinstance(t, str) else t for t in targets])


def PartitionGraph(mod_name: str = "default", bind_constants: bool = True):  # noqa: N802
    """TVM's ``PartitionGraph``: partitions are named ``tvmgen_<mod_name>_<target>_main_<n>``;
    constants always stay bound inside partitions."""
    if not bind_constants:
        raise PartitaError(
            "PartitionGraph(bind_constants=False) is not supported: partita keeps constants "
            "inside each partition (docs/migrating-from-tvm.md)"
        )
    return _PartitionGraph(mod_name=mod_name)


__all__ = [
    "AnnotateTarget",
    "ConvertLayout",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "InferType",
    "MergeComposite",
    "MergeCompilerRegions",
    "PartitionGraph",
    "PassContext",
    "Sequential",
    "SimplifyExpr",
]
