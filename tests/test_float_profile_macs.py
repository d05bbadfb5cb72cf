"""benchmarks/float_profile.py reads ONNX Runtime's own profile: the multiply-adds it gives each
QLinearConv (whose prepacked weight ORT leaves out of the profiled shapes: it comes from the
model) equal the model's, counted from its weights and its inferred output shapes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "onnx" / "nets" / "mobilenet_v2_035_96.qop_u8s8_pc.onnx"


def _float_profile():
    spec = importlib.util.spec_from_file_location("float_profile",
                                                  ROOT / "benchmarks" / "float_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_qlinearconv_macs_from_onnx_runtime_profile(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    model = onnx.load(str(MODEL))
    weights = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    convs = [n for n in model.graph.node if n.op_type == "QLinearConv"]
    assert convs
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "prof")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(MODEL), options, providers=["CPUExecutionProvider"])
    feed = {i.name: np.zeros(i.shape, np.float32) for i in session.get_inputs()}
    session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    fp = _float_profile()
    known = fp.conv_weight_shapes(MODEL)
    seen = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("args", {}).get("op_name") == "QLinearConv":
            seen[e["name"].removesuffix("_kernel_time")] = fp.node_macs(
                "QLinearConv", e["args"], known, e["name"].removesuffix("_kernel_time"))
    assert len(seen) == len(convs)
    inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in inferred}
    shapes.update({v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                   for v in model.graph.output})
    checked = 0
    for node in convs:
        w = weights[node.input[3]]
        per_output = int(np.prod(w)) // w[0]
        macs = seen[node.name]
        assert macs is not None and macs % per_output == 0, node.name
        if node.output[0] in shapes:  # onnx infers no shape past a com.microsoft QLinearAdd
            assert macs == int(np.prod(shapes[node.output[0]])) * per_output, node.name
            checked += 1
    assert checked >= 5
