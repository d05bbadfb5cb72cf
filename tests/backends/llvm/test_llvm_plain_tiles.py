"""-isa=plain's int16-weight convolution tile follows the host's vector width: 1 vector x 3
pixels where LLVM vectorizes the generic IR at SSE / AVX2 width, 3 x 4 where it has zmm
registers (vector_plan "plain_zmm"). Either tile gives the interpreter's bits; both are forced
here, whatever this CPU has."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.llvm import host_cpu
from partita.backends.llvm.kinds import Kind
from partita.backends.llvm.lower.context import lower

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var, get_op

AVX2 = {"+sse4.2", "+avx", "+avx2", "+fma"}
AVX512 = AVX2 | {"+avx512f", "+avx512bw", "+avx512vl"}


def _conv(oc: int) -> IRModule:
    """A 3x3 int8 convolution, TFLite semantics (exact sums: plain's int16-weight kernel)."""
    rng = np.random.default_rng(oc)
    x = Var("x", TensorType((1, 9, 11, 24), "int8"))
    w = Constant(rng.integers(-127, 128, (3, 3, 24, oc), dtype=np.int8))
    c = lambda v, t="float32": Constant(np.asarray(v, t))  # noqa: E731
    y = get_op("qnn.conv2d")(x, w, c(3, "int32"), c(0, "int32"), c(0.05), c(0.01),
                             padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO",
                             out_dtype="int32")
    y = get_op("qnn.requantize")(y, c(0.0005), c(0, "int32"), c(0.1), c(-2, "int32"),
                                 out_dtype="int8")
    return P.InferType()(IRModule({"main": Function([x], y)}))


@pytest.mark.parametrize("features, tile", [(AVX2, (1, 3)), (AVX512, (3, 4))])
@pytest.mark.parametrize("oc", [16, 48, 80])
def test_plain_tile_follows_the_vector_width(monkeypatch, tmp_path, features, tile, oc):
    monkeypatch.setattr(host_cpu, "host_features", lambda: features)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    mod = _conv(oc)
    (k,) = [k for k in lower(mod["main"], "plain").kernels if k.kind == Kind.VCONV]
    assert k.params["wide"]
    v = min(tile[0], oc // 16)
    want_r = {1: 3}[v] if features is AVX2 else {1: 8, 2: 6, 3: 4}[v]
    assert (k.params["V"], k.params["R"]) == (v, want_r)
    x = np.random.default_rng(1).integers(-128, 128, (1, 9, 11, 24), dtype=np.int8)
    got = P.build(mod, "llvm -isa=plain").run(x)[0]
    assert got.tobytes() == P.interpret(mod, [x])[0].tobytes()
