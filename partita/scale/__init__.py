"""partita.scale: sweeps over NPU configurations and dataset evaluation, on a local process pool
(default) or on Ray.

    records = partita.sweep(["m.tflite"], "npu -config={u55-128,u55-256}, llvm")
    result = partita.evaluate("m.tflite", "digits", "npu, llvm", engine="ray")
"""

from partita.scale.engines import EngineError, LocalEngine, RayEngine, get_engine
from partita.scale.evaluate import evaluate, load_data
from partita.scale.sweep import expand_target, sweep

__all__ = [
    "EngineError",
    "LocalEngine",
    "RayEngine",
    "evaluate",
    "expand_target",
    "get_engine",
    "load_data",
    "sweep",
]
