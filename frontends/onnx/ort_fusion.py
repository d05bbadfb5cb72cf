"""Which QDQ groups ONNX Runtime's default optimization level leaves unfused (match="ort").

On x86-64 its QDQ fusions (QLinearConv, QLinearAdd, ...) take uint8 activations only: int8
QuantizeLinear -> DequantizeLinear pairs are first rewritten to uint8 (zero point + 128), but
only a pair whose QuantizeLinear feeds one DequantizeLinear feeding one node (a shared
DequantizeLinear is duplicated first, which makes two pairs). An int8 activation that fans out
— the residual tensor of a MobileNetV2 block read by the next block and by the Add — stays
int8, and every group reading or writing it runs as written: DequantizeLinear, the float op in
MLAS's arithmetic, QuantizeLinear (observed on onnxruntime 1.31 with optimized_model_filepath).
"""

from __future__ import annotations

import numpy as np
import onnx

# float ops whose unfused arithmetic partita emulates (partita/ops/mlas.py, numpy's float32)
EMULATED = {"Conv", "Gemm", "MatMul", "GlobalAveragePool", "Add", "Mul", "Sub"}


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    out: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            out.setdefault(name, []).append(node)
    return out


def _int8_zero_point(node: onnx.NodeProto, inits: dict[str, np.ndarray]) -> bool:
    zp = inits.get(node.input[2]) if len(node.input) > 2 else None
    return zp is not None and zp.dtype == np.int8


def _stays_int8(q: onnx.NodeProto, users: dict, outputs: set[str]) -> bool:
    """An int8 QuantizeLinear output that is not one Q -> DQ -> single reader chain (the
    reader may be the graph output)."""
    (out,) = q.output[:1]
    if out in outputs or len(users.get(out, [])) != 1:
        return True
    (dq,) = users[out]
    readers = len(users.get(dq.output[0], [])) + (dq.output[0] in outputs)
    return dq.op_type != "DequantizeLinear" or readers > 1


def ort_unfused_nodes(graph: onnx.GraphProto, inits: dict[str, np.ndarray]) -> set[int]:
    """Indices of the float nodes (EMULATED ops) whose QDQ group ONNX Runtime's default level
    runs unfused because it reads or writes an int8 activation that fans out."""
    users = _consumers(graph)
    outputs = {o.name for o in graph.output}
    int8: set[str] = set()  # the DequantizeLinear outputs and QuantizeLinear inputs concerned
    for q in graph.node:
        if (q.op_type == "QuantizeLinear" and q.domain in ("", "ai.onnx")
                and _int8_zero_point(q, inits) and _stays_int8(q, users, outputs)):
            int8.add(q.input[0])
            int8.update(dq.output[0] for dq in users.get(q.output[0], [])
                        if dq.op_type == "DequantizeLinear")
    return {i for i, node in enumerate(graph.node)
            if node.op_type in EMULATED and node.domain in ("", "ai.onnx")
            and any(name in int8 for name in list(node.input) + list(node.output))}
