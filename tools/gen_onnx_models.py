"""Generate partita's ONNX test models in tests/models/onnx/, deterministically.

    /work/tfvenv/bin/python tools/gen_onnx_models.py [--only NAME ...] [--no-nets] [--no-large]
                                                     [--out DIR]

Run from the repository root with a separate environment holding the tools: tensorflow-cpu 2.21
(Keras 3), tf2onnx 1.17, onnxruntime 1.31 (never install TensorFlow into partita's own venv).
Per-op float graphs are built with onnx.helper (onnx_op_specs.py); whole networks are
keras.applications models with random weights (BatchNorm initialised LSUV-style, see
shared notes), exported by tf2onnx (opset 17, NCHW input). Every float model is then quantized by
onnxruntime.quantization.quantize_static in the configurations its spec lists:

    qdq_s8s8_pc  QDQ,       int8 activations,  int8 weights per channel
    qdq_u8s8_pt  QDQ,       uint8 activations, int8 weights per tensor
    qop_u8s8_pc  QOperator, uint8 activations, int8 weights per channel
    qop_s8s8_pt  QOperator, int8 activations,  int8 weights per tensor
    qop_u8s8_pt  QOperator, uint8 activations, int8 weights per tensor

The full-size benchmark networks (large/: MobileNetV2 and MobileNet v1, alpha 1.0, 224x224, 1000
classes) are committed in the two QOperator U8S8 configurations only; their float models (over 5
MB) and any other configuration go to a cache folder instead ($PARTITA_MODEL_CACHE, by default
~/.cache/partita-models), where benchmarks/models.py `get_model(name)` also makes them on first
use (`--make NAME[.CONFIG] [--dest DIR]`). README.md lists every file with its ops and, for
networks, how closely the quantized model follows the float one in ONNX Runtime.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import collections  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
import zlib  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper  # noqa: E402
from onnx_op_specs import OP_SPECS  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: E402

warnings.filterwarnings("ignore")

CONFIGS = {
    "qdq_s8s8_pc": (QuantFormat.QDQ, QuantType.QInt8, True),
    "qdq_u8s8_pt": (QuantFormat.QDQ, QuantType.QUInt8, False),
    "qop_u8s8_pc": (QuantFormat.QOperator, QuantType.QUInt8, True),
    "qop_s8s8_pt": (QuantFormat.QOperator, QuantType.QInt8, False),
    "qop_u8s8_pt": (QuantFormat.QOperator, QuantType.QUInt8, False),
}
NET_CONFIGS = ["qdq_s8s8_pc", "qdq_u8s8_pt", "qop_u8s8_pc", "qop_s8s8_pt"]
LARGE_CONFIGS = ["qop_u8s8_pc", "qop_u8s8_pt"]
N_MEASURE = 4  # random inputs the README's correlation and error come from
CACHE_ENV = "PARTITA_MODEL_CACHE"
N_CALIB = 16
CLASSES = 16


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def cache_dir() -> Path:
    """Where models too large to commit go: $PARTITA_MODEL_CACHE or ~/.cache/partita-models."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "partita-models")


class Reader(CalibrationDataReader):
    """Feeds a fixed list of input dicts to the calibrator."""

    def __init__(self, samples):
        self.samples = list(samples)
        self.i = 0

    def get_next(self):
        if self.i >= len(self.samples):
            return None
        self.i += 1
        return self.samples[self.i - 1]


def samples_for(model: onnx.ModelProto, seed: int, n: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = []
    for _ in range(n):
        feed = {}
        for inp in model.graph.input:
            if inp.name in inits:
                continue
            shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
            feed[inp.name] = rng.uniform(-1, 1, shape).astype(np.float32)
        feeds.append(feed)
    return feeds


def quantize(float_path: Path, out: Path, config: str, seed: int) -> None:
    fmt, act, per_channel = CONFIGS[config]
    model = onnx.load(float_path)
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(float_path), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre),
            str(out),
            Reader(samples_for(model, seed, N_CALIB)),
            quant_format=fmt,
            activation_type=act,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            extra_options={"ForceQuantizeNoInputCheck": True},
        )
    m = onnx.load(out)
    m.producer_name, m.doc_string = "partita gen_onnx_models.py (quantize_static)", ""
    onnx.save(m, out)


def op_model(name: str, builder) -> onnx.ModelProto:
    rng = np.random.default_rng(seed_of(name))
    nodes, inits, inputs, outputs = builder(rng)
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="partita gen_onnx_models.py",
    )
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model, full_check=True)
    return model


# ---- whole networks ----------------------------------------------------------------------------


def keras_nets():
    from keras import Input, Model, applications, layers

    def app(ctor, size, classes=CLASSES, **kw):
        def make(batch):
            inp = Input(batch_shape=(batch, size, size, 3))
            return ctor(
                input_tensor=inp, weights=None, classes=classes, classifier_activation=None, **kw
            )

        return make, size

    def block(x, filters, stride):
        y = layers.Conv2D(filters, 3, stride, "same", use_bias=False)(x)
        y = layers.ReLU()(layers.BatchNormalization()(y))
        y = layers.BatchNormalization()(layers.Conv2D(filters, 3, 1, "same", use_bias=False)(y))
        if stride != 1 or x.shape[-1] != filters:
            x = layers.BatchNormalization()(layers.Conv2D(filters, 1, stride, use_bias=False)(x))
        return layers.ReLU()(layers.Add()([x, y]))

    def resnet(batch):
        inp = Input(batch_shape=(batch, 64, 64, 3))
        x = layers.Conv2D(16, 3, 2, "same", use_bias=False)(inp)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.MaxPooling2D(3, 2, "same")(x)
        for filters, stride in ((16, 1), (32, 2), (32, 1), (64, 2)):
            x = block(x, filters, stride)
        x = layers.Dense(CLASSES)(layers.GlobalAveragePooling2D()(x))
        return Model(inp, x, name="resnet_mini")

    return {
        "mobilenet_v2_035_96": app(applications.MobileNetV2, 96, alpha=0.35),
        "mobilenet_v1_025_96": app(applications.MobileNet, 96, alpha=0.25),
        "resnet_mini_64": (resnet, 64),
    }


def large_nets():
    """The full-size benchmark networks (name -> (make, size)), 1000 classes."""
    from keras import Input, applications

    def app(ctor, **kw):
        def make(batch):
            inp = Input(batch_shape=(batch, 224, 224, 3))
            return ctor(
                input_tensor=inp, weights=None, classes=1000, classifier_activation=None, **kw
            )

        return make, 224

    return {
        "mobilenet_v2_100_224": app(applications.MobileNetV2, alpha=1.0),
        "mobilenet_v1_100_224": app(applications.MobileNet, alpha=1.0),
    }


def init_weights(make, calib: np.ndarray, rng: np.random.Generator):
    """LSUV-style BatchNorm statistics (one variance per layer, no centring), non-zero head bias."""
    from keras import Model, layers

    model = make(None)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            m2 = float(np.mean(np.square(Model(model.inputs, layer.input)(calib, training=False))))
            n = layer.moving_variance.shape[0]
            layer.set_weights(
                [rng.uniform(0.5, 1.5, n), rng.normal(0, 0.1, n), np.zeros(n), np.full(n, m2)]
            )
    head = [ly for ly in model.layers if getattr(ly, "bias", None) is not None][-1]
    kernel = head.get_weights()[0]
    head.set_weights([kernel, rng.normal(0, 0.5, kernel.shape[-1])])
    static = make(1)
    static.set_weights(model.get_weights())
    return static


def net_model(name: str, make, size: int) -> onnx.ModelProto:
    import tensorflow as tf
    import tf2onnx
    from keras.utils import set_random_seed

    rng = np.random.default_rng(seed_of(name))
    set_random_seed(int(rng.integers(2**31)))
    calib = rng.uniform(-1, 1, (N_CALIB, size, size, 3)).astype(np.float32)
    model = init_weights(make, calib, rng)
    spec = (tf.TensorSpec((1, size, size, 3), tf.float32, name="input"),)

    @tf.function(input_signature=spec)
    def fn(x):
        return model(x, training=False)

    proto, _ = tf2onnx.convert.from_function(
        fn, input_signature=spec, opset=17, inputs_as_nchw=["input:0"]
    )
    proto.producer_name, proto.doc_string = "tf2onnx (partita gen_onnx_models.py)", ""
    onnx.checker.check_model(proto)
    return proto


# ---- driver ------------------------------------------------------------------------------------


def op_counts(path: Path) -> str:
    m = onnx.load(path)
    counts = collections.Counter(
        (f"{n.domain}." if n.domain not in ("", "ai.onnx") else "") + n.op_type
        for n in m.graph.node
    )
    return ", ".join(f"{k}" + (f" x{v}" if v > 1 else "") for k, v in sorted(counts.items()))


def write(out_dir: Path, group: str, name: str, model, configs, float_dir=None) -> list:
    """Save the float model (in float_dir, by default beside the others) and quantize it."""
    d = out_dir / group
    d.mkdir(parents=True, exist_ok=True)
    float_path = (float_dir or d) / f"{name}.onnx"
    float_path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, float_path)
    rows = [(group, float_path.name, op_counts(float_path))]
    for config in configs:
        q = d / f"{name}.{config}.onnx"
        quantize(float_path, q, config, seed_of(name) + 1)
        rows.append((group, q.name, op_counts(q)))
    for row in rows:
        log(f"  {row[1]}: {row[2]}")
    return rows


def large_model(name: str) -> onnx.ModelProto:
    """One large network's float model, built in a fresh Keras session with tf2onnx's name counter
    reset: the names in the file then do not depend on what was built before in the process, so
    get_model() reproduces the committed bytes."""
    import tf2onnx.utils
    from keras.utils import clear_session

    clear_session()
    tf2onnx.utils.INTERNAL_NAME = 1
    make, size = large_nets()[name]
    return canonical_names(net_model(name, make, size))


def canonical_names(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rename and order initializers (c0, c1, ... by first use) and tf2onnx's numbered names
    (X__N -> X__k in order of appearance). tf2onnx's constant folding keeps one of several equal
    constants by set order, which follows Python's per-process string hashing."""
    import re

    g = model.graph
    g.doc_string = ""  # "converted from __inference_fn_<TensorFlow's function counter>"
    inits = {i.name for i in g.initializer}
    renames: dict[str, str] = {}
    for node in g.node:
        for t in node.input:
            if t in inits and t not in renames:
                renames[t] = f"c{len(renames)}"
    numbered = re.compile(r"__\d+")
    for node in g.node:
        for t in [node.name, *node.output]:
            if t not in renames and numbered.search(t):
                renames[t] = numbered.sub(f"__{len(renames)}", t)
    for i in g.initializer:
        i.name = renames.get(i.name, i.name)
    ordered = sorted(g.initializer, key=lambda i: int(i.name[1:]) if i.name[1:].isdigit() else -1)
    g.ClearField("initializer")
    g.initializer.extend(ordered)
    for node in g.node:
        node.name = renames.get(node.name, node.name)
        node.input[:] = [renames.get(t, t) for t in node.input]
        node.output[:] = [renames.get(t, t) for t in node.output]
    for v in [*g.input, *g.output, *g.value_info]:
        v.name = renames.get(v.name, v.name)
    onnx.checker.check_model(model)
    return model


def make_large(name: str, config: str | None, dest: Path) -> Path:
    """Make one large network into dest: its float model (config None) or one quantization.

    The float model is reused from dest when present (generation is deterministic).
    """
    float_path = dest / f"{name}.onnx"
    if not float_path.exists():
        dest.mkdir(parents=True, exist_ok=True)
        onnx.save(large_model(name), float_path)
    if config is None:
        return float_path
    out = dest / f"{name}.{config}.onnx"
    quantize(float_path, out, config, seed_of(name) + 1)
    return out


def measure(float_path: Path, q_path: Path) -> tuple[float, float]:
    """(Pearson correlation, max |error| in output LSB) of a quantized network against its float
    model, both in ONNX Runtime (all optimizations, one thread), on N_MEASURE uniform inputs."""
    import onnxruntime as ort
    from onnx import numpy_helper

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    runs = [
        ort.InferenceSession(str(f), so, providers=["CPUExecutionProvider"])
        for f in (float_path, q_path)
    ]
    feeds = samples_for(onnx.load(float_path), seed_of(q_path.name), N_MEASURE)
    want = np.concatenate([runs[0].run(None, f)[0].ravel() for f in feeds])
    got = np.concatenate([runs[1].run(None, f)[0].ravel() for f in feeds])
    m = onnx.load(q_path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    last = [n for n in m.graph.node if n.op_type == "DequantizeLinear"][-1]
    err = float(np.max(np.abs(got - want))) / float(inits[last.input[1]])
    return float(np.corrcoef(got, want)[0, 1]), err


def _net_rows(out_dir: Path, group: str) -> list[str]:
    rows = ["| file | KiB | corr | max err (LSB) | ops |", "|---|---|---|---|---|"]
    for p in sorted((out_dir / group).glob("*.onnx")):
        stem = p.name.split(".")[0]
        float_path = next(
            (f for f in (p.parent / f"{stem}.onnx", cache_dir() / f"{stem}.onnx") if f.exists()),
            None,
        )
        corr = err = "-"
        if p.name.count(".") == 2 and float_path is not None:
            c, e = measure(float_path, p)
            corr, err = f"{c:.4f}", f"{e:.1f}"
        kib = p.stat().st_size // 1024
        rows.append(f"| `{group}/{p.name}` | {kib} | {corr} | {err} | {op_counts(p)} |")
    return rows


README_HEAD = """\
# ONNX test models

Generated by `tools/gen_onnx_models.py` (see its docstring for the tools and the
quantization configurations); do not edit by hand. `X.onnx` is the float model,
`X.<config>.onnx` its quantize_static output. `nets/torch_*` come from
`tools/gen_onnx_torch_models.py` (torch.onnx.export of a torch.nn MobileNetV2).

Networks have random weights (BatchNorm initialised LSUV-style, see the TFLite README) and are
calibrated on 16 uniform [-1, 1] images. `corr` and `max err` compare each quantized network with
its float model in ONNX Runtime on 4 uniform [-1, 1] inputs: Pearson correlation of the outputs,
and the largest difference in units of the output scale.

`large/` holds the full-size benchmark networks (MobileNetV2 and MobileNet v1, alpha 1.0,
224x224, 1000 classes, NCHW input) in the QOperator U8S8 configurations, per channel (`pc`) and
per tensor (`pt`). Their float models (14.0 and 16.9 MB) are not committed:
`benchmarks/models.py` `get_model("onnx/mobilenet_v2_100_224")` makes them (and any other
configuration, e.g. `"onnx/mobilenet_v1_100_224.qdq_s8s8_pc"`) into `$PARTITA_MODEL_CACHE`
(default `~/.cache/partita-models`) on first use, without network access, byte-identical to
what the generator makes.
"""


def write_readme(out_dir: Path) -> None:
    lines = README_HEAD.splitlines() + [""]
    d = out_dir / "ops"
    if d.exists():
        lines += ["## ops", "", "| file | KiB | ops |", "|---|---|---|"]
        for p in sorted(d.glob("*.onnx")):
            lines.append(f"| `ops/{p.name}` | {p.stat().st_size // 1024} | {op_counts(p)} |")
        lines.append("")
    for group in ("nets", "large"):
        if (out_dir / group).exists():
            lines += [f"## {group}", "", *_net_rows(out_dir, group), ""]
    (out_dir / "README.md").write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--no-nets", action="store_true")
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--out", default="tests/models/onnx")
    ap.add_argument("--make", metavar="NAME[.CONFIG]", help="make one large network into --dest")
    ap.add_argument("--dest", type=Path, help="folder for --make (default: the cache folder)")
    args = ap.parse_args()
    if args.make:
        name, _, config = args.make.partition(".")
        print(make_large(name, config or None, args.dest or cache_dir()))
        return
    out_dir = Path(args.out)
    wanted = lambda name: args.only is None or name in args.only  # noqa: E731
    for name, builder, configs in OP_SPECS:
        if wanted(name):
            log(f"op {name}")
            write(out_dir, "ops", name, op_model(name, builder), configs)
    if not args.no_nets:
        for name, (make, size) in keras_nets().items():
            if wanted(name):
                log(f"net {name}")
                write(out_dir, "nets", name, net_model(name, make, size), NET_CONFIGS)
    if not args.no_large:
        for name in large_nets():
            if wanted(name):
                log(f"large {name}")
                model = large_model(name)
                write(out_dir, "large", name, model, LARGE_CONFIGS, float_dir=cache_dir())
    write_readme(out_dir)


if __name__ == "__main__":
    main()
