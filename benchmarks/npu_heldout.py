"""The issue's bars on held-out models: bit-exact with TFLite's reference kernels and cycles
against Vela 5.2, per model and preset.

    python benchmarks/npu_heldout.py MODEL.tflite ... [--presets u55-256 u65-256]

Models: tools/gen_heldout_models.py (MobileNet v1/v2/v3, EfficientNet-B0, ResNet-50; not
committed). Each model is built for "npu -config=<preset>, ref" and run on one random int8
input; the outputs are compared with ai-edge-litert's BUILTIN_REF interpreter.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

import numpy as np  # noqa: E402
from npu import vela  # noqa: E402
from partita.frontends import from_tflite  # noqa: E402

import partita as P  # noqa: E402


def reference(path: Path, x: np.ndarray) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--presets", nargs="+", default=["u55-256", "u65-256"])
    args = parser.parse_args(argv)
    print("| model | preset | ours | Vela | ratio | MACs on the NPU | NPU partitions | bit-exact |")
    print("|---|---|---|---|---|---|---|---|")
    for path in args.models:
        mod = from_tflite(str(path))
        want = None
        for preset in args.presets:
            exe = P.build(mod, f"npu -config={preset}, ref")
            t = exe.input_types[0]
            x = np.random.default_rng(0).integers(-128, 128, t.shape, dtype=t.dtype)
            if want is None:
                want = reference(path, x)
            got = exe.run(x)
            exact = all(np.array_equal(g, w) for g, w in zip(got, want))
            summary = exe.report.summary()
            regions = [s.region for s in exe.steps if s.target == "npu"]
            cycles = sum(c["cycles"] for r in regions for c in r.cycles)
            share = summary["macs_by_target"].get("npu", 0) / max(1, summary["macs"])
            v = vela(path, preset)
            ratio = f"{cycles / v['cycles']:.2f}" if v else "-"
            vc = f"{v['cycles']:,.0f}" if v else "-"
            print(
                f"| {path.stem} | {preset} | {cycles:,} | {vc} | {ratio} | {100 * share:.1f}% | "
                f"{summary['partitions']} | {'yes' if exact else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
