"""The SRAM plan: whole-program liveness and cascading on an NPU without off-chip memory for
feature maps (U55); the ops it cannot hold go to the CPU with the reason."""

from __future__ import annotations

import numpy as np
from common_graphs import registered  # noqa: F401  (the tests folder on sys.path)
from partita.backends.npu.stream import decode, encode

import partita as P


def _conv(i, src, cin, cout, k, consts, rng):
    consts += [
        rng.integers(-127, 128, (cout, k, k, cin), dtype=np.int8),
        rng.integers(-2000, 2000, cout, dtype=np.int32),
        (0.05 * rng.uniform(0.002, 0.02, cout)).astype(np.float64),
    ]
    w, b, s = len(consts) - 3, len(consts) - 2, len(consts) - 1
    pad = k // 2
    return f"""
  %c{i} = qnn.conv2d({src}, meta[relay.Constant][{w}], 0, 0, 0.05f, 0.01f,
       padding=[{pad}, {pad}, {pad}, {pad}], data_layout="NHWC", kernel_layout="OHWI",
       out_dtype="int32");
  %b{i} = nn.bias_add(%c{i}, meta[relay.Constant][{b}], axis=3);
  %r{i} = qnn.requantize(%b{i}, meta[relay.Constant][{s}], 0, 0.05f, 0, axis=3,
       out_dtype="int8");"""


def residual_block():
    """x (16x16x16) -> expand 1x1 (x64) -> 3x3 -> project 1x1 (x16) -> + x: at the 3x3, the
    input x, the expanded map and the 3x3's output are live at once (36 KiB), while no single op
    touches more than 32 KiB."""
    rng = np.random.default_rng(0)
    consts: list = []
    body = _conv(0, "%x", 16, 64, 1, consts, rng)
    body += _conv(1, "%r0", 64, 64, 3, consts, rng)
    body += _conv(2, "%r1", 64, 16, 1, consts, rng)
    text = f"""
def @main(%x: Tensor[(1, 16, 16, 16), int8]) {{{body}
  qnn.add(%r2, %x, 0.05f, 0, 0.05f, 0, 0.1f, 0)
}}"""
    return P.parse(text, consts)


def test_liveness_overflow_is_resolved_by_cascading_and_computes_the_same_bits():
    mod = residual_block()
    exe = P.build(mod, "npu -sram=34k, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    program = exe.steps[0].region.program
    assert program.sram_peak <= 34 * 1024
    cascaded = [t for t in program.tensors if t.resident]
    assert cascaded and all(t.resident < t.nbytes for t in cascaded)
    # the plan travels in the stream
    again = decode(encode(program))
    assert [t.resident for t in again.tensors] == [t.resident for t in program.tensors]
    x = np.random.default_rng(1).integers(-128, 128, (1, 16, 16, 16), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
    # with room for every map, nothing is cascaded
    roomy = P.build(mod, "npu, ref").steps[0].region.program
    assert not any(t.resident for t in roomy.tensors)


def test_the_smallest_sram_still_holds_the_block_by_cascading_every_chain():
    mod = residual_block()
    exe = P.build(mod, "npu -sram=16k, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    program = exe.steps[0].region.program
    assert program.sram_peak <= 16 * 1024
    assert sum(1 for t in program.tensors if t.resident) >= 2
    x = np.random.default_rng(2).integers(-128, 128, (1, 16, 16, 16), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_an_op_whose_row_bands_exceed_the_sram_goes_to_the_cpu_with_the_reason():
    """A 3x3 conv over 512-wide rows: the 8 input rows one output band reads plus two output
    rows (80 KiB) do not fit 16 KiB: its constraint refuses it."""
    from test_npu_ops import conv_graph

    mod = conv_graph(8, 512, 16, 16, 3, 1, 1, 1, False, False)
    exe = P.build(mod, "npu -sram=16k, ref")
    assert [s.target for s in exe.steps] == ["ref"]
    (row,) = [r for r in exe.report.host_rows if r.op == "qnn.conv2d"]
    assert "the bands of rows they stream" in row.reason and "got 81,920 bytes" in row.reason
    x = np.random.default_rng(3).integers(-128, 128, (1, 8, 512, 16), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
