"""Generate the BATCH_MATMUL shape models that pin Vela 5.2's MatMul costing
(backends/npu/vela_matmul.py, tests/backends/npu/test_npu_matmul_vela.py), deterministically.

    /work/tfvenv/bin/python tools/gen_matmul_models.py [--out tests/models/tflite/matmul]
    /work/tfvenv/bin/python tools/gen_matmul_models.py --record [--out ...]

Run from the repository root with the converter's environment (TensorFlow, as
tools/gen_tflite_models.py; its post-training int8 quantization, seeds from the model's name,
20 calibration samples in [-1, 1] and [-2, 2]). Each model is one int8 BATCH_MATMUL of two
inputs, named ``b{batch}_m{M}_k{K}_n{N}`` (``_adj`` for adj_y): shapes chosen to exercise the
rule's cases (several columns, MatMulDependencyFit splitting the rows or the columns, more than one
32-channel pass, several batches, more than one ReduceSum block, an odd shape). Only the
.tflite files are written (no test inputs: they are for cycle counts; bits are tested on
tests/models/tflite/ops/batch_matmul*).

``--record`` runs Vela 5.2 (`vela --enable-debug-db`, its default system config per preset) on
these models and tests/models/tflite/ops/batch_matmul*.tflite and writes, per model and preset,
the file's SHA-256 prefix, Vela's NPU cycles and per operation (Transpose, MatMul) its NPU and
op cycles, ao and cmd cycles and output block to tests/backends/npu/data/vela_matmul.json.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import tensorflow as tf

N_CALIB = 20

# (batch, M, K, N, adj_y)
SHAPES = [
    (1, 4, 8, 12, False),
    (1, 12, 8, 6, False),
    (1, 4, 64, 6, False),
    (1, 16, 16, 16, False),
    (2, 20, 40, 5, False),
    (1, 40, 24, 3, True),
    (3, 3, 24, 7, True),
    (1, 100, 16, 4, False),
]


def name_of(batch: int, m: int, k: int, n: int, adj: bool) -> str:
    return f"b{batch}_m{m}_k{k}_n{n}" + ("_adj" if adj else "")


def convert(batch: int, m: int, k: int, n: int, adj: bool) -> bytes:
    """The int8 model of x @ y (y^T with adj_y), x in [-1, 1] and y in [-2, 2]."""
    shapes = [(batch, m, k), (batch, n, k) if adj else (batch, k, n)]
    sig = [tf.TensorSpec(s, tf.float32, name=f"x{i}") for i, s in enumerate(shapes)]
    fn = tf.function(lambda x, y: tf.matmul(x, y, transpose_b=adj), input_signature=sig)
    rng = np.random.default_rng(zlib.crc32(name_of(batch, m, k, n, adj).encode()))
    calib = [
        [rng.uniform(-r, r, s).astype(np.float32) for r, s in zip((1.0, 2.0), shapes)]
        for _ in range(N_CALIB)
    ]
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.representative_dataset = lambda: iter(calib)
    conv.inference_input_type = conv.inference_output_type = tf.int8
    return conv.convert()


PRESETS = {p: f"ethos-{p}" for p in ("u55-128", "u55-256", "u65-256", "u65-512")}
RECORD = Path("tests/backends/npu/data/vela_matmul.json")


def _table(root, name: str) -> list[dict]:
    (table,) = [t for t in root.iter("table") if t.get("name") == name]
    return list(csv.DictReader(io.StringIO(table.text.strip())))


def vela_row(model: Path, preset: str) -> dict:
    """Vela's figures for ``model`` on ``preset`` from its debug database and summary."""
    with tempfile.TemporaryDirectory() as out:
        args = [model, "--accelerator-config", PRESETS[preset], "--output-dir", out]
        vela = Path(sys.executable).parent / "vela"
        subprocess.run([vela, *args, "--enable-debug-db"], capture_output=True, check=True)
        root = ElementTree.parse(next(Path(out).glob("*_debug.xml"))).getroot()
        (summary,) = csv.DictReader(next(Path(out).glob("*_summary_*.csv")).open())
    main = {r["id"]: r for r in _table(root, "perf_debug_main")}
    ops = []
    for r in _table(root, "perf"):
        m = main[r["id"]]
        block = "x".join(m[f"ofm_block_{a}"] for a in "hwc")
        cycles = {k: int(r[k]) for k in ("npu_cycles", "op_cycles")}
        ops.append({"op": r["operator"], **cycles, "ao": int(m["ao_cycles"]), "block": block})
        ops[-1]["cmd"] = int(m["cmd_cycles"])
    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    return {"sha256": digest, "npu_cycles": float(summary["cycles_npu"]), "ops": ops}


def record(models: list[Path]) -> None:
    rows = {}
    for model in models:
        for preset in PRESETS:
            rows[f"{model.with_suffix('')}/{preset}"] = vela_row(model, preset)
            print(model.stem, preset, rows[f"{model.with_suffix('')}/{preset}"], file=sys.stderr)
    RECORD.write_text(json.dumps(rows, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/models/tflite/matmul"))
    ap.add_argument("--record", action="store_true", help="record Vela's figures (docstring)")
    args = ap.parse_args(argv)
    if args.record:
        ops = sorted(Path("tests/models/tflite/ops").glob("batch_matmul*.tflite"))
        record(ops + [args.out / f"{name_of(*shape)}.tflite" for shape in SHAPES])
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for shape in SHAPES:
        name, model = name_of(*shape), convert(*shape)
        ops = [d["op_name"] for d in tf.lite.Interpreter(model_content=model)._get_ops_details()]
        assert ops == ["BATCH_MATMUL"], (name, ops)
        (args.out / f"{name}.tflite").write_bytes(model)
        print(f"{name}: {len(model)} B", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
