"""Pass infrastructure and the generic passes."""

from .infer_type import InferType, infer_type
from .infra import (DumpIR, Pass, PassContext, PassInstrument, PassTimingInstrument, Sequential,
                    function_pass, module_pass)

__all__ = [
    "DumpIR", "InferType", "Pass", "PassContext", "PassInstrument", "PassTimingInstrument",
    "Sequential", "function_pass", "infer_type", "module_pass",
]
