"""The drivers' kernels are noinline: LLVM inlined a whole model's kernels into the drivers
and spent 4x the kernels' own optimisation time on the one huge function (the cold compile
of tests/fuzz_corpus/llvm_host's EfficientNet mutants, counted as fuzz hangs)."""

from __future__ import annotations

import re

import numpy as np
from kernel_checks import llvm_target
from test_llvm_pairs_routing import _layer
from test_llvm_plain_no_x86 import _build_capturing

import partita as P

CALL = re.compile(r'call void @"?([\w.]+)"?\(')
HEAD = re.compile(r'^(define|declare) [^@]*@"?([\w.]+)"?\(.*$', re.M)


def test_every_kernel_the_driver_calls_is_noinline(monkeypatch):
    mod = _layer("conv", "exact", "tflite")
    # avx2 code, run through -emulate=yes on a CPU without AVX2
    exe, text = _build_capturing(mod, llvm_target("avx2", " -threads=1"), monkeypatch)
    # the drivers' own module (each part is compiled alone: no inlining across parts)
    (part,) = [t for t in text.split("; ModuleID") if 'define void @"partita_run"(' in t]
    driver = part[part.index('define void @"partita_run"('):]
    driver = driver[: driver.index("\n}")]
    callees = set(CALL.findall(driver))
    heads = {m.group(2): m.group(0) for m in HEAD.finditer(part)}
    assert callees and callees <= set(heads), (callees, set(heads))
    for name in callees:
        assert "noinline" in heads[name].rsplit(")", 1)[1], heads[name]
    data = np.random.default_rng(0).integers(0, 255, exe.input_types[0].shape, dtype=np.uint8)
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])
