"""Benchmark models by name: the committed ones, and those too large to commit, made on first use.

    from models import get_model            # from benchmarks/, or benchmarks.models from the root
    get_model("tflite/mobilenet_v1_100_224")              # committed: tests/models/tflite/large/
    get_model("onnx/mobilenet_v2_100_224.qop_u8s8_pc")    # committed: tests/models/onnx/large/
    get_model("onnx/mobilenet_v2_100_224")                # float model (14 MB): made into the cache
    get_model("onnx/mobilenet_v1_100_224.qdq_s8s8_pc")    # any other quantization: made likewise

    python benchmarks/models.py [NAME ...]                # print the paths (making what is missing)

Models that are not committed are made by tools/gen_onnx_models.py (tensorflow-cpu, tf2onnx and
onnxruntime; no network access) into $PARTITA_MODEL_CACHE, by default ~/.cache/partita-models,
byte-identical to what the generator makes. Making one takes about 20 s on 2 cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "models"
TOOLS = ROOT / "tools"
CACHE_ENV = "PARTITA_MODEL_CACHE"
FORMATS = {"tflite": ".tflite", "onnx": ".onnx"}
GROUPS = ("large", "nets")  # where committed models are looked for, in this order
LARGE_NETS = ("mobilenet_v2_100_224", "mobilenet_v1_100_224")
ONNX_CONFIGS = ("qdq_s8s8_pc", "qdq_u8s8_pt", "qop_u8s8_pc", "qop_s8s8_pt", "qop_u8s8_pt")


def cache_dir() -> Path:
    """$PARTITA_MODEL_CACHE, or ~/.cache/partita-models (the generator uses the same rule)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "partita-models")


def _split(name: str) -> tuple[str, str, str | None]:
    """'onnx/mobilenet_v1_100_224.qop_u8s8_pc' -> 'onnx', 'mobilenet_v1_100_224', 'qop_u8s8_pc'."""
    fmt, _, rest = name.partition("/")
    if fmt not in FORMATS or not rest:
        raise ValueError(f"model name {name!r}: expected 'tflite/NAME' or 'onnx/NAME[.CONFIG]'")
    net, _, config = rest.partition(".")
    return fmt, net, config or None


def committed(name: str) -> Path | None:
    """The committed file of a model name, or None."""
    fmt, net, config = _split(name)
    file = net + (f".{config}" if config else "") + FORMATS[fmt]
    return next((p for g in GROUPS if (p := MODELS / fmt / g / file).exists()), None)


def get_model(name: str) -> Path:
    """The path of a benchmark model; makes it into the cache folder when it is not committed.

    Raises ValueError for a name that is neither committed nor one the generator can make.
    """
    found = committed(name)
    if found is not None:
        return found
    fmt, net, config = _split(name)
    if fmt != "onnx" or net not in LARGE_NETS or (config and config not in ONNX_CONFIGS):
        raise ValueError(
            f"no model {name!r}: not in tests/models/{fmt}/ and not one tools/gen_onnx_models.py "
            f"makes on demand (onnx/{{{','.join(LARGE_NETS)}}}[.{{{','.join(ONNX_CONFIGS)}}}])"
        )
    target = cache_dir() / (net + (f".{config}" if config else "") + ".onnx")
    if not target.exists():
        _make(net, config, target)
    return target


def _make(net: str, config: str | None, target: Path) -> None:
    """Make one model with the generator, in its own process (TensorFlow's numerics depend on
    settings it must make before TensorFlow loads), into a private folder, then move it into
    place; the float model made on the way is kept in the cache too."""
    cache = target.parent
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        float_model = cache / f"{net}.onnx"
        if float_model.exists():
            shutil.copyfile(float_model, Path(tmp) / float_model.name)
        spec = net + (f".{config}" if config else "")
        cmd = [sys.executable, str(TOOLS / "gen_onnx_models.py"), "--make", spec, "--dest", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"making {spec} failed:\n{done.stderr[-2000:]}")
        made = Path(done.stdout.strip().splitlines()[-1])
        for p in Path(tmp).glob("*.onnx"):
            if p == made or not (cache / p.name).exists():
                os.replace(p, cache / p.name)


def main(argv: list[str] | None = None) -> int:
    names = argv if argv is not None else sys.argv[1:]
    if not names:
        names = [f"tflite/{n}" for n in LARGE_NETS] + [
            f"onnx/{n}.{c}" for n in LARGE_NETS for c in ("qop_u8s8_pc", "qop_u8s8_pt")
        ]
    for name in names:
        print(f"{name}: {get_model(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
