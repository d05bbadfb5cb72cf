"""``npu``: a configurable Ethos-U-like NPU — pattern table and constraints, a compiler to a
command stream, a bit-exact simulator and a cycle model (docs/npu.md).

    partita.build(mod, "npu -config=u55-256, llvm")
    partita.build(mod, "npu -config=my_npu.toml -sram=512k, ref")
    partita.build(mod, "npu -sim=native, llvm")   # the simulator's compiled engine (native.py)
"""

from __future__ import annotations

import os
import threading
import time

from partita.backends.blob import pack_region, parse_tensor_types, tensor_types, unpack_region
from partita.backends.compiled import CompiledRegion, OpProfile, region_types
from partita.backends.registry import Backend, Option, register_backend
from partita.backends.verdict import Verdict

from partita.passes.infer_type import infer_type

from .compiler import compile_function
from .config import DEFAULT, PRESETS, config_from_token, config_token, get_config
from .cycles import program_cycles
from .layout import NPUConvertLayout
from .legalize import NPULegalizeSum, NPULegalizeTransposeConv
from .legalize_dwconv import NPULegalizeDepthMultiplier
from .memory import SRAMError
from .native import ENGINES, NativeProgram, choose_engine
from .patterns import pattern_table
from .semantics import NPUIntegerSemantics, semantics_for
from .simulator import run_program
from .stream import decode, encode


class NPURegion(CompiledRegion):
    """A partition compiled to a command stream; ``run`` simulates the stream."""

    backend = "npu"

    def __init__(self, stream: bytes, name: str, input_types, output_types, sim: str = "auto"):
        self.stream, self.name = stream, name
        self.program = decode(stream)  # the simulator runs what the stream says, nothing else
        self.config = config_from_token(self.program.config)
        self.input_types, self.output_types = input_types, output_types
        self.cycles = program_cycles(self.program, self.config)
        if sim == "auto":  # a saved executable has no target options: the environment decides
            sim = os.environ.get("PARTITA_NPU_SIM", "auto")
        self.engine = choose_engine(self.program, sim)
        self._native: NativeProgram | None = None
        self._lock = threading.Lock()

    def native(self) -> NativeProgram:
        """The compiled engine, built on the first run (LLVM's code is cached on disk)."""
        with self._lock:
            if self._native is None:
                self._native = NativeProgram(self.program)
            return self._native

    def run(self, inputs):
        inputs = self.check_inputs(inputs)
        if self.engine == "native":
            return self.native().run(inputs)
        return run_program(self.program, inputs)

    def profile(self, inputs):
        start = time.perf_counter()
        outputs = self.run(inputs)
        host = time.perf_counter() - start
        records = [
            OpProfile(op.name, "npu op", c["time_at_clock_s"], dict(c))
            for op, c in zip(self.program.ops, self.cycles)
        ]
        if records:
            records[0].metrics["simulation_s"] = host
        return outputs, records

    def summary(self) -> dict:
        return {
            "ops": len(self.program.ops),
            "cycles": sum(c["cycles"] for c in self.cycles),
            "sram_peak_bytes": self.program.sram_peak,
            "macs_per_cycle": self.config.macs_per_cycle,
            "stream_bytes": len(self.stream),
            "config": self.config.name
            if self.program.config.startswith("json:")
            else (self.program.config),
            "simulator": self.engine,
        }

    def to_bytes(self) -> bytes:
        """The region blob (backends/blob.py): name and types in the header, the stream."""
        header = {
            "format": "npu-region",
            "version": REGION_VERSION,
            "name": self.name,
            "inputs": tensor_types(self.input_types),
            "outputs": tensor_types(self.output_types),
        }
        return pack_region(header, payload=self.stream)


REGION_VERSION = 2  # 1: a "name|1x2x3:int8;...|..." text header before the stream


def _parse_types(text: str):
    """Version 1's types: ``1x2x3:int8;...``."""
    from partita.ir import TensorType

    out = []
    for item in filter(None, text.split(";")):
        dims, dtype = item.split(":")
        out.append(TensorType(tuple(int(d) for d in dims.split("x") if d), dtype))
    return out


def load_region(data: bytes) -> NPURegion:
    """The inverse of ``NPURegion.to_bytes`` (decodes and validates; does not recompile)."""
    from .stream import StreamError

    try:
        n = int.from_bytes(data[:4], "little")
        if data[4:5] != b"{":  # version 1 (saved before the shared blob format)
            name, ins, outs = data[4 : 4 + n].decode().split("|")
            return NPURegion(data[4 + n :], name, _parse_types(ins), _parse_types(outs))
        header, _, stream = unpack_region(data)
        if header.get("format") != "npu-region" or header.get("version") != REGION_VERSION:
            raise ValueError(
                f"an NPU region of format {header.get('format')!r} version "
                f"{header.get('version')!r}; this partita reads version "
                f"{REGION_VERSION} (and 1)"
            )
        return NPURegion(
            stream,
            header["name"],
            parse_tensor_types(header["inputs"]),
            parse_tensor_types(header["outputs"]),
        )
    except (ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise StreamError(f"corrupt NPU region header: {exc}") from None


def compile_region(function, options: dict) -> NPURegion:
    """Partitioned function -> Program -> command stream -> a region that simulates it."""
    config = get_config(options.get("config"), options.get("sram"))
    program = compile_function(function, config)
    program.config = config_token(config, options.get("config"), options.get("sram"))
    name = str((function.attrs or {}).get("global_symbol", "npu"))
    ins, outs = region_types(function)
    return NPURegion(encode(program), name, ins, outs, options.get("sim") or "auto")


class NPUBackend(Backend):
    """The NPU's region check: on a design without off-chip memory for feature maps, a region
    whose maps the SRAM plan cannot hold at once (even cascaded) goes back to the CPU."""

    wants_region_function = True  # RegionPolicies hands check_region the region's function

    def check_region(self, stats, options: dict | None = None) -> Verdict:
        verdict = super().check_region(stats, options)
        function = getattr(stats, "function", None)
        if not verdict.ok or function is None:
            return verdict
        options = self.resolve_options(options)
        config = get_config(options.get("config"), options.get("sram"))
        if config.spill_memory != "none":
            return verdict
        try:
            infer_type(function)
            if _all_maps_bytes(function) <= config.sram_bytes:
                return verdict  # every map resident at once fits: no plan can fail
            compile_function(function, config)
        except SRAMError as exc:
            return Verdict(False, str(exc).removeprefix("npu: "))
        return verdict


def _all_maps_bytes(function) -> int:
    """The bytes of every feature map of a region (its inputs and every op's output)."""
    from partita.backends.cost import type_bytes

    from partita.ir import Call, post_order

    nodes = [*function.params, *(c for c in post_order(function.body) if isinstance(c, Call))]
    return sum(type_bytes(n.checked_type) for n in nodes)


backend = NPUBackend(
    "npu",
    patterns=pattern_table,
    compile=compile_region,
    load=load_region,
    passes=lambda: [
        NPUIntegerSemantics(),
        NPUConvertLayout(),
        NPULegalizeTransposeConv(),
        NPULegalizeSum(),
        NPULegalizeDepthMultiplier(),
    ],
    options={
        "config": Option(DEFAULT, None, f"a preset ({', '.join(PRESETS)}) or a .toml file"),
        "sram": Option(None, None, "SRAM size override, e.g. 512k"),
        "sim": Option(
            "auto",
            ENGINES,
            "simulator engine: native (the stream's ops as LLVM-compiled kernels), numpy, or "
            "auto (native for programs of 16M MACs or more; $PARTITA_NPU_SIM overrides)",
        ),
    },
    description="an Ethos-U-like NPU: command stream, bit-exact simulator, cycle model",
)
register_backend(backend)

__all__ = ["NPURegion", "backend", "compile_region", "load_region", "semantics_for"]
