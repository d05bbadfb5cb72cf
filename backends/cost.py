"""What a region costs: multiply-accumulates, bytes across its boundary, and a simple cost model.

stats = RegionStats("npu", ops=3, macs=1_204_224, input_bytes=9216, output_bytes=4608)
CostModel(cpu_macs_per_s=2e9, acc_macs_per_s=5e11, bytes_per_s=1e9)(stats)
    -> Verdict(True)  (the NPU saves 0.60 ms, the transfers cost 0.014 ms)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from partita.ir.nodes import Call, Constant, Expr
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
MAC_OPS = frozenset(_MAC_OPS)  # the ops count_macs counts: every other op does no MACs


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


# ---- latency models: the host, and an accelerator's region ---------------------------------

# Declared hosts: (clock in Hz, sustained int8 multiply-adds per cycle, bytes per cycle for
# elementwise work and data movement), one thread. The MAC rates are what int8 inference
# kernels sustain, not the dot-product units' peak (XNNPACK's published MobileNet int8
# latencies put an A55 near 4 MACs a cycle, an A76 near 12); ``name:clock:macs`` declares
# another core.
HOST_PRESETS: dict[str, tuple[float, float, float]] = {
    "cortex-a53": (1.4e9, 3.0, 4.0),
    "cortex-a55": (1.8e9, 4.0, 8.0),
    "cortex-a76": (2.4e9, 12.0, 16.0),
    "cortex-a78": (2.8e9, 14.0, 16.0),
    "cortex-m55": (0.4e9, 1.0, 4.0),
}
HOST_OP_OVERHEAD_S = 1e-6  # a kernel call: loop set-up, a function call, cold lines


@dataclass(frozen=True)
class HostModel:
    """The host's latency for an op: MACs at ``macs_per_s``, the bytes it reads and writes at
    ``bytes_per_s``, plus ``op_overhead_s`` per op (``source`` says where the rates came
    from: a declared core, or this machine's measured LLVM kernels)."""

    name: str
    macs_per_s: float
    bytes_per_s: float
    op_overhead_s: float = HOST_OP_OVERHEAD_S
    source: str = "declared"

    def op_seconds(self, call: Expr) -> float:
        """Estimated host time of one op call."""
        if not isinstance(call, Call):
            return 0.0
        moved = type_bytes(_type(call)) + sum(
            type_bytes(_type(a)) for a in call.args if not _is_constant(a)
        )
        return count_macs(call) / self.macs_per_s + moved / self.bytes_per_s + self.op_overhead_s

    def describe(self) -> str:
        return (
            f"{self.name} ({self.source}): {_si(self.macs_per_s, 'MAC/s')}, "
            f"{_si(self.bytes_per_s, 'B/s')}"
        )


def _is_constant(e) -> bool:
    return type(e) is Constant


def _frequency(text: str) -> float:
    t = text.strip().lower()
    for suffix, scale in (("ghz", 1e9), ("mhz", 1e6), ("khz", 1e3), ("hz", 1.0)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * scale
    return float(t)


def parse_host(text: str | None) -> HostModel:
    """A host model from ``"cortex-a55"``, ``"cortex-a55:1.8GHz"``, ``"generic:2GHz:16"``
    (clock and int8 MACs per cycle), or ``None``/``"this"``/``"measured"``: this machine,
    from its measured LLVM kernels."""
    if text in (None, "", "this", "measured", "native"):
        return measured_host()
    parts = str(text).split(":")
    name = parts[0].strip().lower()
    if name in HOST_PRESETS:
        clock, macs, nbytes = HOST_PRESETS[name]
    elif name == "generic":
        clock, macs, nbytes = 1e9, 8.0, 8.0
    else:
        raise ValueError(
            f"unknown host {text!r}: use one of {', '.join(HOST_PRESETS)}, "
            f"generic:<clock>:<MACs per cycle>, or 'measured' (this machine)"
        )
    try:
        if len(parts) > 1 and parts[1]:
            clock = _frequency(parts[1])
        if len(parts) > 2 and parts[2]:
            macs = float(parts[2])
    except ValueError:
        raise ValueError(
            f"host {text!r}: expected <name>:<clock, e.g. 1.8GHz>[:<MACs/cycle>]"
        ) from None
    if not (0 < clock < float("inf") and 0 < macs < float("inf")):
        raise ValueError(f"host {text!r}: the clock and the MACs per cycle must be positive")
    label = f"{name} at {clock / 1e9:.2f} GHz"
    return HostModel(label, clock * macs, clock * nbytes, HOST_OP_OVERHEAD_S, "declared")


_MEASURED: list = []


def measured_host() -> HostModel:
    """This machine as a host: the int8 MAC rate of an LLVM-compiled 3x3 convolution and the
    byte rate of an LLVM-compiled quantized add, timed once per process (the best of a few
    runs). Falls back to a generic 1 GHz core when the LLVM backend cannot compile here."""
    if _MEASURED:
        return _MEASURED[0]
    try:
        model = _calibrate()
    except Exception as exc:  # no llvmlite, or a CPU the backend cannot target
        model = HostModel(f"generic (LLVM not measured: {exc})", 8e9, 8e9, source="declared")
    _MEASURED.append(model)
    return model


def _calibrate() -> HostModel:
    import time

    import numpy as np
    from partita.backends.registry import get_backend

    from partita.ir.nodes import Function, const, var
    from partita.ops import get_op
    from partita.passes.infer_type import infer_type

    llvm = get_backend("llvm")
    x = var("x", (1, 28, 28, 32), "int8")
    w = const(np.ones((3, 3, 32, 32), np.int8))
    s, z = const(np.float32(0.05)), const(np.int32(0))
    conv = get_op("qnn.conv2d")(
        x, w, z, z, s, s, padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO"
    )
    out = get_op("qnn.requantize")(conv, s, z, s, z, out_dtype="int8")
    add = get_op("qnn.add")(x, x, s, z, s, z, s, z)

    def best(fn_body, inputs) -> tuple[float, Expr]:
        fn = Function([x], fn_body)
        infer_type(fn)
        region = llvm.compile(fn)
        region.run(inputs)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            region.run(inputs)
            times.append(time.perf_counter() - start)
        return min(times)

    data = [np.ones((1, 28, 28, 32), np.int8)]
    t_conv = best(out, data)
    t_add = best(add, data)
    macs = 28 * 28 * 32 * 32 * 9
    moved = 3 * 28 * 28 * 32
    overhead = HOST_OP_OVERHEAD_S
    bytes_per_s = moved / max(t_add - overhead, t_add / 2)
    macs_per_s = macs / max(t_conv - overhead - 2 * 28 * 28 * 32 / bytes_per_s, t_conv / 2)
    return HostModel("this machine (LLVM)", macs_per_s, bytes_per_s, overhead, "measured")


@dataclass(frozen=True)
class AcceleratorEstimate:
    """An accelerator's estimate for one region: its own time (``cycles`` at ``clock_hz``),
    the SRAM it needs at its peak, its weight bytes, and the cost of one boundary byte."""

    cycles: float
    clock_hz: float
    sram_peak: int = 0
    weight_bytes: int = 0
    bytes_per_s: float = 1e9  # moving a boundary tensor between the host and the accelerator
    transfer_latency_s: float = 0.0  # per transfer (DMA first byte)
    call_overhead_s: float = 0.0  # per invocation of the region (driver, doorbell, interrupt)

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    def transfer_seconds(self, nbytes: int) -> float:
        """Moving ``nbytes`` in or out (one tensor)."""
        return nbytes / self.bytes_per_s + self.transfer_latency_s


# An invocation of an NPU region from the host: the driver's job set-up, the doorbell and the
# completion interrupt (Ethos-U's driver spends tens of microseconds per inference on a
# Cortex-M; 20 us is the order of magnitude, and a preset may not say better).
NPU_CALL_OVERHEAD_S = 20e-6

ESTIMATORS: dict = {}


def estimator(name: str):
    """Register how a backend estimates a region without compiling code for it:
    ``fn(function, options) -> AcceleratorEstimate``."""

    def wrap(fn):
        ESTIMATORS[name] = fn
        return fn

    return wrap


def estimate_region(target: str, function, options: dict | None = None):
    """An accelerator's estimate for a partitioned function, or None when the backend has no
    estimator."""
    fn = ESTIMATORS.get(target)
    return fn(function, dict(options or {})) if fn is not None else None


@estimator("npu")
def _npu_estimate(function, options: dict) -> AcceleratorEstimate:
    """The NPU's compiler (to its Program: operations, tensors, SRAM plan; no command stream,
    no code) and its cycle model at the preset's clock."""
    from partita.backends.npu.compiler import compile_function
    from partita.backends.npu.config import get_config
    from partita.backends.npu.cycles import program_cycles

    config = get_config(options.get("config"), options.get("sram"))
    program = compile_function(function, config)
    cycles = sum(c["cycles"] for c in program_cycles(program, config))
    weights = sum(int(a.nbytes) for op in program.ops for a in getattr(op, "arrays", {}).values())
    # the host puts inputs where the region reads them (SRAM, or DRAM on a U65-like design)
    per_cycle = config.sram_bandwidth if config.io_memory == "sram" else config.spill_bandwidth
    latency = (
        config.sram_latency_cycles if config.io_memory == "sram" else config.dma_latency_cycles
    )
    return AcceleratorEstimate(
        cycles,
        config.clock_hz,
        int(program.sram_peak),
        weights,
        per_cycle * config.clock_hz,
        latency / config.clock_hz,
        NPU_CALL_OVERHEAD_S,
    )
