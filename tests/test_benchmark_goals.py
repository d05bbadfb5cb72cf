"""benchmarks/cpu.py's goal summary: a run's medians against issue 28's goals (two threads over
one, -isa=plain over the best tier, the best tier over each peer), and which ONNX models count
as statically quantized (their goals are the int8 ones)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_cpu", ROOT / "benchmarks" / "cpu.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)


def _runs(times):
    runs = [(tier, f"partita -isa={tier}" + (f" -threads={t}" if t > 1 else ""), t, None)
            for tier, t in times]
    return runs, [times[k] for k in times]


def test_the_summary_judges_the_fastest_tier_and_every_pair():
    runs, ours = _runs({("plain", 1): 5.0, ("plain", 2): 2.9, ("amx", 1): 2.0, ("amx", 2): 1.3,
                        ("vnni", 1): 2.4, ("vnni", 2): 1.4})
    runs.append(("amx", "partita -isa=amx semantics=tflite_builtin", 1, None))
    ours.append(1.0)  # another import's build: not a tier's figure
    peers = [("TFLite + XNNPACK", 1, None), ("TFLite + XNNPACK", 2, None), ("OpenVINO", 1, None)]
    lines = cpu.goal_summary(runs, ours, peers, [4.0, 1.5, 2.0], quantized=True)
    text = "\n".join(lines)
    assert "best tier amx" in text
    assert "amx 0.65 (not met: <= 0.6)" in text and "plain 0.58 (met: <= 0.6)" in text
    assert "1 thread(s) 2.50x (met: <= 2.5x)" in text and "2 thread(s) 2.23x (met" in text
    assert "amx against TFLite + XNNPACK, 1 thread(s): 0.50 (met: <= 0.8)" in text
    assert "amx against TFLite + XNNPACK, 2 thread(s): 0.87 (not met: <= 0.8)" in text
    assert "amx against OpenVINO, 1 thread(s): 1.00 (met: <= 1.0)" in text


def test_float_models_are_judged_against_onnx_runtime_at_parity():
    runs, ours = _runs({("amx", 1): 60.0, ("amx", 2): 33.0})
    peers = [("ONNX Runtime", 1, None), ("ONNX Runtime", 2, None)]
    text = "\n".join(cpu.goal_summary(runs, ours, peers, [59.0, 34.0], quantized=False))
    assert "ONNX Runtime, 1 thread(s): 1.02 (not met: <= 1.0)" in text
    assert "ONNX Runtime, 2 thread(s): 0.97 (met: <= 1.0)" in text
    assert "plain" not in text  # no plain tier in the run: no plain line


def test_onnx_models_count_as_int8_by_their_nodes():
    nets = ROOT / "tests" / "models" / "onnx" / "nets"
    assert cpu._quantized(nets / "mobilenet_v2_035_96.qop_u8s8_pc.onnx")
    assert cpu._quantized(nets / "mobilenet_v2_035_96.qdq_s8s8_pc.onnx")
    assert not cpu._quantized(nets / "mobilenet_v2_035_96.onnx")  # the float model
    # dynamic int8 (BERT's ORT form) has the float models' goal, ONNX Runtime's 1.0x
    assert not cpu._quantized(ROOT / "tests" / "models" / "transformers" /
                              "bert_tiny.dyn_int8.onnx")
