"""What a region costs: multiply-accumulates, bytes across its boundary, and a simple cost model.

stats = RegionStats("npu", ops=3, macs=1_204_224, input_bytes=9216, output_bytes=4608)
CostModel(cpu_macs_per_s=2e9, acc_macs_per_s=5e11, bytes_per_s=1e9)(stats)
    -> Verdict(True)  (the NPU saves 0.60 ms, the transfers cost 0.014 ms)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from partita.ir.nodes import Call, Expr
from partita.ir.types import TensorType, TupleType, Type
from partita.ops.registry import Op

from .verdict import Verdict

_MAC_OPS = {
    "nn.conv2d",
    "qnn.conv2d",
    "nn.conv2d_transpose",
    "nn.dense",
    "qnn.dense",
    "nn.batch_matmul",
    "qnn.batch_matmul",
}


def _type(e: Expr) -> Type:
    if e.type_or_none is None:
        from partita.passes.infer_type import infer_type

        infer_type(e)
    return e.type_or_none


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def count_macs(call: Expr) -> int:
    """Multiply-accumulates of one op call, from its types (0 for ops that do no MACs):
    conv2d = out elements x (in channels / groups) x KH x KW; dense and batch_matmul =
    out elements x the reduced length; conv2d_transpose = in elements x (out channels /
    groups) x KH x KW."""
    if not isinstance(call, Call) or not isinstance(call.op, Op) or call.op.name not in _MAC_OPS:
        return 0
    name, attrs = call.op.name, call.attrs
    out = _type(call)
    if not isinstance(out, TensorType):
        return 0
    if name.endswith("conv2d") or name == "nn.conv2d_transpose":
        kernel = _type(call.args[1]).shape
        layout = attrs.kernel_layout
        dim = {c: kernel[i] for i, c in enumerate(layout)}
        if name == "nn.conv2d_transpose":
            return _prod(_type(call.args[0]).shape) * dim["O"] * dim["H"] * dim["W"]
        return _prod(out.shape) * dim["I"] * dim["H"] * dim["W"]
    data = _type(call.args[0]).shape
    if name.endswith("dense"):
        return _prod(out.shape) * data[-1]
    k = data[1] if attrs.transpose_a else data[2]
    return _prod(out.shape) * k


def type_bytes(t: Type | None) -> int:
    """Bytes of a value of type ``t`` (a tuple's fields added up)."""
    if isinstance(t, TensorType):
        import numpy as np

        return t.size * np.dtype(t.dtype).itemsize
    if isinstance(t, TupleType):
        return sum(type_bytes(f) for f in t.fields)
    return 0


@dataclass(frozen=True)
class RegionStats:
    """A candidate region as a backend's cost hook sees it."""

    target: str
    ops: int  # source ops (one per span; calls without a span count one each)
    macs: int
    input_bytes: int
    output_bytes: int
    function: object = field(default=None, compare=False, repr=False)  # the region's Function

    @property
    def boundary_bytes(self) -> int:
        """Bytes in plus bytes out."""
        return self.input_bytes + self.output_bytes


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


@dataclass(frozen=True)
class CostModel:
    """A region pays when the time its MACs save on the accelerator exceeds the time to move its
    inputs and outputs across the boundary plus a fixed cost per call."""

    cpu_macs_per_s: float
    acc_macs_per_s: float
    bytes_per_s: float
    call_overhead_s: float = 0.0

    def __call__(self, stats: RegionStats) -> Verdict:
        saved = stats.macs / self.cpu_macs_per_s - stats.macs / self.acc_macs_per_s
        cost = stats.boundary_bytes / self.bytes_per_s + self.call_overhead_s
        if saved >= cost:
            return Verdict(True)
        return Verdict(
            False,
            f"moving {_si(stats.boundary_bytes, 'B')} across the boundary "
            f"costs {_time(cost)}, more than the {_time(saved)} its "
            f"{_si(stats.macs, 'MACs')} save",
        )
