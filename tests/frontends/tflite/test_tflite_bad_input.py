"""Malformed input: every case is a PartitaError that names the problem (and the tensor or
operator), never a hang, a crash or a bare traceback; plus a seeded mutation fuzz."""

from __future__ import annotations

import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite
from partita.frontends.tflite import (
    TFLiteConversionError,
    TFLiteError,
    TFLiteFormatError,
    UnsupportedOperatorError,
)
from tflbuild import Model, Op, T, build
from tflite_cases import models

from partita.errors import PartitaError


def conv_model(**changes) -> Model:
    """x (1, 5, 5, 2) -> CONV_2D with a constant (3, 3, 3, 2) filter -> y."""
    t = [
        T("x", (1, 5, 5, 2)),
        T("filter", (3, 3, 3, 2), data=np.ones((3, 3, 3, 2), np.float32)),
        T("y", (1, 5, 5, 3)),
    ]
    ops = [Op("CONV_2D", [0, 1], [2], ("Conv2DOptions", {"StrideW": 1, "StrideH": 1}))]
    m = Model(t, ops, [0], [2])
    for k, v in changes.items():
        setattr(m, k, v)
    return m


GOOD = build(conv_model())


def test_the_crafted_model_is_good():
    assert from_tflite(GOOD)["main"].params[0].name_hint == "x"


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "0 bytes is too short"),
        (b"TFL3", "too short"),
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "not a TFLite model: the file identifier"),
        (b"\x08\x00\x00\x00ONNX" + bytes(64), "not a TFLite model"),
    ],
)
def test_not_a_tflite_model(data, message):
    with pytest.raises(TFLiteFormatError, match=message):
        from_tflite(data)


@pytest.mark.parametrize("fraction", [0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_truncated_file(fraction):
    with pytest.raises(TFLiteFormatError):
        from_tflite(GOOD[: int(len(GOOD) * fraction)])


def test_truncated_real_models():
    for path in models("ops")[:10] + models("nets")[:1]:
        data = path.read_bytes()
        for cut in (len(data) // 3, len(data) - 100):
            with pytest.raises(TFLiteFormatError):
                from_tflite(data[:cut])


def test_unsupported_schema_version():
    with pytest.raises(TFLiteFormatError, match="schema version 7"):
        from_tflite(build(conv_model(version=7)))


def test_buffer_size_disagrees_with_declared_shape():
    m = conv_model()
    m.tensors[1].raw = bytes(70)  # the shape (3, 3, 3, 2) float32 needs 216 bytes
    with pytest.raises(
        TFLiteFormatError,
        match=r"tensor #1 'filter'.*needs 216 bytes but "
        r"buffer 1 holds 70",
    ):
        from_tflite(build(m))


@contextmanager
def peak_memory():
    """``with peak_memory() as peak: ...`` then ``peak()``: the most bytes Python and numpy held
    at once inside the block (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = {}
    try:
        yield lambda: result["peak"]
    finally:
        result["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


@pytest.mark.parametrize(
    "shape, message",
    [
        ((1, 2**20, 2**20, 2**20), "absurd shape"),
        ((1, -5, 5, 2), "negative dimension"),
        ((1,) * 12, "rank 12"),
    ],
)
def test_absurd_shapes_are_refused_before_allocating(shape, message):
    m = conv_model()
    m.tensors[0].shape = shape
    data = build(m)
    with peak_memory() as peak:
        with pytest.raises(TFLiteFormatError, match=rf"tensor #0 'x'.*{message}"):
            from_tflite(data)
    assert peak() < 16 << 20  # refused from the declared shape: nothing of its size was allocated


def test_absurd_constant_shape():
    m = conv_model()
    m.tensors[1].shape = (2**16, 2**16, 2**10, 2)
    with pytest.raises(TFLiteFormatError, match="tensor #1 'filter'.*absurd shape"):
        from_tflite(build(m))


def test_tensor_index_out_of_range():
    m = conv_model()
    m.ops[0].inputs = [0, 9]
    with pytest.raises(TFLiteFormatError, match="operator #0 CONV_2D refer to tensor 9"):
        from_tflite(build(m))


def test_operator_reads_a_tensor_nobody_writes():
    t = conv_model().tensors + [T("ghost", (1, 5, 5, 2))]
    m = conv_model(tensors=t)
    m.ops[0].inputs = [3, 1]
    with pytest.raises(
        TFLiteConversionError, match=r"#0 CONV_2D.*reads tensor #3 'ghost'.*neither a model input"
    ):
        from_tflite(build(m))


def test_declared_output_shape_disagrees():
    m = conv_model()
    m.tensors[2].shape = (1, 5, 5, 4)
    with pytest.raises(
        TFLiteConversionError,
        match=r"#0 CONV_2D: the model declares tensor "
        r"#2 'y' \[1, 5, 5, 4\].*\[1, 5, 5, 3\]",
    ):
        from_tflite(build(m))


def test_options_of_the_wrong_type():
    m = conv_model()
    m.ops[0].options = ("Pool2DOptions", {"StrideW": 1})
    with pytest.raises(TFLiteFormatError, match="Pool2DOptions, expected Conv2DOptions"):
        from_tflite(build(m))


def test_output_never_computed():
    m = conv_model(outputs=[2], ops=[])
    with pytest.raises(TFLiteFormatError, match="model output tensor #2 'y'.*never computed"):
        from_tflite(build(m))


def test_bad_per_channel_quantization():
    m = conv_model()
    m.tensors[1].scale, m.tensors[1].zp = [0.1, 0.2], [0, 0]
    with pytest.raises(TFLiteFormatError, match="2 per-channel scales along dimension 0"):
        from_tflite(build(m))


def test_bad_arguments():
    with pytest.raises(TFLiteError, match="semantics"):
        from_tflite(GOOD, semantics="tflite_ref")
    with pytest.raises(TFLiteError, match="cannot read"):
        from_tflite("/nonexistent/model.tflite")
    with pytest.raises(TFLiteError, match="path or bytes"):
        from_tflite(42)
    with pytest.raises(TFLiteError, match="not inputs of the model"):
        from_tflite(GOOD, input_shapes={"nope": (1, 5, 5, 2)})
    with pytest.raises(TFLiteError, match="changes a static dimension"):
        from_tflite(GOOD, input_shapes={"x": (2, 5, 5, 2)})


def test_errors_are_partita_errors():
    assert issubclass(TFLiteError, PartitaError)


def _mutants(data: bytes, rng: np.random.Generator, n: int):
    for _ in range(n):
        d = bytearray(data)
        for _ in range(rng.integers(1, 9)):
            pos = int(rng.integers(0, len(d)))
            kind = rng.integers(0, 3)
            if kind == 0:
                d[pos] ^= 1 << int(rng.integers(0, 8))
            elif kind == 1:
                d[pos] = int(rng.integers(0, 256))
            else:
                d[pos : pos + 4] = rng.integers(0, 256, 4, dtype=np.uint8).tobytes()
        yield bytes(d)


@pytest.mark.slow
def test_mutation_fuzz_raises_only_partita_errors():
    """Seeded byte flips of real models (3000 cases): conversion succeeds or raises a
    PartitaError, and no case allocates more than 512 MB on the way."""
    paths = models("ops")[:24] + [p for p in models("nets") if "v1" in p.stem]
    datas = [p.read_bytes() for p in paths] or [GOOD]
    rng = np.random.default_rng(1234)
    worst = 0
    for k in range(3000):
        data = datas[k % len(datas)]
        mutant = next(_mutants(data, rng, 1))
        with peak_memory() as peak:
            try:
                from_tflite(mutant)
            except PartitaError:
                pass
        worst = max(worst, peak())
    assert worst < 512 << 20


_TFLITE_RUNNER = """
import sys, numpy as np
from pathlib import Path
from ai_edge_litert.interpreter import Interpreter
folder = Path(sys.argv[1])
x = np.load(folder / "x.npy")
for path in sorted(folder.glob("m*.tflite")):
    out = folder / (path.stem + ".npy")
    try:
        it = Interpreter(model_path=str(path))
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        np.save(out, it.get_tensor(it.get_output_details()[0]["index"]))
    except Exception:
        out.with_suffix(".refused").write_text("")
"""


def _tflite_outputs(mutants: dict, x, folder: Path) -> dict:
    """TFLite's output for each mutant (its own interpreter, in a child process: a corrupt
    model may crash it), or None where TFLite refuses the model."""
    import subprocess
    import sys

    np.save(folder / "x.npy", x)
    for i, data in mutants.items():
        (folder / f"m{i:04d}.tflite").write_bytes(data)
    todo = dict(mutants)
    while todo:
        subprocess.run([sys.executable, "-c", _TFLITE_RUNNER, str(folder)], check=False,
                       capture_output=True, timeout=600)
        done = {i for i in todo if (folder / f"m{i:04d}.npy").exists()
                or (folder / f"m{i:04d}.refused").exists()}
        if not done:  # the first one left crashed TFLite: count it as refused
            first = min(todo)
            (folder / f"m{first:04d}.refused").write_text("crashed")
            done = {first}
        for i in done:
            (folder / f"m{i:04d}.tflite").unlink()
            todo.pop(i)
    return {i: (np.load(folder / f"m{i:04d}.npy") if (folder / f"m{i:04d}.npy").exists()
                else None) for i in mutants}


def test_mutation_fuzz_smoke(tmp_path):
    """A few hundred mutants of the crafted model, in the fast suite: each is refused with a
    PartitaError, or accepted and then computes what TFLite's interpreter computes on the same
    bytes (where TFLite runs it), within float32 rounding."""
    import partita as P

    t = [
        T("x", (1, 5, 5, 2)),
        T("filter", (3, 3, 3, 2),
          data=np.linspace(-1, 1, 54, dtype=np.float32).reshape(3, 3, 3, 2)),
        T("bias", (3,), data=np.array([0.5, -0.25, 0.125], np.float32)),
        T("y", (1, 5, 5, 3)),
    ]
    ops = [Op("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {"StrideW": 1, "StrideH": 1}))]
    good = build(Model(t, ops, [0], [3]))  # with a bias: TFLite's CONV_2D wants one
    rng = np.random.default_rng(99)
    x = np.random.default_rng(7).standard_normal((1, 5, 5, 2)).astype(np.float32)
    accepted, ours = {}, {}
    for i, mutant in enumerate(_mutants(good, rng, 300)):
        try:
            mod = from_tflite(mutant)
        except PartitaError:
            continue
        accepted[i] = mutant
        try:
            ours[i] = np.asarray(P.interpret(mod, [x])[0])
        except PartitaError:
            ours[i] = None  # accepted by the frontend, refused when run: a clear error too
    assert accepted  # weight flips keep a model valid: the comparison below is exercised
    theirs = _tflite_outputs(accepted, x, tmp_path)
    compared = 0
    for i in accepted:
        if theirs[i] is None or ours[i] is None:
            continue
        assert ours[i].shape == theirs[i].shape, i
        want = theirs[i].astype(np.float64)
        scale = np.nanmax(np.abs(want[np.isfinite(want)]), initial=1.0)
        np.testing.assert_allclose(ours[i], theirs[i], rtol=1e-5, atol=1e-5 * scale,
                                   equal_nan=True, err_msg=f"mutant {i}")
        compared += 1
    assert compared


def test_every_unsupported_operator_is_counted_also_in_a_chain(tmp_path):
    """All 30 operators of the MobileNet turned into FLOOR (no converter): 30 are reported, not
    the first."""
    import tflite

    data = bytearray(
        (
            Path(__file__).resolve().parents[2] / "models/tflite/nets/mobilenet_v1_025_128.tflite"
        ).read_bytes()
    )
    model = tflite.Model.GetRootAsModel(data, 0)
    for i in range(model.OperatorCodesLength()):
        tab = model.OperatorCodes(i)._tab
        for slot, width in ((4, 1), (10, 4)):  # deprecated_builtin_code, builtin_code
            if tab.Offset(slot):
                pos = tab.Pos + tab.Offset(slot)
                data[pos : pos + width] = (8).to_bytes(width, "little")  # FLOOR
    path = tmp_path / "floor.tflite"
    path.write_bytes(bytes(data))
    with pytest.raises(
        UnsupportedOperatorError, match=r"has 30 unsupported operators \(30 FLOOR\)"
    ):
        from_tflite(str(path))


@pytest.mark.parametrize(
    "scale, error", [(1e-45, None), (-0.0, "it must be positive"), (0.0, "it must be positive")]
)
def test_tiny_zero_and_negative_scales_of_fused_activation_outputs(scale, error):
    """A fused RELU6's bounds are round(6 / scale): a tiny scale overflows float32 (saturated, as
    TFLite's clamp does); a zero or negative one is refused with TFLite's reason."""
    import struct

    import tflite

    net = Path(__file__).resolve().parents[2] / "models/tflite/nets/mobilenet_v1_025_128.tflite"
    data = bytearray(net.read_bytes())
    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    out = graph.Tensors(graph.Operators(0).Outputs(0))  # the first CONV_2D, fused RELU6
    tab = out.Quantization()._tab
    start = tab.Vector(tab.Offset(8))  # QuantizationParameters.scale
    data[start : start + 4] = struct.pack("<f", scale)
    if error is None:
        mod = from_tflite(bytes(data))
        assert mod["main"].body.checked_type.dtype == "int8"
    else:
        with pytest.raises(TFLiteError, match=error):
            from_tflite(bytes(data))
