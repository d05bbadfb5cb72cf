"""PyTorch frontend: import time of the PT2E MobileNetV2, and how far partita is from PyTorch.

    python benchmarks/frontends_pytorch.py [--inputs 32] [--repeat 5]

Import time: from_pytorch on the .pt2 path (torch.export.load included) and on the loaded
ExportedProgram (conversion and QDQ -> QNN rewrites only), median of ``--repeat``, next to
torch.export.load itself. Differences: for every committed quantized model (PT2E programs also
with match="pytorch_eager", TorchScript also with float_bias), the distribution of max
|partita - PyTorch| per input in output quanta, bit-exact inputs and the top-1 agreement
(docs/pytorch.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
from partita.frontends import from_pytorch

import partita

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "models" / "pytorch"
sys.path.insert(0, str(ROOT / "tests" / "frontends" / "pytorch"))
from test_pytorch_models import images, output_quantum  # noqa: E402


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def import_times(repeat: int) -> None:
    path = MODELS / "pt2e_x86_mobilenetv2.pt2"
    torch.export.load(path)  # first load pays torch's one-time deserializer set-up
    ep = torch.export.load(path)
    load = median_time(lambda: torch.export.load(path), repeat)
    conv = median_time(lambda: from_pytorch(ep), repeat)
    raw = median_time(lambda: from_pytorch(ep, convert_qdq=False), repeat)
    whole = median_time(lambda: from_pytorch(path), repeat)
    print(f"PT2E MobileNetV2 (x86): torch.export.load {load * 1e3:.0f} ms; from_pytorch(program) "
          f"{conv * 1e3:.0f} ms (of which QDQ->QNN {(conv - raw) * 1e3:.0f} ms); "
          f"from_pytorch(path) {whole * 1e3:.0f} ms")


def distribution(name: str, n: int, float_bias: bool = False, match: str = "qnn") -> None:
    side = 16 if "ops" in name else 96 if "_tv_" in name else 64
    path = MODELS / name
    if name.endswith(".pt2"):
        ep = torch.export.load(path)
        mod, ref_fn = from_pytorch(ep, match=match), ep.module()
        quantum = output_quantum(from_pytorch(ep))
    else:
        ref_fn = torch.jit.load(str(path))
        mod = from_pytorch(path, [(1, 3, side, side)], float_bias=float_bias)
        quantum = output_quantum(mod)
    diffs, top1, exact = Counter(), 0, 0
    for x in images(n, side, 2024):
        ref = ref_fn(torch.from_numpy(x[None])).detach().numpy()
        ours = partita.interpret(mod, {mod.attrs["input_names"][0]: x[None]})[0]
        diffs[int(round(float(np.abs(ours - ref).max()) / quantum))] += 1
        top1 += int(ours.argmax() == ref.argmax())
        exact += int(np.array_equal(ours, ref))
    hist = ", ".join(f"{k} LSB: {v}" for k, v in sorted(diffs.items()))
    tag = " (float_bias)" if float_bias else f" (match={match})" if match != "qnn" else ""
    print(f"{name}{tag}: max |diff| per input {{{hist}}}; bit-exact {exact}/{n}; "
          f"top-1 equal {top1}/{n}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    torch.backends.quantized.engine = "fbgemm"
    import_times(args.repeat)
    for name in ("pt2e_x86_mobilenetv2.pt2", "pt2e_xnnpack_mobilenetv2.pt2", "pt2e_x86_ops.pt2",
                 "pt2e_xnnpack_ops.pt2", "ts_eager_mobilenetv2.pt", "ts_fx_mobilenetv2.pt",
                 "ts_eager_ops.pt"):
        distribution(name, args.inputs)
        if name.endswith(".pt"):
            distribution(name, args.inputs, float_bias=True)
        else:
            distribution(name, args.inputs, match="pytorch_eager")
    # issue 16 part 3: the eager x86 model on every x86 engine (PyTorch re-packs on load)
    for engine in ("x86", "fbgemm", "onednn"):
        torch.backends.quantized.engine = engine
        print(f"engine {engine}:", end=" ")
        distribution("ts_eager_x86_tv_mobilenetv2_035.pt", args.inputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
