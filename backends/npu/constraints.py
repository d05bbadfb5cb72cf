"""What the NPU runs, one requirement per row (Vela's style). Each row is the refusal message in
the placement report and a line of docs/npu_supported_ops.md (tools: ``python -m
partita.backends.npu.docgen``)."""

from __future__ import annotations

import numpy as np
from partita.backends.verdict import Verdict, constraint, in_range

from partita.ir import Call, Constant, TensorType, Tuple

ACT_DTYPES = ("int8", "uint8")
WIDE_DTYPES = ("int8", "uint8", "int16")  # TFLite's 16x8 feature maps, where the NPU takes them
KERNEL_RANGE = (1, 64)  # height and width (the compiler splits nothing; Vela 5.2 has no limit)
WEIGHT_SUM_MAX = 8323072  # Vela's: the sum of |weights| per output channel
STRIDE_RANGE = (1, 3)
DILATION_RANGE = (1, 2)
CHANNELS_MAX = 4096
FC_DEPTH_MAX = 65536
POOL_RANGE = (1, 8)  # padded (SAME) pooling windows, Vela's
POOL_VALID_AREA, POOL_VALID_HEIGHT = 256 * 256, 256  # unpadded (VALID) windows, Vela's
RESIZE_FACTORS = (1, 2, 4, 8)  # Vela's upscaling factors
ROUNDINGS = ("tflite", "tflite_builtin", "tflite_double", "onnx")
BINARY_SEMANTICS = ("tflite", "onnx")


def down(expr, name: str):
    """The ``name`` call on the first-argument chain below a composite's root."""
    while isinstance(expr, Call):
        if getattr(expr.op, "name", None) == name:
            return expr
        if not expr.args:
            return None
        expr = expr.args[0]
    return None


def _layout_hw(conv: Call):
    kernel = conv.args[1].checked_type.shape
    layout = conv.attrs.kernel_layout
    return kernel[layout.index("H")], kernel[layout.index("W")]


@constraint("Feature maps must be int8, uint8 or int16 (16x8: int8 weights, int64 bias)")
def activation_dtype(root) -> Verdict:
    mac = down(root, "qnn.conv2d") or down(root, "qnn.dense")
    dtypes = {mac.args[0].checked_type.dtype, root.checked_type.dtype}
    bad = sorted(dtypes - set(WIDE_DTYPES))
    return Verdict(not bad, f"got {', '.join(bad)}")


BATCH_OPS = ("qnn.conv2d", "nn.max_pool2d", "qnn.avg_pool2d", "qnn.mean", "image.resize2d")


@constraint("Feature maps of convolutions, pooling, mean and resize must have batch size 1")
def batch(root) -> Verdict:
    """Vela's constraint_batch_size: the NPU's spatial operations take one image at a time."""
    shapes, x = [root.checked_type.shape], root
    while isinstance(x, Call) and x.args:  # down the data chain to the spatial op's input
        spatial = getattr(x.op, "name", "") in BATCH_OPS
        x = x.args[0]
        if not isinstance(x.checked_type, TensorType):  # a tuple (concatenate's operands)
            break
        shapes.append(x.checked_type.shape)
        if spatial:  # its input's producers are other operations' business
            break
    sizes = sorted({s[0] for s in shapes if len(s) == 4})
    return Verdict(sizes in ([], [1]), f"got {', '.join(map(str, sizes))}")


@constraint("Convolutions must be NHWC with constant int8/uint8 weights")
def conv_layout(root) -> Verdict:
    conv = down(root, "qnn.conv2d")
    ok = conv.attrs.data_layout == "NHWC" and isinstance(conv.args[1], Constant)
    return Verdict(
        ok and conv.args[1].checked_type.dtype in ACT_DTYPES, f"got {conv.attrs.data_layout}"
    )


@constraint("Kernel height and width must be in the range [{}, {}]", *KERNEL_RANGE)
def kernel_size(root) -> Verdict:
    kh, kw = _layout_hw(down(root, "qnn.conv2d"))
    return Verdict(in_range(kh, *KERNEL_RANGE) and in_range(kw, *KERNEL_RANGE), f"got {kh}x{kw}")


@constraint("The sum of absolute weights of an output channel must be at most {}", WEIGHT_SUM_MAX)
def weight_sum(root) -> Verdict:
    conv = down(root, "qnn.conv2d")
    w = np.asarray(conv.args[1].data).astype(np.int64)
    zp = np.asarray(conv.args[3].data).astype(np.int64)
    o = conv.attrs.kernel_layout.index("O")
    w = np.moveaxis(w, o, 0).reshape(w.shape[o], -1)
    total = int(np.abs(w - zp.reshape(-1, 1) if zp.size > 1 else w - zp).sum(axis=1).max())
    return Verdict(total <= WEIGHT_SUM_MAX, f"got {total}")


@constraint("Stride height and width must be in the range [{}, {}]", *STRIDE_RANGE)
def stride(root) -> Verdict:
    sh, sw = down(root, "qnn.conv2d").attrs.strides
    return Verdict(in_range(sh, *STRIDE_RANGE) and in_range(sw, *STRIDE_RANGE), f"got {sh}x{sw}")


@constraint("Dilation must be in the range [{}, {}]", *DILATION_RANGE)
def dilation(root) -> Verdict:
    dh, dw = down(root, "qnn.conv2d").attrs.dilation
    ok = in_range(dh, *DILATION_RANGE) and in_range(dw, *DILATION_RANGE)
    return Verdict(ok, f"got {dh}x{dw}")


@constraint("Grouped convolutions must be plain (1 group) or depthwise (one channel per group)")
def groups(root) -> Verdict:
    conv = down(root, "qnn.conv2d")
    g = conv.attrs.groups
    cin = conv.args[0].checked_type.shape[3]
    cout = root.checked_type.shape[-1]
    return Verdict(g == 1 or (g == cin == cout), f"got {g} groups, {cin} -> {cout} channels")


@constraint("Output channels must be at most {}", CHANNELS_MAX)
def channels(root) -> Verdict:
    c = root.checked_type.shape[-1]
    return Verdict(c <= CHANNELS_MAX, f"got {c}")


@constraint(
    "Requantization must use TFLite's or ONNX Runtime's rounding ({})", ", ".join(ROUNDINGS)
)
def rounding(root) -> Verdict:
    rq = down(root, "qnn.requantize")
    return Verdict(rq.attrs.semantics in ROUNDINGS, f"got {rq.attrs.semantics}")


@constraint("Convolutions and fully connected layers must sum exactly in int32")
def exact_sum(root) -> Verdict:
    """The MAC array sums exactly; ONNX Runtime's int16 pair saturation (accumulate=
    "vpmaddubsw", CPUs without VNNI) is a CPU's, not the NPU's."""
    mac = down(root, "qnn.conv2d") or down(root, "qnn.dense")
    sums = mac.attrs.accumulate
    return Verdict(
        sums == "exact",
        f"got accumulate={sums!r}: reproducing ONNX Runtime on a CPU "
        'without VNNI; from_onnx(ort_cpu="vnni") imports exact sums',
    )


@constraint("Fully connected input depth must be at most {}", FC_DEPTH_MAX)
def fc_depth(root) -> Verdict:
    dense = down(root, "qnn.dense")
    k = dense.args[0].checked_type.shape[-1]
    ok = isinstance(dense.args[1], Constant) and dense.args[0].checked_type.ndim == 2
    return Verdict(ok and k <= FC_DEPTH_MAX, f"got depth {k}")


@constraint(
    "Elementwise ops must use TFLite's or ONNX Runtime's arithmetic ({}) and int8/uint8 (TFLite: "
    "also int16) operands",
    ", ".join(BINARY_SEMANTICS),
)
def binary(root) -> Verdict:
    call = root if getattr(root.op, "name", "").startswith("qnn.") else root.args[0]
    sem = getattr(call.attrs, "semantics", "tflite")
    dtypes = {a.checked_type.dtype for a in call.args[:2]}
    wide = ACT_DTYPES + ("int16",) * (sem == "tflite")
    return Verdict(sem in BINARY_SEMANTICS and dtypes <= set(wide), f"got {sem}, {dtypes}")


@constraint(
    "Pooling windows must be NHWC, at most {}x{} when padded, and of at most {} elements and "
    "height {} when not (Vela's)",
    POOL_RANGE[1],
    POOL_RANGE[1],
    POOL_VALID_AREA,
    POOL_VALID_HEIGHT,
)
def pool(root) -> Verdict:
    call = down(root, "nn.max_pool2d") or down(root, "qnn.avg_pool2d")
    ph, pw = call.attrs.pool_size
    if any(call.attrs.padding):
        ok = in_range(ph, *POOL_RANGE) and in_range(pw, *POOL_RANGE)
    else:
        ok = ph * pw <= POOL_VALID_AREA and ph <= POOL_VALID_HEIGHT
    ok = ok and getattr(call.attrs, "layout", "NHWC") == "NHWC"
    return Verdict(ok and root.checked_type.dtype in WIDE_DTYPES, f"got {ph}x{pw}")


MEAN_AXIS_MAX = 64 * 64  # Vela's: a reduced axis fits one depthwise kernel's 4,096 elements
MEAN_ELEMENTS_MAX = {"int8": 1 << 24, "uint8": 1 << 23, "int16": 1 << 16}  # the int32 sum


def mean_geometry(shape, attrs) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A MEAN's input as Vela sees it: the shape padded in front to NHWC and the reduced axes
    of that shape (None above rank 4)."""
    from partita.ops.tensor_reduce import reduce_axes

    ndim = len(shape)
    if ndim > 4:
        return None
    pad = 4 - ndim
    nhwc = (1,) * pad + tuple(int(d) for d in shape)
    return nhwc, tuple(pad + a for a in reduce_axes(ndim, attrs))


@constraint(
    "Mean must reduce a tensor of rank 4 or less (padded to NHWC) holding int8, uint8 or int16 "
    "data, over the channels only when one of H, W and C is 1, each reduced axis of at most {} "
    "and at most {:,} (int8), {:,} (uint8) or {:,} (int16) elements in all (Vela's)",
    MEAN_AXIS_MAX,
    *MEAN_ELEMENTS_MAX.values(),
)
def mean(root) -> Verdict:
    dtype = root.args[0].checked_type.dtype
    geometry = mean_geometry(root.args[0].checked_type.shape, root.attrs)
    if geometry is None or dtype not in WIDE_DTYPES:
        return Verdict(False, f"got rank {root.args[0].checked_type.ndim}, {dtype}")
    nhwc, axes = geometry
    n = int(np.prod([nhwc[a] for a in axes]))
    ok = (3 not in axes or 1 in nhwc[1:]) and all(nhwc[a] <= MEAN_AXIS_MAX for a in axes)
    ok = ok and n <= MEAN_ELEMENTS_MAX[dtype] and root.checked_type.dtype == dtype
    return Verdict(ok, f"got axes {axes} of {nhwc}, {dtype}")


@constraint(
    "Look-up-table operations must map int8/uint8 to int8/uint8 (16x8 LOGISTIC, TANH, and "
    "LEAKY_RELU with 0 <= alpha <= 1: int16 to int16) with per-tensor parameters"
)
def lut(root) -> Verdict:
    op = root
    if root.op.name == "clip" and getattr(getattr(root.args[0], "op", None), "name", "") == (
        "qnn.requantize"
    ):
        op = root.args[0]  # requantize -> clip: the table maps the requantize's input
    a, b = op.args[0].checked_type.dtype, root.checked_type.dtype
    scalar = all(arg.checked_type.ndim == 0 for arg in op.args[1:] if isinstance(arg, Constant))
    wide = root.op.name in ("qnn.sigmoid", "qnn.tanh") and a == b == "int16"
    # 16x8 LEAKY_RELU: Vela 5.2 runs it as its LeakyRelu operation, or Mul, Mul and Maximum
    # (max(x, alpha * x): leaky ReLU for 0 <= alpha <= 1 only)
    leaky = root.op.name == "qnn.leaky_relu" and 0.0 <= root.attrs.alpha <= 1.0
    wide = wide or (leaky and a == b == "int16")
    ok = (wide or (a in ACT_DTYPES and b in ACT_DTYPES)) and scalar
    return Verdict(ok, f"got {a} -> {b}{'' if scalar else ', per-channel parameters'}")


@constraint("16-bit requantization (TFLite's int16 QUANTIZE) must map int16 to int16 per tensor")
def requantize16(root) -> Verdict:
    a, b = root.args[0].checked_type.dtype, root.checked_type.dtype
    scalar = all(arg.checked_type.ndim == 0 for arg in root.args[1:])
    ok = a == b == "int16" and scalar and root.attrs.semantics == "tflite"
    return Verdict(ok, f"got {a} -> {b}, {root.attrs.semantics}")


@constraint(
    "Chains of elementwise ops of one value must map int8/uint8 to int8/uint8 (16x8 ABS: int16 "
    "to int16) with per-tensor parameters"
)
def lut_chain(root) -> Verdict:
    x = root
    while isinstance(x, Call) and x.args:
        x = x.args[0]
        if isinstance(x, Call) and getattr(x.op, "name", "") == "cast":
            x = x.args[0]
            break
    a, b = x.checked_type.dtype, root.checked_type.dtype
    scalar = all(arg.checked_type.ndim == 0 for arg in root.args[1:] if isinstance(arg, Constant))
    ok = (a in ACT_DTYPES and b in ACT_DTYPES or a == b == "int16") and scalar
    return Verdict(ok, f"got {a} -> {b}{'' if scalar else ', per-channel parameters'}")


@constraint(
    "Resize must be nearest-neighbour on NHWC int8/uint8/int16 data, the output {}x the input "
    "(or a 1x1 input)",
    "/".join(map(str, RESIZE_FACTORS)),
)
def resize(root) -> Verdict:
    a = root.attrs
    (_, ih, iw, _), (oh, ow) = root.args[0].checked_type.shape, a.size
    scaled = (ih, iw) == (1, 1) or any((oh, ow) == (ih * f, iw * f) for f in RESIZE_FACTORS)
    ok = a.method == "nearest_neighbor" and a.layout == "NHWC" and scaled
    ok = ok and root.checked_type.dtype in WIDE_DTYPES
    return Verdict(ok, f"got {a.method} {ih}x{iw} -> {oh}x{ow}, {root.checked_type.dtype}")


@constraint(
    "Data movement ops (reshape, squeeze, expand_dims, concatenate, pad) must move int8, uint8 "
    "or int16 data"
)
def movement(root) -> Verdict:
    return Verdict(root.checked_type.dtype in WIDE_DTYPES, f"got {root.checked_type.dtype}")


@constraint("MAXIMUM and MINIMUM must compare int8, uint8 or int16 operands of one type")
def min_max(root) -> Verdict:
    dtypes = {a.checked_type.dtype for a in root.args} | {root.checked_type.dtype}
    return Verdict(len(dtypes) == 1 and dtypes <= set(WIDE_DTYPES), f"got {sorted(dtypes)}")


@constraint("Softmax must map int8/uint8/int16 to the same type along the last axis")
def softmax(root) -> Verdict:
    ndim = root.args[0].checked_type.ndim
    a, b = root.args[0].checked_type.dtype, root.checked_type.dtype
    ok = a == b and a in WIDE_DTYPES and root.attrs.axis % ndim == ndim - 1
    return Verdict(ok, f"got {a} -> {b}, axis {root.attrs.axis}")


@constraint(
    "Strided slices must have positive strides, other than 1 only over H and W (Vela's), on "
    "int8/uint8/int16 data"
)
def strided_slice(root) -> Verdict:
    strides = tuple(root.attrs.strides or ())
    ndim = root.args[0].checked_type.ndim
    spatial = (1, 2) if ndim == 4 else ()
    ok = all(s >= 1 and (s == 1 or i in spatial) for i, s in enumerate(strides))
    return Verdict(
        ok and root.checked_type.dtype in WIDE_DTYPES,
        f"got strides {strides}, {root.checked_type.dtype}",
    )


@constraint("Transposes must permute a tensor of rank 8 or less holding int8/uint8/int16 data")
def transpose(root) -> Verdict:
    ndim = root.checked_type.ndim
    ok = ndim <= 8 and root.checked_type.dtype in WIDE_DTYPES
    return Verdict(ok, f"got rank {ndim}, {root.checked_type.dtype}")


SPATIAL_OPS = ("qnn.conv2d", "qnn.dense", "nn.max_pool2d", "qnn.avg_pool2d", "qnn.mean")


def _map_bytes(expr) -> int:
    ty = expr.checked_type
    if not isinstance(ty, TensorType):
        return 0
    size = 1
    for d in ty.shape:
        size *= int(d)
    return size * np.dtype(ty.dtype).itemsize


STREAMING = ("qnn.conv2d", "nn.max_pool2d", "qnn.avg_pool2d")
ELEMENTWISE = (
    "qnn.add",
    "qnn.subtract",
    "qnn.mul",
    "clip",
    "qnn.requantize",
    "maximum",
    "minimum",
    "qnn.squared_difference",
) + ("qnn.sigmoid", "qnn.tanh", "qnn.hardswish", "qnn.leaky_relu", "qnn.gelu")


def _band_bytes(expr, rows: int) -> int:
    """The bytes of ``rows`` rows of an NHWC map (the whole map when it has fewer, or is not
    4-D)."""
    ty = expr.checked_type
    whole = _map_bytes(expr)
    if not isinstance(ty, TensorType) or ty.ndim != 4 or int(ty.shape[1]) <= rows:
        return whole
    return whole // int(ty.shape[1]) * rows


def op_map_bytes(root, streamed: bool = False) -> int:
    """The bytes of the feature maps a composite reads (its main op's non-constant operands,
    tuple fields included) and writes; ``streamed``: of the bands of rows a convolution,
    pooling or elementwise op works on at once when its maps are cascaded (the rows one output
    band reads, double-buffered, and two output rows)."""
    main = next((c for c in map(lambda n: down(root, n), SPATIAL_OPS) if c is not None), root)
    name = getattr(main.op, "name", "")
    if streamed and (name in STREAMING or name in ELEMENTWISE):
        if name == "qnn.conv2d":
            kh = _layout_hw(main)[0]
            extent, stride = (kh - 1) * main.attrs.dilation[0] + 1, main.attrs.strides[0]
        elif name in STREAMING:
            extent, stride = main.attrs.pool_size[0], main.attrs.strides[0]
        else:
            extent, stride = 1, 1
        total = _band_bytes(root, 2)
        for arg in main.args:
            if not isinstance(arg, Constant):
                total += _band_bytes(arg, 2 * (extent + stride))
        return total
    total = _map_bytes(root)
    for arg in main.args:
        fields = arg.fields if isinstance(arg, Tuple) else [arg]
        total += sum(_map_bytes(f) for f in fields if not isinstance(f, Constant))
    return total


def sram_fit(config):
    """The SRAM requirement of one NPU design: on a design without off-chip memory for feature
    maps (the U55 presets), an operation must be able to run in SRAM: its input and output maps
    together, or, for convolutions, pooling and elementwise ops, the bands of rows it works on
    when its maps are cascaded into its neighbours (as Vela does). Whether the neighbours are
    NPU ops is not known op by op: the region check (NPUBackend.check_region) runs the
    compiler's SRAM plan over each region and sends it back to the CPU when the plan cannot
    hold it."""

    @constraint(
        "Feature maps an operation reads and writes must fit in SRAM together (convolutions, "
        "pooling and elementwise ops: the bands of rows they stream) on an NPU without "
        "off-chip memory for feature maps"
    )
    def sram(root) -> Verdict:
        if config is None or config.spill_memory != "none":
            return Verdict(True)
        need = op_map_bytes(root, streamed=True)
        return Verdict(
            need <= config.sram_bytes,
            f"got {need:,} bytes, the {config.name} SRAM holds {config.sram_bytes:,}",
        )

    return sram


@constraint(
    "Float convolutions and matmuls do not run on the NPU: a QDQ group its runtime computes in "
    "float (ONNX Runtime leaves a group unfused when its int8 input also feeds another op, e.g. "
    "a residual add) is an integer op only in the frontend's integer semantics, which a build "
    "for the NPU picks by default (backends/npu/semantics.py); an explicit ort_cpu= or "
    "match= keeps the runtime's float arithmetic on the CPU"
)
def float_mac(root) -> Verdict:
    mac = down(root, "nn.conv2d") or down(root, "nn.dense") or root
    return Verdict(
        False, f"got {mac.op.name} accumulate={getattr(mac.attrs, 'accumulate', None)!r}"
    )


CONV = (
    activation_dtype,
    batch,
    conv_layout,
    kernel_size,
    weight_sum,
    stride,
    dilation,
    groups,
    channels,
    rounding,
    exact_sum,
)
DENSE = (activation_dtype, fc_depth, rounding, exact_sum)
ALL = CONV + (
    fc_depth,
    binary,
    pool,
    mean,
    lut,
    lut_chain,
    resize,
    movement,
    min_max,
    softmax,
    strided_slice,
    transpose,
)
