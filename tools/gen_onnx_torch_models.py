"""Generate the torch.onnx.export test networks in tests/models/onnx/nets/, deterministically.

    /work/venv/bin/python tools/gen_onnx_torch_models.py [--out DIR]

Needs torch 2.13.0 (CPU), onnxscript 0.7 (torch.onnx.export's dynamo exporter) and onnxruntime
1.31, all in partita's venv. The network is tools/gen_torch_models.py's MobileNetV2 (64x64 input,
the same weights as tests/models/pytorch/float_mobilenetv2: BatchNorm without centring, one
variance per layer, low-pass kernels), exported by torch.onnx.export(dynamo=True) at opset 18
(BatchNorm folded into the convolutions; AdaptiveAvgPool2d becomes ReduceMean), then
quant_pre_process and quantize_static, calibrated on 16 fixed-seed smooth random images (the
network's low-pass kernels average white noise away, so uniform inputs would give it almost
constant outputs):

    torch_mobilenetv2_64.onnx               the float export
    torch_mobilenetv2_64.qdq_s8s8_pc.onnx   QDQ,       int8 activations,  int8 weights per channel
    torch_mobilenetv2_64.qop_u8s8_pt.onnx   QOperator, uint8 activations, int8 weights per tensor

The README of tests/models/onnx is rewritten by gen_onnx_models.write_readme, which lists these.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from pathlib import Path

import onnx
import torch
from gen_onnx_models import Reader, op_counts, seed_of, write_readme
from gen_torch_models import N_CALIB, H, MobileNetV2, images, init_weights
from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

warnings.filterwarnings("ignore")
logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed"

NAME = "torch_mobilenetv2_64"
OPSET = 18  # the dynamo exporter's own; its down-conversion to 17 fails on ReduceMean's axes
CONFIGS = {
    "qdq_s8s8_pc": (QuantFormat.QDQ, QuantType.QInt8, True),
    "qop_u8s8_pt": (QuantFormat.QOperator, QuantType.QUInt8, False),
}


def export(path: Path) -> None:
    """The float network, initialised as gen_torch_models does, through torch.onnx.export."""
    model = MobileNetV2().eval()
    calib = images(N_CALIB, H, seed_of("float_mobilenetv2") + 1)
    init_weights(model, calib, seed_of(MobileNetV2.__name__))
    example = torch.zeros(1, 3, H, H)
    program = torch.onnx.export(model, (example,), dynamo=True, opset_version=OPSET,
                                input_names=["input"], output_names=["logits"], verbose=False)
    proto = program.model_proto
    # stack traces and local paths would make the file depend on the machine
    del proto.metadata_props[:]
    for node in proto.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    proto.doc_string = ""
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, path)


def quantize(float_path: Path, out: Path, config: str) -> None:
    fmt, act, per_channel = CONFIGS[config]
    calib = images(N_CALIB, H, seed_of(NAME) + 1).numpy()
    samples = [{"input": calib[i : i + 1]} for i in range(N_CALIB)]
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(float_path), str(pre), skip_symbolic_shape=True)
        quantize_static(str(pre), str(out), Reader(samples), quant_format=fmt,
                        activation_type=act, weight_type=QuantType.QInt8,
                        per_channel=per_channel,
                        extra_options={"ForceQuantizeNoInputCheck": True})
    m = onnx.load(out)
    m.producer_name, m.doc_string = "partita gen_onnx_torch_models.py (quantize_static)", ""
    onnx.save(m, out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/models/onnx"))
    args = ap.parse_args(argv)
    nets = args.out / "nets"
    nets.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed_of(NAME))
    float_path = nets / f"{NAME}.onnx"
    export(float_path)
    paths = [float_path]
    for config in CONFIGS:
        paths.append(nets / f"{NAME}.{config}.onnx")
        quantize(float_path, paths[-1], config)
    for p in paths:
        print(f"{p} {p.stat().st_size} bytes: {op_counts(p)}", file=sys.stderr)
    write_readme(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
