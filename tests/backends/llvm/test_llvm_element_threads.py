"""QUANT, LUT and TRANSPOSE over two threads (runtime/threads.py split_chunks; emit/int8/scalar.py
``elements`` and ``first_axis``): the flat indices (TRANSPOSE: its first axis longer than 1) in
chunks the driver's thread and its worker claim one at a time. Both drivers (with the worker
and without it) give the bits of -threads=1 and of the interpreter; small kernels stay on one
thread."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import pool_data
from partita.backends.llvm.emit.int8 import scalar
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay
from partita.ir import Constant, TensorType, Var
from partita.ir.op import get_op


def _module(shape, axis, dtype, semantics):
    x = Var("x", TensorType(shape, "float32"))
    c = shape[axis] if axis is not None else 1
    scale = Constant(np.linspace(0.02, 0.09, c).astype(np.float32).reshape(-1)[:c]
                     if c > 1 else np.float32(0.05))
    zp0 = 0 if dtype == "int8" else 128
    zp = Constant((np.arange(c, dtype=np.int32) % 9 - 4 + zp0) if c > 1 else np.int32(zp0 + 3))
    q = get_op("qnn.quantize")(x, scale, zp, axis=axis if axis is not None else -1,
                               out_dtype=dtype, semantics=semantics)
    lo, hi = (-50.0, 60.0) if dtype == "int8" else (20.0, 200.0)
    out = get_op("clip")(q, a_min=lo, a_max=hi)
    return P.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))


CASES = [((1, 64, 40, 41), 1, "int8", "onnx"),  # per channel, 104,960 elements: 7 chunks
         ((1, 33, 45, 47), None, "uint8", "tflite")]  # per tensor, a short last chunk


@pytest.mark.parametrize("isa", ["plain", "avx2"])
def test_two_threads_split_quant_and_lut_and_keep_the_bits(isa, monkeypatch, tmp_path):
    if isa == "avx2" and host_isa() == "plain":
        pytest.skip("avx2 code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # emitted afresh: the patch below counts
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    splits = []
    real = scalar.ScalarKernels.elements
    monkeypatch.setattr(scalar.ScalarKernels, "elements", lambda self, k, *a: splits.append(
        (k.kind, k.params.get("threads", 1))) or real(self, k, *a))
    rng = np.random.default_rng(7)
    for shape, axis, dtype, semantics in CASES:
        mod = _module(shape, axis, dtype, semantics)
        kinds = {k.kind: k.params.get("threads", 1)
                 for k in lower(mod["main"], host_isa(), threads=2).kernels}
        assert kinds == {"QUANT": 2, "LUT": 2}
        data = (rng.standard_normal(shape) * 6).astype(np.float32)
        data.flat[::401] = np.nan
        data.flat[1::401] = 1e30
        data.flat[2::401] = 0.025  # ties
        want = P.interpret(mod, [data])[0]
        one = P.build(mod, f"llvm -isa={isa} -threads=1").run(data)[0]
        assert one.tobytes() == want.tobytes()
        before = splits.count(("QUANT", 2)) + splits.count(("LUT", 2))
        exe = P.build(mod, f"llvm -isa={isa} -threads=2")
        assert splits.count(("QUANT", 2)) + splits.count(("LUT", 2)) >= before + 2
        regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
        assert regions and all(r._alone is not None for r in regions)
        for r in regions:
            turns = iter(["pool", "alone"] * 4)
            r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
        for _ in range(8):
            assert exe.run(data)[0].tobytes() == want.tobytes()
        assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())


def test_small_element_kernels_stay_on_one_thread():
    mod = _module((1, 16, 20, 20), 1, "int8", "onnx")
    assert all(k.params.get("threads", 1) == 1
               for k in lower(mod["main"], host_isa(), threads=2).kernels)


def _forced_both(exe, data, want) -> None:
    """Both drivers of every split region, alternating, each run equal to ``want``."""
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions and all(r._alone is not None for r in regions)
    for r in regions:
        turns = iter(["pool", "alone"] * 3)
        r.modes.choose = lambda turns=turns: next(turns)
    for _ in range(6):
        assert exe.run(data)[0].tobytes() == want.tobytes()


def _first_axis_calls(monkeypatch, tmp_path) -> list:
    """(kind, threads) of each kernel emitted through scalar.py ``first_axis`` from here on,
    built afresh (no cached regions or objects) in one process."""
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    firsts = []
    real = scalar.ScalarKernels.first_axis
    monkeypatch.setattr(scalar.ScalarKernels, "first_axis", lambda self, k, *a: firsts.append(
        (k.kind, k.params.get("threads", 1))) or real(self, k, *a))
    return firsts


def test_two_threads_split_transpose(monkeypatch, tmp_path):
    """TRANSPOSE (the first axis longer than 1) in chunks (scalar.py first_axis): the bits of
    -threads=1 and of the interpreter; a small one stays on one thread."""
    firsts = _first_axis_calls(monkeypatch, tmp_path)
    rng = np.random.default_rng(2)
    x = Var("x", TensorType((1, 3, 61, 400), "int8"))  # 73,200 elements: split
    mod = P.InferType()(relay.IRModule.from_expr(
        relay.Function([x], get_op("transpose")(x, axes=[0, 2, 3, 1]))))
    assert [k.params.get("threads", 1) for k in
            lower(mod["main"], host_isa(), threads=2).kernels] == [2]
    data = rng.integers(-128, 128, (1, 3, 61, 400), dtype=np.int8)
    want = P.interpret(mod, [data])[0]
    assert P.build(mod, "llvm -threads=1").run(data)[0].tobytes() == want.tobytes()
    _forced_both(P.build(mod, "llvm -threads=2"), data, want)
    assert ("TRANSPOSE", 2) in firsts
    small = P.InferType()(relay.IRModule.from_expr(relay.Function(
        [y := Var("y", TensorType((1, 3, 20, 40), "int8"))],
        get_op("transpose")(y, axes=[0, 2, 3, 1]))))
    assert [k.params.get("threads", 1) for k in
            lower(small["main"], host_isa(), threads=2).kernels] == [1]


def test_two_threads_split_im2col_rows(monkeypatch, tmp_path):
    """The int8 IM2COL of a 3-channel convolution (ORT's u8s8 pairs, im2col order) in chunks
    of window rows (scalar.py first_axis): the bits of -threads=1 and of the interpreter."""
    from pathlib import Path

    from partita.backends.llvm.lower import mac
    from partita.frontends import from_onnx

    monkeypatch.setattr(mac, "SPLIT_COPY", 1 << 12)  # 48 x 48 x 27 = 62,208 bytes: split here
    firsts = _first_axis_calls(monkeypatch, tmp_path)
    nets = Path(__file__).resolve().parents[2] / "models" / "onnx" / "nets"
    # ORT's AVX2 kernels forced: on a VNNI host the default import sums exactly, no IM2COL
    mod = from_onnx(nets / "mobilenet_v1_025_96.qop_u8s8_pc.onnx", ort_cpu="avx2")
    rng = np.random.default_rng(4)
    image = rng.standard_normal((1, 3, 96, 96)).astype(np.float32)
    want = P.interpret(mod, [image])[0]
    assert P.build(mod, "llvm -threads=1").run(image)[0].tobytes() == want.tobytes()
    exe = P.build(mod, "llvm -threads=2")
    assert ("IM2COL", 2) in firsts
    _forced_both(exe, image, want)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
def test_two_threads_split_max_pool_rows(dtype, monkeypatch, tmp_path):
    """MAXPOOL (ResNet's 3 x 3 / 2 after its first convolution) in chunks of output rows
    (scalar.py first_axis): the bits of -threads=1 and of the interpreter, nan and signed
    zeros included (numpy's max: nan wins, of equal taps the later); a small one stays on one
    thread."""
    firsts = _first_axis_calls(monkeypatch, tmp_path)

    def pool(shape):
        x = Var("x", TensorType(shape, dtype))
        out = get_op("nn.max_pool2d")(x, pool_size=(3, 3), strides=(2, 2),
                                      padding=(1, 1, 1, 1), layout="NHWC")
        return P.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))

    shape = (1, 67, 66, 33)  # out 34 x 33 x 33 = 37,026 elements: split; odd rows and channels
    mod = pool(shape)
    assert [k.params.get("threads", 1) for k in
            lower(mod["main"], host_isa(), threads=2).kernels] == [2]
    data = pool_data(np.random.default_rng(5), shape, dtype, 97, 13)
    want = P.interpret(mod, [data])[0]
    one = P.build(mod, "llvm -threads=1").run(data)[0]
    assert one.tobytes() == want.tobytes()
    exe = P.build(mod, "llvm -threads=2")
    assert ("MAXPOOL", 2) in firsts
    _forced_both(exe, data, want)
    small = pool((1, 20, 20, 16))
    assert [k.params.get("threads", 1) for k in
            lower(small["main"], host_isa(), threads=2).kernels] == [1]
