"""partita: partition quantized neural networks between an NPU and a CPU.

This module only re-exports: the core first (IR, ops, interpreter, text format, passes), then
partition_for and placement_report.
"""

from . import _source_tree  # noqa: F401  (first: a source checkout finds its subpackages)

# isort: split
from partita.ir import (
    Call,
    Constant,
    Expr,
    ExprMutator,
    ExprVisitor,
    Function,
    GlobalVar,
    IRModule,
    Span,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    assert_structural_equal,
    const,
    fingerprint,
    structural_equal,
    var,
)
from partita.ops import get_op, list_ops, register_op
from partita.passes import (
    ConvertLayout,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    InferType,
    PassContext,
    Sequential,
    SimplifyExpr,
    infer_type,
)
from partita.text import astext, parse

from .errors import (
    ArityError,
    AttrError,
    InterpreterError,
    OpNotFoundError,
    ParseError,
    PartitaError,
    TypeInferenceError,
)
from .interpreter import interpret

# isort: split
# Above the core: partitioning, then build and the runtime.
from partita.partition import partition_for, placement_report

# isort: split
from partita.runtime import Executable, load
from partita.scale import evaluate, sweep
from partita.version import __version__ as __version__

from .build import build

__all__ = [
    "ArityError",
    "AttrError",
    "Call",
    "Constant",
    "ConvertLayout",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "Expr",
    "ExprMutator",
    "ExprVisitor",
    "FoldConstant",
    "Function",
    "GlobalVar",
    "IRModule",
    "InferType",
    "InterpreterError",
    "OpNotFoundError",
    "ParseError",
    "PartitaError",
    "PassContext",
    "Sequential",
    "SimplifyExpr",
    "Span",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleType",
    "TypeInferenceError",
    "Var",
    "Executable",
    "assert_structural_equal",
    "build",
    "evaluate",
    "fingerprint",
    "astext",
    "const",
    "get_op",
    "infer_type",
    "interpret",
    "list_ops",
    "load",
    "parse",
    "partition_for",
    "placement_report",
    "register_op",
    "structural_equal",
    "sweep",
    "var",
]
