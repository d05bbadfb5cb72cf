"""Pass infrastructure and the generic passes."""

from .alter_op_layout import AlterOpLayout, register_alter_op_layout
from .convert_layout import ConvertLayout
from .cse import EliminateCommonSubexpr
from .dce import DeadCodeElimination
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps
from .infer_type import InferType, infer_node_type, infer_type
from .infra import (
    DumpIR,
    Pass,
    PassContext,
    PassInstrument,
    PassTimingInstrument,
    Sequential,
    function_pass,
    module_pass,
)
from .inline import Inline
from .simplify_expr import SimplifyExpr
from .simplify_inference import SimplifyInference

__all__ = [
    "AlterOpLayout",
    "ConvertLayout",
    "DeadCodeElimination",
    "DumpIR",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "FuseOps",
    "InferType",
    "Inline",
    "Pass",
    "PassContext",
    "PassInstrument",
    "PassTimingInstrument",
    "Sequential",
    "SimplifyExpr",
    "SimplifyInference",
    "function_pass",
    "infer_node_type",
    "infer_type",
    "module_pass",
    "register_alter_op_layout",
]
