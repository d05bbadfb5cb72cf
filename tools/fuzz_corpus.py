"""Regenerate tests/fuzz_corpus: one minimal reproducer per class of bad model partita must refuse.

    python tools/fuzz_corpus.py

Each reproducer is a committed test model with one or two field edits (tools/fuzz_mutate.py),
named after its class: the classes the first fuzz campaign found (issue 16) and the ones
tools/fuzz.py found since. tests/test_fuzz_corpus.py replays them (under the fuzzer's memory
budget, 256 MiB): each must be refused with a PartitaError subclass (``expect: "refused"``) or
handled (``"ok"``: TFLite's reference kernels accept it too, and partita's result equals theirs),
never escape with another exception. ``expect_text`` is a piece of the refusal message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import fuzz_mutate as fm  # noqa: E402

OPS = ROOT / "tests" / "models"
OUT = ROOT / "tests" / "fuzz_corpus"
CONV = "tflite/ops/conv2d_same_s1_relu.tflite"  # tensors: 0 x, 1 bias, 2 weights, 3 output
DIL = "tflite/ops/conv2d_same_dil2.tflite"
POOL = "tflite/ops/avgpool_same_k3s2.tflite"
DW = "tflite/ops/dwconv_m1_s1_same_relu6.tflite"
RESIZE = "tflite/ops/resize_bilinear_asymmetric.tflite"
RESIZE_AC = "tflite/ops/resize_bilinear_align_corners.tflite"  # weights quantized along dimension 3


def tensor_field(data: bytes, tensor: int, kind: str, element: int = 0) -> tuple:
    import tflite

    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    found = [f for f in fm._tensor_fields(graph.Tensors(tensor)) if f[0] == kind]
    return found[element]


def op_field(data: bytes, kind: str, element: int = 0) -> tuple:
    import tflite

    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    found = [f for f in fm._operator_fields(graph.Operators(0)) if f[0] == kind]
    return found[element]


def write(kind_value_fields) -> list:
    return [("w", pos, fmt, value) for (_, pos, fmt), value in kind_value_fields]


def tflite_cases() -> dict:
    conv = (OPS / CONV).read_bytes()
    dil = (OPS / DIL).read_bytes()
    pool = (OPS / POOL).read_bytes()

    def t(tensor, kind, value, element=0, data=conv):
        return (tensor_field(data, tensor, kind, element), value)

    options = [f for f in fm._operator_fields(_op(dil)) if f[0] == "option"]
    return {
        "tflite_tiny_output_scale": (CONV, write([t(3, "scale", 1e-45)]), "ok", ""),
        "tflite_negative_zero_scale": (CONV, write([t(3, "scale", -0.0)]), "refused", "scale"),
        "tflite_zero_input_scale": (CONV, write([t(0, "scale", 0.0)]), "ok", ""),
        "tflite_weight_zero_point": (CONV, write([t(2, "zero_point", 3)]), "refused", "zero"),
        "tflite_bias_zero_point": (CONV, write([t(1, "zero_point", 5)]), "ok", ""),
        "tflite_bad_quantized_dimension": (
            DW,
            write([_dw_qdim(7)]),
            "refused",
            "dimension 7",
        ),
        "tflite_missing_bias": (
            CONV,
            write([(op_field(conv, "op_input", 2), -1)]),
            "refused",
            "bias",
        ),
        "tflite_huge_window_options": (
            DIL,
            write([(f, 1 << 20) for f in options[-2:]]),
            "refused",
            "",
        ),
        "tflite_resize_empty_input": (
            RESIZE,
            write([_input_shape(RESIZE, 1, 0)]),
            "refused",
            "cannot resize",
        ),
        "tflite_resize_huge_output": (
            RESIZE_AC,
            write([_op_input_value(RESIZE_AC, 1, 0, 1 << 24)]),
            "refused",
            "resize weights",
        ),
        # found by tools/fuzz.py --seed 12 (raw positions: the shrunk reproducer's edit)
        "tflite_pad_output_without_quantization": (
            "tflite/ops/pad.tflite",
            [("w", 524, "<i", 1)],
            "refused",
            "quantization",
        ),
        "tflite_concat_input_without_quantization": (
            "tflite/ops/concat_same_scale.tflite", [("w", 816, "<I", 0)], "refused", "scale"),
        # found by tools/fuzz.py --seed 2401 --target "npu, llvm" (case 19,229): an int8
        # output without quantization parameters under a fused activation (a bare TypeError)
        "tflite_activation_output_without_quantization": (
            "tflite/ops/concat_diff_scale.tflite", [("w", 1334, "<B", 0)], "refused",
            "no quantization parameters"),
        # found by tools/fuzz.py --seed 2501 --target "npu, llvm -isa=plain -threads=2" (case
        # 28,310): an 8-bit SUM over 41,943,040 values (a grown dimension) overflowed int32 in
        # the frontend (a bare OverflowError); TFLite's int32 accumulator cannot hold that sum
        "tflite_sum_past_int32": (
            "tflite/ops/sum_hw_tall.tflite", [("w", 808, "<q", -128), ("w", 840, "<i", 1048576)],
            "refused", "can pass int32"),
        # found by tools/fuzz.py --seed 1313 --target "npu, llvm" (case 73,402): an int8 zero
        # point of 256 reached the NPU's RSQRT table and overflowed there
        # the same campaign (case 95,765): a denormal input scale made RSQRT's rescale 1 / 0
        "tflite_rsqrt_denormal_scale": (
            "tflite/ops/rsqrt.tflite", [("w", 560, "<f", 1e-45)], "refused", "qnn.rsqrt"),
        "tflite_int8_zero_point_out_of_range": (
            "tflite/ops/rsqrt.tflite",
            [("w", 680, "<q", 256)],
            "refused",
            "outside its type's range",
        ),
        "tflite_pool_padded_input": (
            POOL,
            write([(op_field(pool, "option", 1), 1 << 24)]),
            "refused",
            "",
        ),
    }


def _input_shape(seed: str, axis: int, value: int):
    """Dimension ``axis`` of the first operator's first input."""
    data = (OPS / seed).read_bytes()
    tensor = int(_op(data).Inputs(0))
    return tensor_field(data, tensor, "shape", axis), value


def _op_input_value(seed: str, input_index: int, element: int, value: int):
    """Element ``element`` of the constant int32 buffer that feeds input ``input_index`` of the
    first operator (RESIZE's size operand)."""
    import tflite

    data = (OPS / seed).read_bytes()
    model = tflite.Model.GetRootAsModel(data, 0)
    tensor = model.Subgraphs(0).Tensors(int(_op(data).Inputs(input_index)))
    tab = model.Buffers(tensor.Buffer())._tab
    start = tab.Vector(tab.Offset(4))
    return ("buffer", start + 4 * element, "<i"), value


def _dw_qdim(value):
    import tflite

    data = (OPS / DW).read_bytes()
    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    for i in range(graph.TensorsLength()):
        for f in fm._tensor_fields(graph.Tensors(i)):
            if f[0] == "quantized_dimension":
                return f, value
    raise LookupError(f"{DW} has no tensor with a quantized_dimension field")


def _op(data):
    import tflite

    return tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).Operators(0)


def onnx_cases() -> dict:
    import onnx

    conv = onnx.load(OPS / "onnx/ops/conv.onnx")
    qdq = onnx.load(OPS / "onnx/ops/conv.qdq_s8s8_pc.onnx")
    dq = next(i for i, n in enumerate(qdq.graph.node) if n.op_type == "DequantizeLinear")
    q = next(i for i, n in enumerate(qdq.graph.node) if n.op_type == "QuantizeLinear")
    pad = onnx.load(OPS / "onnx/ops/pad.onnx")
    pads_init = next(i for i, t in enumerate(pad.graph.initializer) if t.data_type == 7)
    return (
        {
            "onnx_conv_pads_2_31": (
                "onnx/ops/conv.onnx",
                [("attr", 0, "pads", 0, 1 << 31)],
                "refused",
                "",
            ),
            "onnx_conv_pads_2_40": (
                "onnx/ops/conv.onnx",
                [("attr", 0, "pads", 2, 1 << 40)],
                "refused",
                "",
            ),
            "onnx_pad_2_20": (
                "onnx/ops/pad.onnx",
                [("zero_point", pads_init, 1 << 20)],
                "refused",
                "",
            ),
            "onnx_dequantize_without_outputs": (
                "onnx/ops/conv.qdq_s8s8_pc.onnx",
                [("drop_outputs", dq)],
                "refused",
                "output",
            ),
            "onnx_quantize_without_outputs": (
                "onnx/ops/conv.qdq_s8s8_pc.onnx",
                [("drop_outputs", q)],
                "refused",
                "output",
            ),
            "onnx_input_dim_2_40": (
                "onnx/ops/conv.onnx",
                [("input_dim", 0, 2, 1 << 40)],
                "refused",
                "memory budget",
            ),
            "onnx_unsqueeze_float_axes": (
                "onnx/ops/tensor_ops.onnx",
                [("op_type", 6, "Unsqueeze")],
                "refused",
                "integers",
            ),
            "onnx_npu_conv_batch_3": (
                "onnx/ops/conv.qop_u8s8_pc.onnx",
                [("input_dim", 0, 0, 3)],
                "ok",
                "",
            ),
        }
        if conv is not None
        else {}
    )


def main() -> int:
    OUT.mkdir(exist_ok=True)
    index = {}
    for name, (seed, edits, expect, text) in {**tflite_cases(), **onnx_cases()}.items():
        data = (OPS / seed).read_bytes()
        fmt = "tflite" if seed.endswith(".tflite") else "onnx"
        mutant = fm.apply_tflite(data, edits) if fmt == "tflite" else fm.apply_onnx(data, edits)
        (OUT / f"{name}.{fmt}").write_bytes(mutant)
        index[f"{name}.{fmt}"] = {
            "seed": f"tests/models/{seed}",
            "edits": [list(e) for e in edits],
            "expect": expect,
            "expect_text": text,
        }
    (OUT / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {len(index)} reproducers to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
