"""Every NPU constraint, accepting and refusing: the verdict and the reason it gives."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.npu import constraints as C

import partita as P
from partita.passes.infer_type import infer_type


def root(text: str, consts=()):
    """The typed body of ``def @main`` written in the text format."""
    mod = P.parse(text, list(consts))
    fn = mod["main"]
    infer_type(fn)
    return fn.body


def conv(
    *,
    dtype="int8",
    layout="NHWC",
    k=3,
    stride=1,
    dilation=1,
    cin=4,
    cout=4,
    groups=1,
    semantics="tflite",
    hw=12,
    batch=1,
    accumulate="exact",
    w=1,
):
    w_shape = (cout, k, k, cin // groups) if layout == "NHWC" else (cout, cin // groups, k, k)
    weight = np.full(w_shape, w, np.int8)
    shape = f"{batch}, {hw}, {hw}, {cin}" if layout == "NHWC" else f"{batch}, {cin}, {hw}, {hw}"
    kernel_layout = "OHWI" if layout == "NHWC" else "OIHW"
    axis = 3 if layout == "NHWC" else 1
    return root(
        f"""
def @main(%x: Tensor[({shape}), {dtype}]) {{
  %0 = qnn.conv2d(%x, meta[relay.Constant][0], 0, 0, 0.5f, 0.5f, strides=[{stride}, {stride}],
       padding=[1, 1, 1, 1], dilation=[{dilation}, {dilation}], groups={groups},
       data_layout="{layout}", kernel_layout="{kernel_layout}", out_dtype="int32",
       accumulate="{accumulate}");
  qnn.requantize(%0, 0.25f, 0, 0.5f, 0, axis={axis}, out_dtype="int8", semantics="{semantics}")
}}""",
        [weight],
    )


def dense(k=16, out="int8"):
    return root(
        f"""
def @main(%x: Tensor[(1, {k}), int8]) {{
  %0 = qnn.dense(%x, meta[relay.Constant][0], 0, 0, 0.5f, 0.5f, units=4, out_dtype="int32");
  qnn.requantize(%0, 0.25f, 0, 0.5f, 0, out_dtype="{out}")
}}""",
        [np.ones((4, k), np.int8)],
    )


def single(body: str, shape="1, 8, 8, 4", dtype="int8", consts=()):
    return root(f"def @main(%x: Tensor[({shape}), {dtype}]) {{\n  {body}\n}}", consts)


ADD = "qnn.add(%x, %x, 0.5f, 0, 0.5f, 0, 0.5f, 0{})"
ABS = (
    'qnn.requantize(abs(subtract(cast(%x, dtype="int32"), 3)), 0.5f, 0, 1f, -128, '
    'out_dtype="int8")'
)

CASES = [
    (C.activation_dtype, lambda: conv(), True, ""),
    (C.activation_dtype, lambda: conv(dtype="int16"), True, ""),  # 16x8
    (C.activation_dtype, lambda: dense(out="int32"), False, "got int32"),
    (
        C.requantize16,
        lambda: single('qnn.requantize(%x, 0.5f, 0, 0.25f, 0, out_dtype="int16")', dtype="int16"),
        True,
        "",
    ),
    (
        C.requantize16,
        lambda: single('qnn.requantize(%x, 0.5f, 0, 0.25f, 0, out_dtype="int8")', dtype="int16"),
        False,
        "got int16 -> int8, tflite",
    ),
    (C.conv_layout, lambda: conv(), True, ""),
    (C.conv_layout, lambda: conv(layout="NCHW"), False, "got NCHW"),
    (C.kernel_size, lambda: conv(k=8, hw=16), True, ""),
    (C.kernel_size, lambda: conv(k=9, hw=16), True, ""),  # Vela 5.2 has no kernel limit
    (C.kernel_size, lambda: conv(k=65, hw=70), False, "got 65x65"),
    (C.weight_sum, lambda: conv(w=127, cin=7000), True, ""),
    (C.weight_sum, lambda: conv(w=127, cin=8000), False, "got 9144000"),
    (C.lut_chain, lambda: single(ABS), True, ""),
    (C.lut_chain, lambda: single(ABS, dtype="int16"), False, "got int16 -> int8"),
    (C.min_max, lambda: single("maximum(%x, %x)"), True, ""),
    (C.min_max, lambda: single("minimum(%x, %x)", dtype="int16"), True, ""),  # Vela's 16x8
    (C.min_max, lambda: single("minimum(%x, %x)", dtype="int32"), False, "got ['int32']"),
    (C.softmax, lambda: single("qnn.softmax(%x, 0.5f, 0, 0.00390625f, -128)"), True, ""),
    (
        C.softmax,
        lambda: single("qnn.softmax(%x, 0.5f, 0, 0.00390625f, -128, axis=1)"),
        False,
        "got int8 -> int8, axis 1",
    ),
    (
        C.strided_slice,
        lambda: single(
            "strided_slice(%x, begin=[0, 0, 0, 0], end=[1, 8, 8, 4], strides=[1, 2, 1, 1])"
        ),
        True,
        "",
    ),
    (
        C.strided_slice,
        lambda: single(
            "strided_slice(%x, begin=[0, 0, 0, 0], end=[1, 8, 8, 4], strides=[1, 1, 1, 2])"
        ),
        False,
        "got strides (1, 1, 1, 2), int8",
    ),
    (C.transpose, lambda: single("transpose(%x, axes=[0, 3, 1, 2])"), True, ""),
    (C.transpose, lambda: single("transpose(%x, axes=[0, 3, 1, 2])", dtype="int16"), True, ""),
    (
        C.transpose,
        lambda: single("transpose(%x, axes=[0, 3, 1, 2])", dtype="int32"),
        False,
        "got rank 4, int32",
    ),
    (C.stride, lambda: conv(stride=3), True, ""),
    (C.stride, lambda: conv(stride=4), False, "got 4x4"),
    (C.dilation, lambda: conv(dilation=2), True, ""),
    (C.dilation, lambda: conv(dilation=3), False, "got 3x3"),
    (C.groups, lambda: conv(groups=4), True, ""),
    (C.groups, lambda: conv(groups=2), False, "got 2 groups, 4 -> 4 channels"),
    (C.channels, lambda: conv(cout=4096, hw=3), True, ""),
    (C.channels, lambda: conv(cout=4097, hw=3), False, "got 4097"),
    (C.rounding, lambda: conv(semantics="tflite_double"), True, ""),
    (C.rounding, lambda: conv(semantics="onnx"), True, ""),
    (C.rounding, lambda: conv(semantics="fbgemm"), False, "got fbgemm"),
    (C.exact_sum, lambda: conv(), True, ""),
    (
        C.exact_sum,
        lambda: conv(accumulate="vpmaddubsw"),
        False,
        "got accumulate='vpmaddubsw': reproducing ONNX Runtime on a CPU without VNNI; "
        'from_onnx(ort_cpu="vnni") imports exact sums',
    ),
    (C.exact_sum, lambda: dense(), True, ""),
    (C.fc_depth, lambda: dense(65536), True, ""),
    (C.fc_depth, lambda: dense(65537), False, "got depth 65537"),
    (C.binary, lambda: single(ADD.format("")), True, ""),
    (C.binary, lambda: single(ADD.format(', semantics="onnx"')), True, ""),
    (C.binary, lambda: single(ADD.format(""), dtype="int16"), True, ""),  # 16x8
    (
        C.binary,
        lambda: single(ADD.format(', semantics="onnx"'), dtype="int16"),
        False,
        "got onnx, {'int16'}",
    ),
    (C.pool, lambda: single('nn.max_pool2d(%x, pool_size=[8, 8], layout="NHWC")'), True, ""),
    (  # unpadded windows up to 256x256 elements (Vela's)
        C.pool,
        lambda: single('nn.max_pool2d(%x, pool_size=[9, 9], layout="NHWC")', "1, 9, 9, 4"),
        True,
        "",
    ),
    (  # padded ones up to 8x8
        C.pool,
        lambda: single(
            'nn.max_pool2d(%x, pool_size=[9, 9], padding=[4, 4, 4, 4], layout="NHWC")',
            "1, 9, 9, 4",
        ),
        False,
        "got 9x9",
    ),
    (C.mean, lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[1, 2])"), True, ""),
    (
        C.mean,
        lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[3])"),
        False,
        "got axes (3,) of (1, 8, 8, 4), int8",
    ),
    # Vela's: W alone; the channels when one of H, W, C is 1 (a rank-3 map is padded to NHWC)
    (C.mean, lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[2])"), True, ""),
    (C.mean, lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[2])", "1, 16, 64"), True, ""),
    (
        C.mean,
        lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[2])", "1, 8, 8, 8000"),
        True,
        "",
    ),
    (
        C.mean,
        lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[3])", "1, 1, 8, 5000"),
        False,
        "got axes (3,) of (1, 1, 8, 5000), int8",
    ),
    (
        C.mean,
        lambda: single("qnn.mean(%x, 0.5f, 0, 0.5f, 0, axis=[1, 2])", "1, 300, 300, 1", "int16"),
        False,
        "got axes (1, 2) of (1, 300, 300, 1), int16",
    ),
    (C.lut, lambda: single("qnn.sigmoid(%x, 0.5f, 0, 0.00390625f, -128)"), True, ""),
    (
        C.lut,
        lambda: single(
            'qnn.requantize(%x, meta[relay.Constant][0], 0, 0.5f, 0, axis=3, out_dtype="int8")',
            consts=[np.full(4, 0.25, np.float32)],
        ),
        False,
        "got int8 -> int8, per-channel parameters",
    ),
    (
        C.resize,
        lambda: single(
            'image.resize2d(%x, size=[16, 16], layout="NHWC", method="nearest_neighbor")'
        ),
        True,
        "",
    ),
    (
        C.resize,
        lambda: single(
            'image.resize2d(%x, size=[12, 12], layout="NHWC", method="nearest_neighbor")'
        ),
        False,
        "got nearest_neighbor 8x8 -> 12x12, int8",
    ),
    (C.movement, lambda: single("reshape(%x, newshape=[1, 256])"), True, ""),
    (C.batch, lambda: conv(), True, ""),
    (C.batch, lambda: conv(batch=3), False, "got 3"),
    (
        C.movement,
        lambda: single("reshape(%x, newshape=[1, 256])", dtype="int32"),
        False,
        "got int32",
    ),
]


@pytest.mark.parametrize(
    "check, build, ok, reason",
    CASES,
    ids=[f"{c[0].requirement[:30]}-{'ok' if c[2] else 'refused'}" for c in CASES],
)
def test_constraint_verdict_and_reason(check, build, ok, reason):
    verdict = check(build())
    assert verdict.ok is ok
    if not ok:
        assert verdict.reason == f"{check.requirement} ({reason})"


def test_every_constraint_has_an_accepting_and_a_refusing_case():
    tested = {(c[0], c[2]) for c in CASES}
    for check in C.ALL:
        assert (check, True) in tested and (check, False) in tested, check.requirement


@pytest.mark.parametrize("mode", ["asymmetric", "align_corners", "tf_half_pixel_for_nn"])
def test_nearest_resize_runs_on_the_npu_between_elementwise_ops(mode):
    rounding = "round" if mode == "align_corners" else "floor"
    text = f"""
def @main(%x: Tensor[(1, 5, 6, 3), int8]) {{
  %0 = qnn.add(%x, %x, 0.5f, 3, 0.5f, 3, 0.75f, -2);
  %1 = image.resize2d(%0, size=[10, 12], layout="NHWC", method="nearest_neighbor",
       coordinate_transformation_mode="{mode}", rounding_method="{rounding}");
  qnn.add(%1, %1, 0.75f, -2, 0.75f, -2, 0.5f, 1)
}}"""
    mod = P.parse(text)
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.random.default_rng(0).integers(-128, 128, (1, 5, 6, 3), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_a_three_times_resize_stays_on_the_cpu_with_the_requirement():
    from partita.partition import partition_for

    mod = P.parse(
        "def @main(%x: Tensor[(1, 4, 4, 2), int8]) {\n"
        '  image.resize2d(%x, size=[12, 12], layout="NHWC", method="nearest_neighbor")\n}'
    )
    (row,) = P.placement_report(partition_for(mod, "npu, ref")).rows
    assert row.target == "ref"
    assert C.resize.requirement in row.reason and "4x4 -> 12x12" in row.reason


def test_a_requantize_feeding_a_concatenation_feeding_a_conv_is_checked_without_crashing():
    """The batch check walked from the conv down its first argument into the concatenation's
    tuple, which has no shape (issue 30: QUANTIZE feeding CONCATENATION failed the build)."""
    weight = np.ones((4, 3, 3, 8), np.int8)
    mod = P.parse(
        """
def @main(%a: Tensor[(1, 6, 6, 4), int8], %b: Tensor[(1, 6, 6, 4), int8]) {
  %0 = qnn.requantize(%a, 0.5f, 0, 0.25f, 0, out_dtype="int8");
  %1 = concatenate((%0, %b), axis=3);
  %2 = qnn.conv2d(%1, meta[relay.Constant][0], 0, 0, 0.25f, 0.01f, padding=[1, 1, 1, 1],
       data_layout="NHWC", kernel_layout="OHWI", out_dtype="int32");
  qnn.requantize(%2, 0.0025f, 0, 0.1f, 0, out_dtype="int8")
}""",
        [weight],
    )
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, (1, 6, 6, 4), dtype=np.int8) for _ in range(2))
    assert np.array_equal(exe.run(a, b)[0], P.interpret(mod, [a, b])[0])
