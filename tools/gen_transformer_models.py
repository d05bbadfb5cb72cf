"""Generate the BERT-style encoder test models in tests/models/transformers/, deterministically.

    /work/venv/bin/python tools/gen_transformer_models.py [--out DIR]

Needs torch 2.13.0 (CPU), onnxscript (the dynamo exporter) and onnxruntime 1.31. The encoder
(``TinyBert``) has token and position embeddings, an attention mask (padding -> -10000 through
Equal/Where), 2 post-LN layers of hidden 64 with 4 heads and an erf GELU feed-forward of 128,
and a classification head on the first token (tanh pooler, 3 classes). Random weights, seeded;
inputs ``input_ids`` (int64 [batch, seq], vocab 100) and ``attention_mask`` (int64 [batch, seq]).

    bert_tiny.onnx            torch.onnx.export(dynamo=False), opset 17, dynamic batch and seq
    bert_tiny.opset14.onnx    the same at opset 14 (LayerNormalization decomposed: ReduceMean, Sub,
                              Pow, Sqrt, Div)
    bert_tiny.dynamo.onnx     torch.onnx.export(dynamo=True), opset 18, static [1, 16]
    bert_tiny.dyn_int8.onnx   quantize_dynamic (DynamicQuantizeLinear + MatMulInteger), int8 weights
    bert_tiny.qdq.onnx        quant_pre_process + quantize_static, QDQ, int8 activations/weights
    bert_tiny.ort_fused.onnx  onnxruntime.transformers.optimizer (Attention, SkipLayerNormalization,
                              BiasGelu), offline, opt_level 0
    bert_tiny.dyn_int8.ort_opt.onnx  the dynamic int8 model after ONNX Runtime's extended graph
                              optimizations (DynamicQuantizeMatMul, MatMulIntegerToFloat, ...)
    bert_tiny.pt2             torch.export of the float model, static [1, 16]
    bert_tiny.pt2e_xnnpack.pt2  PT2E (torchao XNNPACKQuantizer, per-channel), static [1, 16]
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

warnings.filterwarnings("ignore")
logging.getLogger("torch.onnx").setLevel(logging.ERROR)

VOCAB, CLASSES = 100, 3
SEQ = 16
SEED = 1515
N_CALIB = 16


@dataclass(frozen=True)
class Config:
    """The encoder's geometry; the default is the tiny test model, ``BERT_BASE`` the benchmark's
    (benchmarks/transformers.py)."""

    hidden: int = 64
    heads: int = 4
    layers: int = 2
    ffn: int = 128
    max_pos: int = 32


BERT_BASE = Config(hidden=768, heads=12, layers=12, ffn=3072, max_pos=512)


class Layer(nn.Module):
    """A post-LN BERT layer: self-attention, add & norm, GELU feed-forward, add & norm."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.q, self.k, self.v = (nn.Linear(c.hidden, c.hidden) for _ in range(3))
        self.o = nn.Linear(c.hidden, c.hidden)
        self.ln1, self.ln2 = nn.LayerNorm(c.hidden), nn.LayerNorm(c.hidden)
        self.ff1, self.ff2 = nn.Linear(c.hidden, c.ffn), nn.Linear(c.ffn, c.hidden)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.c.heads, self.c.hidden // self.c.heads).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scale = math.sqrt(self.c.hidden // self.c.heads)
        scores = torch.matmul(q, k.transpose(-1, -2)) / scale + bias
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3)
        ctx = ctx.reshape(x.shape[0], x.shape[1], self.c.hidden)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class TinyBert(nn.Module):
    """``hf_mask``: the additive mask as Hugging Face's BERT makes it, (1 - mask) * -10000 (the
    form onnxruntime's transformer optimizer fuses into Attention); else Equal/Where."""

    def __init__(self, hf_mask: bool = False, c: Config = Config()):
        super().__init__()
        self.hf_mask = hf_mask
        self.tok = nn.Embedding(VOCAB, c.hidden)
        self.pos = nn.Embedding(c.max_pos, c.hidden)
        self.ln = nn.LayerNorm(c.hidden)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))
        self.pool = nn.Linear(c.hidden, c.hidden)
        self.cls = nn.Linear(c.hidden, CLASSES)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.ln(self.tok(input_ids) + self.pos(pos)[None])
        if self.hf_mask:
            bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        else:
            bias = torch.where(attention_mask[:, None, None, :] == 0, -10000.0, 0.0)
        for layer in self.layers:
            x = layer(x, bias)
        return self.cls(torch.tanh(self.pool(x[:, 0])))


def make_model(hf_mask: bool = False, c: Config = Config()) -> TinyBert:
    torch.manual_seed(SEED)
    model = TinyBert(hf_mask, c).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 1.0 / math.sqrt(m.in_features))
                nn.init.normal_(m.bias, 0.0, 0.05)
            elif isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.7, 1.3)
                m.bias.normal_(0.0, 0.05)
    return model


def inputs(n: int, seed: int, seq: int = SEQ) -> list[dict[str, np.ndarray]]:
    """``n`` single-sequence feeds: random token ids, the last 0..seq/2 positions padded."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(1, VOCAB, (1, seq), dtype=np.int64)
        mask = np.ones((1, seq), np.int64)
        mask[0, seq - int(rng.integers(0, seq // 2 + 1)) :] = 0
        ids[mask == 0] = 0
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


def _clean(proto: onnx.ModelProto, producer: str) -> None:
    """Drop stack traces and doc strings so the file does not depend on the machine."""
    del proto.metadata_props[:]
    for node in proto.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    proto.doc_string, proto.producer_name = "", producer


def export_legacy(model: TinyBert, path: Path, opset: int = 17, seq: int = SEQ) -> None:
    feed = inputs(1, SEED, seq)[0]
    args = (torch.from_numpy(feed["input_ids"]), torch.from_numpy(feed["attention_mask"]))
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    torch.onnx.export(
        model,
        args,
        str(path),
        dynamo=False,
        opset_version=opset,
        input_names=["input_ids", "attention_mask"],
        output_names=["logits"],
        dynamic_axes=dyn,
    )
    proto = onnx.load(path)
    _clean(proto, "partita gen_transformer_models.py (torch.onnx.export, legacy)")
    onnx.save(proto, path)


def export_dynamo(model: TinyBert, path: Path) -> None:
    feed = inputs(1, SEED)[0]
    args = (torch.from_numpy(feed["input_ids"]), torch.from_numpy(feed["attention_mask"]))
    program = torch.onnx.export(
        model,
        args,
        dynamo=True,
        opset_version=18,
        input_names=["input_ids", "attention_mask"],
        output_names=["logits"],
        verbose=False,
    )
    proto = program.model_proto
    _clean(proto, "partita gen_transformer_models.py (torch.onnx.export, dynamo)")
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, path)


def quantize_dynamic_int8(float_path: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(float_path), str(out), weight_type=QuantType.QInt8)
    proto = onnx.load(out)
    _clean(proto, "partita gen_transformer_models.py (quantize_dynamic)")
    onnx.save(proto, out)


class _Reader:
    def __init__(self, samples):
        self.it = iter(samples)

    def get_next(self):
        return next(self.it, None)


def quantize_qdq(float_path: Path, out: Path) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    reader = type("Reader", (_Reader, CalibrationDataReader), {})(inputs(N_CALIB, SEED + 1))
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(float_path), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre),
            str(out),
            reader,
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gemm"],
            extra_options={"ActivationSymmetric": False},
        )
    proto = onnx.load(out)
    _clean(proto, "partita gen_transformer_models.py (quantize_static QDQ)")
    onnx.save(proto, out)


def ort_fuse(out: Path) -> None:
    from onnxruntime.transformers import optimizer

    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf.onnx"
        export_legacy(make_model(hf_mask=True), hf)
        opt = optimizer.optimize_model(
            str(hf),
            model_type="bert",
            num_heads=Config().heads,
            hidden_size=Config().hidden,
            opt_level=0,
            use_gpu=False,
        )
    _clean(opt.model, "partita gen_transformer_models.py (onnxruntime.transformers.optimizer)")
    opt.save_model_to_file(str(out))  # adds the com.microsoft opset import


def ort_optimized(src: Path, out: Path) -> None:
    """ONNX Runtime's own extended-level graph optimizations of ``src``, saved (dynamic int8
    becomes DynamicQuantizeMatMul / MatMulIntegerToFloat)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(out)
    ort.InferenceSession(str(src), opts, providers=["CPUExecutionProvider"])
    proto = onnx.load(out)
    _clean(proto, "partita gen_transformer_models.py (onnxruntime ORT_ENABLE_EXTENDED)")
    onnx.save(proto, out)


def export_pt2(model: TinyBert, path: Path) -> None:
    feed = inputs(1, SEED)[0]
    args = (torch.from_numpy(feed["input_ids"]), torch.from_numpy(feed["attention_mask"]))
    torch.export.save(torch.export.export(model, args), str(path))


def export_pt2e(model: TinyBert, path: Path) -> None:
    """PT2E with torchao's XNNPACKQuantizer (symmetric, per-channel weights), calibrated on
    N_CALIB sequences, exported again with torch.export."""
    from gen_torch_models import _drop_unused_attributes
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    feed = inputs(1, SEED)[0]
    args = tuple(torch.from_numpy(v) for v in feed.values())
    quantizer = XNNPACKQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, args).module(), quantizer)
    for f in inputs(N_CALIB, SEED + 1):
        prepared(*(torch.from_numpy(v) for v in f.values()))
    converted = convert_pt2e(prepared)
    _drop_unused_attributes(converted)
    torch.export.save(torch.export.export(converted, args), str(path))


def op_counts(path: Path) -> str:
    counts: dict[str, int] = {}
    for node in onnx.load(path).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/models/transformers"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    model = make_model()
    base = args.out / "bert_tiny.onnx"
    export_legacy(model, base)
    steps = [
        ("dynamo", lambda p: export_dynamo(model, p)),
        ("opset14", lambda p: export_legacy(model, p, opset=14)),
        ("dyn_int8", lambda p: quantize_dynamic_int8(base, p)),
        ("qdq", lambda p: quantize_qdq(base, p)),
        ("ort_fused", ort_fuse),
        ("dyn_int8.ort_opt", lambda p: ort_optimized(args.out / "bert_tiny.dyn_int8.onnx", p)),
    ]
    for suffix, make in steps:
        path = args.out / f"bert_tiny.{suffix}.onnx"
        try:
            make(path)
        except Exception as e:  # noqa: BLE001 - report and go on with the other variants
            print(f"{path}: failed ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        print(f"{path} {path.stat().st_size} bytes: {op_counts(path)}", file=sys.stderr)
    export_pt2(model, args.out / "bert_tiny.pt2")
    export_pt2e(model, args.out / "bert_tiny.pt2e_xnnpack.pt2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
