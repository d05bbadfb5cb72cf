"""The NPU's configuration: MAC array, block shapes, elementwise unit, memories, clock.

Presets follow Arm's public Ethos-U figures as Vela models them (architecture_features.py) and
the memory systems of Vela's default system configurations (vela.ini):

    u55-128, u55-256   Ethos_U55_High_End_Embedded, Shared_Sram: 500 MHz, feature maps in 4 MiB SRAM
                       (8 B/cycle), weights in off-chip flash (1 B/cycle)
    u65-256, u65-512   Ethos_U65_Client_Server, Dedicated_Sram_384KB: 1 GHz, SRAM 16 B/cycle,
                       DRAM 12 B/cycle; weights and spilled feature maps in DRAM

The MAC array's block model (blocks.py) also takes Vela's shared-buffer size (48 banks of 1 KiB
on the 256-MAC parts, 24 on u55-128) and core count (u65-512 is two 256-MAC cores). The U65
presets keep a region's inputs and outputs in DRAM, as Vela's Dedicated_Sram mode does.

``-config=NAME`` picks a preset, ``-config=path.toml`` loads a custom one (any field below, plus
``base = "u55-256"`` to start from a preset); ``-sram=512k`` overrides the SRAM size.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from partita.errors import PartitaError


class ConfigError(PartitaError):
    """An unknown preset, an unreadable or invalid TOML config, or a bad option value."""


@dataclass(frozen=True)
class NPUConfig:
    """One NPU design. Bandwidths are bytes per NPU clock cycle."""

    name: str
    macs_per_cycle: int  # int8 MACs per cycle of the MAC array
    ofm_block: tuple[int, int, int]  # output micro-block (height, width, channels) per step
    ifm_depth_per_cycle: int  # input channels consumed per MAC step
    conv_output_cycles: float  # output stage per element of a conv/FC (Vela's table, index 7)
    add_output_cycles: float  # per output element of add/sub (index 5)
    mul_output_cycles: float  # per output element of mul (index 3)
    pool_output_cycles: float  # per element of pooling and mean (index 6)
    lut_cycles: float  # per element through a look-up table (activation index 0)
    clock_hz: float
    sram_bytes: int
    sram_bandwidth: float
    weight_memory: str  # where weights live: "flash" or "dram"
    weight_bandwidth: float
    spill_memory: str  # where feature maps go when SRAM is full: "dram" or "none"
    spill_bandwidth: float
    op_overhead_cycles: int  # command decode and pipeline fill per operation
    dma_latency_cycles: int  # first-byte latency of an off-chip transfer
    shram_banks: int = 48  # the MAC array's shared buffer, 1 KiB banks (block-config search)
    shram_ifm_granule: int = 8  # banks allocated at a time for input blocks
    shram_acc_granule: int = 16  # and for 32-bit accumulators
    cores: int = 1  # MAC-array cores working on one block in parallel
    sram_latency_cycles: int = 32  # first-byte latency of an SRAM block transfer
    io_memory: str = "sram"  # where a region's input and output maps live
    offchip_burst_bytes: int = 128  # burst length of the off-chip memory (vela.ini)
    max_kernel: int = 8 * 8  # largest kernel area the MAC array takes without splitting
    max_stride: int = 3

    def describe(self) -> dict:
        return dataclasses.asdict(self)


# Vela's output/activation cycles per element for each MAC array (architecture_features.py)
OUTPUT_FIELDS = (
    "conv_output_cycles",
    "add_output_cycles",
    "mul_output_cycles",
    "pool_output_cycles",
    "lut_cycles",
)
_U55 = dict(
    ifm_depth_per_cycle=8,
    clock_hz=500e6,
    sram_bytes=4 << 20,
    sram_bandwidth=8.0,
    weight_memory="flash",
    weight_bandwidth=1.0,
    spill_memory="none",
    spill_bandwidth=0.0,
    op_overhead_cycles=300,
    dma_latency_cycles=64,
)
_U65 = dict(
    ifm_depth_per_cycle=8,
    clock_hz=1e9,
    sram_bytes=384 << 10,
    sram_bandwidth=16.0,
    weight_memory="dram",
    weight_bandwidth=12.0,
    spill_memory="dram",
    spill_bandwidth=12.0,
    io_memory="dram",
    op_overhead_cycles=300,
    dma_latency_cycles=500,
)

PRESETS = {
    name: NPUConfig(name, macs, block, **dict(zip(OUTPUT_FIELDS, cycles)), **memory)
    for name, macs, block, cycles, memory in (
        (
            "u55-128",
            128,
            (1, 2, 8),
            (0.5, 1.5, 0.75, 0.25, 1.0),
            {**_U55, "shram_banks": 24, "shram_ifm_granule": 4, "shram_acc_granule": 8},
        ),
        ("u55-256", 256, (2, 2, 8), (0.25, 0.75, 0.375, 0.125, 1.0), _U55),
        ("u65-256", 256, (2, 2, 8), (0.25, 0.75, 0.375, 0.125, 1.0), _U65),
        (
            "u65-512",
            512,
            (2, 2, 8),
            (0.125, 0.375, 0.1875, 0.0625, 0.5),
            {**_U65, "cores": 2},
        ),
    )
}
DEFAULT = "u55-256"


def parse_size(text) -> int:
    """``"512k"`` / ``"1m"`` / ``"393216"`` -> bytes."""
    s = str(text).strip().lower()
    scale = {"k": 1 << 10, "m": 1 << 20}.get(s[-1:], 1)
    try:
        value = int(float(s[:-1] if scale > 1 else s) * scale)
    except ValueError:
        raise ConfigError(f"-sram={text}: write a size such as 256k, 1m or 393216") from None
    if not 16 << 10 <= value <= 64 << 20:
        raise ConfigError(f"-sram={text}: the SRAM must be between 16 KiB and 64 MiB")
    return value


def _from_toml(path: Path) -> NPUConfig:
    import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read NPU config {str(path)!r}: {exc}") from None
    base = PRESETS.get(data.pop("base", DEFAULT))
    if base is None:
        raise ConfigError(f"{path}: base must be one of {', '.join(PRESETS)}")
    fields = {f.name: f for f in dataclasses.fields(NPUConfig)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(f"{path}: unknown field {unknown[0]!r} (fields: {', '.join(fields)})")
    if "ofm_block" in data:
        data["ofm_block"] = tuple(data["ofm_block"])
    config = dataclasses.replace(base, name=data.pop("name", path.stem), **data)
    _validate(config, str(path))
    return config


def _validate(c: NPUConfig, where: str) -> None:
    positive = (
        "macs_per_cycle",
        "ifm_depth_per_cycle",
        "clock_hz",
        "sram_bytes",
        "sram_bandwidth",
        "weight_bandwidth",
        "shram_banks",
        "shram_ifm_granule",
        "shram_acc_granule",
        "cores",
        *OUTPUT_FIELDS,
    )
    for name in positive:
        value = getattr(c, name)
        if not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{where}: {name} must be a positive number, got {value!r}")
    if len(c.ofm_block) != 3 or any(not isinstance(v, int) or v < 1 for v in c.ofm_block):
        raise ConfigError(f"{where}: ofm_block must be three positive integers")
    if c.weight_memory not in ("flash", "dram", "sram"):
        raise ConfigError(f"{where}: weight_memory must be flash, dram or sram")
    if c.io_memory not in ("sram", "dram"):
        raise ConfigError(f"{where}: io_memory must be sram or dram")
    if c.spill_memory not in ("dram", "none"):
        raise ConfigError(f"{where}: spill_memory must be dram or none")


def get_config(name: str | None = None, sram=None) -> NPUConfig:
    """A preset by name or a TOML file by path, with an optional SRAM size override."""
    name = name or DEFAULT
    if name in PRESETS:
        config = PRESETS[name]
    elif name.endswith(".toml"):
        config = _from_toml(Path(name))
    else:
        raise ConfigError(
            f"unknown NPU config {name!r}: use a preset ({', '.join(PRESETS)}) or a .toml file"
        )
    if sram is not None:
        config = dataclasses.replace(config, sram_bytes=parse_size(sram))
    return config


def config_token(config: NPUConfig, name: str | None, sram) -> str:
    """What a command stream records of its machine: a preset's name (with ``@sram=`` when
    overridden), or for a TOML config every resolved field as JSON, so that a saved executable
    loads without the file and a later edit of the file cannot change its cycles."""
    name = name or config.name
    if name in PRESETS:
        return f"{name}@sram={sram}" if sram else name
    return "json:" + json.dumps(dataclasses.asdict(config), sort_keys=True)


def config_from_token(token: str) -> NPUConfig:
    """The inverse of ``config_token`` (validated like a TOML file)."""
    if token.startswith("json:"):
        try:
            data = json.loads(token[5:])
            fields = {f.name for f in dataclasses.fields(NPUConfig)}
            if not isinstance(data, dict) or set(data) != fields:
                raise ValueError("the fields do not match this version's NPUConfig")
            data["ofm_block"] = tuple(data["ofm_block"])
            config = NPUConfig(**data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"the stream's NPU config is not valid: {exc}") from None
        _validate(config, "the stream's NPU config")
        return config
    name, _, sram = token.partition("@sram=")
    return get_config(name, sram or None)
