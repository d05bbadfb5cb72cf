"""partita.patterns: the dataflow pattern language (TVM's names), rewrites, partition, explain.

    from partita.patterns import is_op, wildcard, is_constant, RewriteTable, rewrite, explain

See docs/rewrites.md for examples.
"""

from .claims import Claim, Claimer
from .explain import Explanation, explain, pattern_text
from .matcher import Match, find, match
from .partition import partition, partition_table
from .pattern import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    DominatorPattern,
    ExprPattern,
    OpPattern,
    Pattern,
    PatternError,
    PredicatePattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
    constants,
    dominates,
    is_constant,
    is_expr,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    wildcard,
)
from .rewrite import (
    DFPatternCallback,
    NodeMap,
    RewriteError,
    RewriteTable,
    TraceEntry,
    rewrite,
    rewrite_pass,
)

__all__ = [
    "Claim",
    "Claimer",
    "AltPattern",
    "AttrPattern",
    "CallPattern",
    "ConstantPattern",
    "DFPatternCallback",
    "DataTypePattern",
    "DominatorPattern",
    "Explanation",
    "ExprPattern",
    "Match",
    "NodeMap",
    "OpPattern",
    "Pattern",
    "PatternError",
    "PredicatePattern",
    "RewriteError",
    "RewriteTable",
    "ShapePattern",
    "TraceEntry",
    "TupleGetItemPattern",
    "TuplePattern",
    "TypePattern",
    "VarPattern",
    "WildcardPattern",
    "constants",
    "dominates",
    "explain",
    "find",
    "is_constant",
    "is_expr",
    "is_op",
    "is_tuple",
    "is_tuple_get_item",
    "is_var",
    "match",
    "partition",
    "partition_table",
    "pattern_text",
    "rewrite",
    "rewrite_pass",
    "wildcard",
]
