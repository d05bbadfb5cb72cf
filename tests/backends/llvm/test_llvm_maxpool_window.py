"""MAXPOOL's large windows (emit/int8/scalar.py UNROLLED_TAPS): a window of more taps than that is
a loop in the IR, not a copy of the tap's code per tap. A fuzzed TFLite model's 65536 x 3 window
(tests/fuzz_corpus/llvm_host/hang_maxpool_window_65536.tflite) made LLVM compile for minutes;
now its build takes a second and its IR does not grow with the window. Large windows equal the
interpreter for int8, uint8 and float32 (nan and signed zeros) at one and two threads. And the
llvm host's other fuzz reproducer of session 25 (a quantize of a constant)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kernel_checks import pool_data
from test_llvm_plain_no_x86 import _build_capturing

import partita as P
from partita import relay
from partita.ir import TensorType, Var, get_op

CORPUS = Path(__file__).resolve().parents[2] / "fuzz_corpus" / "llvm_host"


def _pool(shape, dtype, window):
    x = Var("x", TensorType(shape, dtype))
    out = get_op("nn.max_pool2d")(x, pool_size=window, strides=(1, 1),
                                  padding=(window[0] // 2, window[1] // 2) * 2, layout="NHWC")
    return P.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))


def test_the_fuzzed_65536_wide_window_builds_and_runs(monkeypatch, tmp_path):
    from partita.frontends import from_tflite

    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    mod = from_tflite(str(CORPUS / "hang_maxpool_window_65536.tflite"))
    x = np.random.default_rng(1).integers(-128, 128, (1, 9, 9, 4), dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    for target in ("llvm -isa=plain -threads=2", "npu, llvm"):
        assert np.array_equal(P.build(mod, target).run(x)[0], want)


def test_a_large_windows_ir_does_not_grow_with_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    sizes = []
    for window in ((81, 3), (801, 3)):
        _, text = _build_capturing(_pool((1, 9, 9, 4), "int8", window), "llvm -isa=plain",
                                   monkeypatch)
        sizes.append(len(text))
    assert abs(sizes[1] - sizes[0]) < 64, sizes  # the window's numbers, not its taps


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_windows_equal_the_interpreter(dtype, threads, monkeypatch, tmp_path):
    from partita.backends.llvm.emit.int8 import scalar

    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    shape, window = (1, 70, 40, 17), (9, 11)  # 99 taps, past UNROLLED_TAPS
    assert window[0] * window[1] > scalar.UNROLLED_TAPS
    mod = _pool(shape, dtype, window)
    data = pool_data(np.random.default_rng(3), shape, dtype, 89, 7)
    want = P.interpret(mod, [data])[0]
    exe = P.build(mod, f"llvm -threads={threads}")
    for mode in ("pool", "alone") if threads == 2 else ("alone",):
        for st in exe.steps:
            if getattr(st.region, "modes", None) is not None:
                st.region.modes.choose = lambda mode=mode: mode
        assert exe.run(data)[0].tobytes() == want.tobytes()


def test_llvm_host_reproducers_are_refused_or_run():
    """The llvm host's other fuzz reproducer (tools/fuzz.py --seed 2502 --target "npu, llvm",
    case 5,482): a QuantizeLinear of a constant (no data operand) is refused by name, where the
    lowerings raised IndexError; under "npu, ref" it runs."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
    import fuzz
    from partita.frontends import from_onnx

    from partita.errors import PartitaError

    data = (CORPUS / "indexerror_quantize_of_a_constant.onnx").read_bytes()
    with pytest.raises(PartitaError, match="qnn.quantize"):
        P.build(from_onnx(data), "npu, llvm")
    assert fuzz.check("onnx", data)[0] == "ok"
