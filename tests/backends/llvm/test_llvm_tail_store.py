"""A convolution's last channel vector with one live lane (OC % 16 == 1) stores one byte per
pixel and nothing past it. LLVM 22's x86 back end turns a one-lane masked store of a truncated
<16 x i32> into a 4-byte store on AVX-512 targets; vconv.vstore stores that lane as a byte.
Checked with guard bytes after every buffer of the NPU's native engine (exact-size numpy
buffers, where three stray bytes corrupted the heap) and against the interpreter through the llvm
host, on every tier (forced; -emulate=yes stands in where this CPU lacks one)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from partita.backends.npu import native

import partita as P

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "npu"))
from test_npu_native import conv_graph, npu_program, random_inputs  # noqa: E402

GUARD = 64


class Guarded(native.NativeProgram):
    """Every buffer followed by GUARD bytes of 0xA5."""

    def _state(self):
        state = getattr(self._local, "state", None)
        if state is None:
            self.raw, arrays = [], []
            for shape, dtype in self.plan.buffers:
                size = int(np.prod(shape)) * np.dtype(dtype).itemsize
                raw = np.full(size + GUARD, 0xA5, np.uint8)
                self.raw.append((raw, size))
                arrays.append(raw[:size].view(dtype).reshape(shape))
            pointers = [a.ctypes.data for a in arrays] + [c.ctypes.data for c in self._consts]
            calls = [(fn, [pointers[i] for i in args]) for fn, args in self._calls]
            state = self._local.state = (arrays, calls)
        return state


@pytest.mark.parametrize("isa", ["plain", "avx2", "vnni", "amx"])
@pytest.mark.parametrize("cout", [1, 17, 33])
@pytest.mark.parametrize("depthwise", [False, True])
def test_a_one_lane_tail_writes_nothing_past_its_byte(monkeypatch, isa, cout, depthwise):
    monkeypatch.setenv("PARTITA_LLVM_EMULATE", "yes")  # a tier this CPU lacks: stand-ins
    cin = cout if depthwise else 8
    mod = conv_graph(6, 5, cin, cout, 3, 1, 1, 1, depthwise, False, kernel_seed=11,
                     semantics="tflite")
    program = npu_program(P.build(mod, "npu -config=u65-256, ref"))
    engine = Guarded(program, isa)
    xs = random_inputs(program, 3)
    got = engine.run(xs)
    for raw, size in engine.raw:
        assert (raw[size:] == 0xA5).all(), f"{isa}: bytes written past a buffer's end"
    x = xs[0]
    want = P.interpret(mod, [x])[0]
    assert got[0].tobytes() == want.tobytes()
    for threads in (1, 2):
        exe = P.build(mod, f"llvm -isa={isa} -threads={threads}")
        assert exe.run(x)[0].tobytes() == want.tobytes(), (isa, threads)
