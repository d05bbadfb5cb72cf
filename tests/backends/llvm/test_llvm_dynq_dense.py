"""DYNQ_DENSE (dynamic quantization's int32 product, emit/int8/dynq_dense.py): the vector kernel
equals the interpreter bit for bit for every accumulation ONNX Runtime's x86 kernels have (exact
sums, and VPMADDUBSW's int16 pair saturation), on -isa=plain (generic vector IR) and -isa=avx2
(the intrinsics; any x86-64 CPU with AVX2), one and two threads, shapes off the register tile."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import llvm_target
from partita.backends.llvm.host_cpu import lacking

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var, get_op

ISAS = ["plain"] + ([] if lacking(["avx2"]) else ["avx2"])


def dense_module(m, k, n, x_dtype, w_dtype, accumulate, seed, batch=()):
    """qnn.dense(x, W, zx, zw) -> int32 with x and its zero point run-time inputs (as
    DynamicQuantizeLinear's fields are), W and per-unit zw constants."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(w_dtype)
    w = rng.integers(info.min, info.max + 1, (n, k)).astype(w_dtype)
    zw = rng.integers(info.min, info.max + 1, n).astype(w_dtype)
    x = Var("x", TensorType((*batch, m, k), x_dtype))
    zx = Var("zx", TensorType((), "int32"))
    body = get_op("qnn.dense")(
        x, Constant(w), zx, Constant(zw.astype(np.int32)), Constant(np.float32(0.5)),
        Constant(np.full(n, 0.25, np.float32)), units=n, out_dtype="int32",
        accumulate=accumulate,
    )
    return P.InferType()(IRModule({"main": Function([x, zx], body)}))


def inputs(m, k, x_dtype, seed, batch=()):
    rng = np.random.default_rng(seed + 1)
    info = np.iinfo(x_dtype)
    x = rng.integers(info.min, info.max + 1, (*batch, m, k)).astype(x_dtype)
    if seed % 3 == 0:  # the extremes, where pairs saturate most
        x = np.where(rng.random(x.shape) < 0.5, info.max, info.min).astype(x_dtype)
    zx = np.array(rng.integers(info.min, info.max + 1), np.int32)
    return [x, zx]


def check(mod, target, xs):
    exe = P.build(mod, target)
    assert "DYNQ_DENSE" in " ".join(exe.steps[0].region.kernels)
    got = exe.run(*xs)
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = P.interpret(mod, xs)[0]
    assert got.dtype == np.int32 and got.tobytes() == want.tobytes()
    return got


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 7), k=st.integers(1, 97), n=st.integers(1, 11),
    x_dtype=st.sampled_from(["uint8", "int8"]), w_dtype=st.sampled_from(["int8", "uint8"]),
    pairs=st.booleans(), isa=st.sampled_from(ISAS), threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 1000),
)  # fmt: skip
def test_dynq_dense_equals_the_interpreter(m, k, n, x_dtype, w_dtype, pairs, isa, threads, seed):
    if pairs:
        w_dtype = "int8"  # VPMADDUBSW's operands (qnn.dense refuses uint8 weights there)
    mod = dense_module(m, k, n, x_dtype, w_dtype, "vpmaddubsw" if pairs else "exact", seed)
    check(mod, f"llvm -isa={isa} -threads={threads}", inputs(m, k, x_dtype, seed))


@pytest.mark.parametrize("isa", ISAS)
def test_dynq_dense_pairs_saturate_and_two_threads_split(isa):
    """A BERT-like product large enough to split over two threads: the saturating form differs
    from the exact one on these extreme values, and each equals the interpreter."""
    m, k, n = 9, 200, 70
    xs = inputs(m, k, "uint8", 3, batch=(2,))
    outs = []
    for acc in ("vpmaddubsw", "exact"):
        mod = dense_module(m, k, n, "uint8", "int8", acc, 3, batch=(2,))
        outs.append(check(mod, f"llvm -isa={isa} -threads=2", xs))
    assert not np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("isa", ["plain", "vnni"])
@pytest.mark.parametrize("shape", [(1,), (7,), (8,), (9,), (3, 17), (2, 64), (300,), (3, 111)])
@pytest.mark.parametrize("data", ["normal", "positive", "negative", "zeros", "last_min"])
def test_dynamic_quantize_range_scan_in_lanes(shape, data, isa):
    """DYNQ's range in four vectors of 8 float lanes (16 on -isa=vnni: -emulate=yes where the
    CPU lacks AVX-512) then the tail: DynamicQuantizeLinear's three fields equal the
    interpreter's for sizes around the lane and step counts, one-signed data, -0.0 everywhere
    and the extreme in the tail."""

    from partita.ir import Function, IRModule, TensorType, Var, get_op

    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x = {"positive": np.abs(x), "negative": -np.abs(x), "zeros": np.full(shape, -0.0, np.float32),
         "normal": x}.get(data, x)
    if data == "last_min":
        x.ravel()[-1] = -50.0
    v = Var("x", TensorType(shape, "float32"))
    mod = P.InferType()(IRModule({"main": Function([v], get_op("qnn.dynamic_quantize")(v))}))
    from partita.backends.llvm.lower.context import lower

    lanes = {k.params.get("lanes", 8) for k in lower(mod["main"], isa).kernels
             if k.params["field"] == "range"}  # the one kernel that scans
    assert lanes == {16 if isa == "vnni" else 8}
    got, want = P.build(mod, llvm_target(isa)).run(x), P.interpret(mod, [x])
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


@pytest.mark.parametrize(("isa", "intrinsic", "cpu"), [("avxvnni", "vpdpbusd.256", "alderlake"),
                                                       ("vnni", "vpdpbusd.512", "icelake-server")])
@pytest.mark.parametrize("threads", [1, 2])
def test_dynq_dense_vnni_takes_vpdpbusd(isa, intrinsic, cpu, threads, monkeypatch):
    """ORT's VNNI semantics (exact sums, int8 weights) on -isa=avxvnni / vnni: VPDPBUSD in the
    IR (checked on any CPU: elsewhere the region is compiled for a CPU with it); run bit-exact
    with the interpreter, pairs of products past int16 included, on every CPU (-emulate=yes
    stands in for the instruction where this CPU lacks it)."""
    from partita.backends import llvm as llvm_backend
    from partita.backends.llvm.runtime.jit import runs_isa

    texts = []
    real = llvm_backend.compile_parts

    def compile_parts(parts, *args, **kwargs):
        texts.extend(t() for t in parts)
        return real([lambda t=t: t for t in texts[-len(parts):]], *args, **kwargs)

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setattr(llvm_backend, "compile_parts", compile_parts)
    m, k, n = 9, 200, 70
    for x_dtype in ("uint8", "int8"):
        mod = dense_module(m, k, n, x_dtype, "int8", "exact", 3, batch=(2,))
        texts.clear()
        target = f"llvm -isa={isa} -threads={threads}"
        exe = P.build(mod, target if runs_isa(isa) else f"{target} -mcpu={cpu}")
        assert "DYNQ_DENSE" in " ".join(exe.steps[0].region.kernels)
        assert any(f"llvm.x86.avx512.{intrinsic}\"" in t for t in texts)
        # run where this CPU has it, else through exact stand-ins of VPDPBUSD (-emulate=yes)
        check(mod, f"{target} -emulate=yes", inputs(m, k, x_dtype, 3, (2,)))


@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("m", "k", "n", "x_dtype"), [
    (16, 64, 16, "uint8"),  # one 16-row block, one B tile
    (17, 5, 48, "int8"),  # 16-row blocks overlapping; K padded to one 64-byte slice
    (40, 200, 80, "int8"),  # 32-row blocks, the last overlapping; a last single B tile
    (128, 768, 768, "uint8"),  # BERT's projection: chunks of 64 weight rows over two threads
    (15, 64, 112, "int8"),  # fewer than 16 rows (amx: VNNI's register tile); 7 vectors
    (32, 64, 40, "int8"),  # weight rows not in 16s: zmm's reduction form; ymm's tile, 5 vectors
    (9, 96, 36, "uint8"),  # weight rows not in 8s: the reduction form everywhere
])  # fmt: skip
def test_dynq_dense_tiles_equal_the_interpreter(m, k, n, x_dtype, threads, isa):
    """ORT's VNNI semantics on -isa=amx, vnni and avxvnni: TDPBUSD tiles (amx, 16 data rows or
    more, weight rows in 16s) and VNNI's register tile (one output per lane; weight rows in
    vectors of 16 in zmm, 8 in ymm), else the reduction form; bit-exact with the interpreter,
    zero points, extremes, overlapping row blocks and short tiles included, on every x86-64 CPU
    (-emulate=yes where the CPU lacks the instructions)."""
    from partita.backends.llvm.lower.context import lower

    mod = dense_module(m, k, n, x_dtype, "int8", "exact", m + n)
    plan = lower(mod["main"], isa, threads=threads)
    (kernel,) = [kk for kk in plan.kernels if kk.kind == "DYNQ_DENSE"]
    amx = isa == "amx" and m >= 16 and n % 16 == 0
    lanes = 8 if isa == "avxvnni" else 16
    assert kernel.params["isa"] == ("amx" if amx else "avxvnni" if isa == "avxvnni" else "vnni")
    assert kernel.params["tile"] == (0 if amx or n % lanes else lanes)
    for seed in (0, 1):  # seed 0: the extremes only
        check(mod, llvm_target(isa, f" -threads={threads}"), inputs(m, k, x_dtype, 3 * seed))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 70), k=st.integers(1, 300), vectors=st.integers(1, 13),
    x_dtype=st.sampled_from(["uint8", "int8"]), isa=st.sampled_from(["amx", "vnni", "avxvnni"]),
    threads=st.sampled_from([1, 2]), seed=st.integers(0, 1000),
)  # fmt: skip
def test_dynq_dense_tiles_random_shapes(m, k, vectors, x_dtype, isa, threads, seed):
    """The tiles (AMX blocks, VNNI's zmm and ymm register tiles) on random shapes whose weight
    rows fill whole vectors: every row-block overlap, short tile and last group equals the
    interpreter (-emulate=yes where the CPU lacks the instructions)."""
    n = vectors * (8 if isa == "avxvnni" else 16)
    mod = dense_module(m, k, n, x_dtype, "int8", "exact", seed)
    check(mod, llvm_target(isa, f" -threads={threads}"), inputs(m, k, x_dtype, seed))
