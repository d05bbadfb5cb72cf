"""Run TVM v0.16's BYOC pattern-table modules through partita.relay (issue 27).

    python tools/relay_compat_byoc.py FOLDER [--module cmsisnn ...] [--model PATH.tflite ...]
        [--mean tvm|tvm_always|qnn] [--resnet50 PATH] [--dnnl-form] [--dnnl-no-prune]

FOLDER holds the shim's ``tvm/`` package (/work/shared/relay-compat) and, in FOLDER/contrib/,
TVM v0.16.0's python/tvm/relay/op/contrib/<name>.py files, byte for byte (TVM's code: never
commit them). Each
module is loaded as ``tvm.relay.op.contrib.<name>`` (so its relative imports resolve to
partita.relay), with stand-ins (below) only for TVM's C++ and driver machinery; its
``partition_for_<target>`` runs on int8 TFLite models imported by partita, and the script prints
the share of ops placed on the accelerator, whether the partitioned graph gives the same bits
as the unpartitioned one in partita's reference interpreter ("bit-exact"), and whether it gives
the bits of partita's own import, which TFLite's reference kernels give ("tflite-exact": differs
only when ``--mean tvm_always`` writes a MEAN in TVM's inexact form; see
partita/relay/frontend.py), the composites and the ops left on the host, and the numpy it ran
under. dnnl.py has no ``partition_for_dnnl``: TVM's test_dnnl.py sequence runs instead (see
``_dnnl_partitioner``). ethosu.py needs numpy 1.x (TVM 0.16's); run it from a venv with
numpy<2 (docs/migrating-from-tvm.md says how). docs/migrating-from-tvm.md's BYOC tables are

    python tools/relay_compat_byoc.py FOLDER --module cmsisnn --module ethosn --module ethosu \
        --module dnnl [--mean tvm_always]
    python tools/relay_compat_byoc.py FOLDER --module dnnl --dnnl-form [--dnnl-no-prune]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import types

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [
    "tests/models/tflite/nets/mobilenet_v1_025_128.tflite",
    "tests/models/tflite/large/mobilenet_v1_100_224.tflite",
    "tests/models/tflite/nets/mobilenet_v2_035_96.tflite",
    "tests/models/tflite/large/mobilenet_v2_100_224.tflite",
    "tests/models/tflite/nets/resnet_mini_64.tflite",
]
# made by tools/gen_resnet50_int8.py (26 MB, not committed); measured when present
RESNET50 = "/work/relaycompat-run/models/resnet50_int8.tflite"


# ---- stand-ins for TVM's C++ and driver machinery ---------------------------------------------


def _identity_pass(name):
    from partita.relay.transform import module_pass

    return lambda *a, **k: module_pass(lambda mod, ctx: mod, opt_level=0, name=name)


def _effective_conv2d_padding(conv2d, pad):
    """CMSIS-NN's C++ GetEffectiveConv2DPadding: the pad's H/W widths plus the conv's padding."""
    layout = conv2d.attrs.data_layout
    h, w = layout.index("H"), layout.index("W")
    widths = pad.attrs.pad_width
    top, left, bottom, right = conv2d.attrs.padding
    return (
        widths[h][0] + top,
        widths[w][0] + left,
        widths[h][1] + bottom,
        widths[w][1] + right,
    )


def _install_standins(folder: str) -> None:
    sys.path.insert(0, folder)
    sys.path.insert(0, REPO)
    import tvm  # the shim

    ffi = types.ModuleType("tvm._ffi")

    def init_api(namespace, target_module_name):
        mod = sys.modules[target_module_name]
        if namespace == "relay.ext.cmsisnn.transform":  # C++ passes run on the partitions
            for name in (
                "GenerateCMSISNNConstants",
                "CMSISNNFusePads",
                "ScalarToTensorConstants",
                "ExtractConstantsFromPartitionedFunction",
            ):
                setattr(mod, name, _identity_pass(name))
            mod.GetEffectiveConv2DPadding = _effective_conv2d_padding

    ffi._init_api = init_api
    ffi.register_func = tvm.register_func
    sys.modules["tvm._ffi"] = tvm._ffi = ffi
    target = types.ModuleType("tvm.target")

    class Target:
        """TVM's target object: only the kinds TVM was built with matter here."""

        @staticmethod
        def list_kinds():
            return ["llvm", "c", "cmsis-nn", "ethos-n", "ethos-u"]

        def __init__(self, spec, host=None):
            self.kind = types.SimpleNamespace(name=str(spec).split()[0])
            self.attrs = {}

    target.Target = Target
    sys.modules["tvm.target"] = tvm.target = target
    _ethosn_standins(tvm)
    # tvm.ir.Op: the shim has no alias for it; partita's is partita.relay.op.Op
    tvm.ir.__dict__.setdefault("Op", sys.modules["tvm.relay"].op.Op)
    _ethosu_standins(tvm, folder)
    # DNNL's C++ layout queries (only its AlterOpLayout hooks call them)
    sys.modules["tvm.relay"].__dict__.setdefault("_ffi_api", _Unavailable("tvm.relay._ffi_api"))
    # tvm.tir.op.Op (dnnl.py's IsComputeIntensiveGraph): TVM re-exports tvm.ir.Op there
    tvm.tir.__dict__.setdefault("op", types.SimpleNamespace(Op=tvm.ir.Op))


class _Unavailable(types.ModuleType):
    """C++ functions no partitioning step calls: importable, raising if called."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def absent(*args, **kwargs):
            raise NotImplementedError(f"{self.__name__}.{name} is TVM's C++ (a stand-in here)")

        return absent


class _EthosNSupport(types.ModuleType):
    """The Ethos-N driver's support checks (C++ over the driver library): every check says
    supported, so the pattern table's own Python checks decide; the driver's post-partition
    passes are identities."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("ConvertEquivalents", "InlineNonComputeIntensivePartitions"):
            return _identity_pass(name)
        return lambda *args: True


def _ethosn_standins(tvm) -> None:
    support = _EthosNSupport("tvm.relay.op.contrib._ethosn")
    sys.modules[support.__name__] = support
    contrib = sys.modules["tvm.relay.op.contrib"]
    contrib.__dict__["_ethosn"] = support
    tvm.register_func("relay.ethos-n.query", lambda: False, override=True)  # no hardware
    tvm.register_func("relay.ethos-n.api.version", lambda: "3.2.0", override=True)
    tvm.register_func("relay.ext.ethos-n.get_compiler_attrs", lambda: None, override=True)


def _ethosu_standins(tvm, folder: str) -> None:
    """tvm.relay.backend.contrib.ethosu: TVM's own util.py (FOLDER/backend/ethosu_util.py, byte
    for byte) over stand-ins for its C++ (_ffi_api, runtime.Object); ``preprocess_ext_io`` (C++)
    and ``codegen.replicate_pads`` (a graph rewrite before the codegen; the models here have no
    pad read by two convolutions) are identities."""
    path = os.path.join(folder, "backend", "ethosu_util.py")
    if not os.path.exists(path):
        return
    pkg = "tvm.relay.backend.contrib.ethosu"
    for name in ("tvm.relay.backend.contrib", pkg):
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
    sys.modules[pkg + "._ffi_api"] = _Unavailable(pkg + "._ffi_api")
    sys.modules[pkg]._ffi_api = sys.modules[pkg + "._ffi_api"]
    tvm._ffi.register_object = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda c: c)
    tvm.runtime.__dict__["Object"] = object
    # TVM's runtime NDArray (C++): partita's Constant holds a numpy array
    tvm.nd.__dict__["array"] = lambda data, *args, **kwargs: np.asarray(data)
    spec = importlib.util.spec_from_file_location(pkg + ".util", path)
    util = importlib.util.module_from_spec(spec)
    sys.modules[pkg + ".util"] = util
    spec.loader.exec_module(util)
    pre = types.ModuleType(pkg + ".preprocess")
    pre.preprocess_ext_io = _identity_pass("PreprocessExternalIO")
    codegen = types.ModuleType(pkg + ".codegen")
    codegen.replicate_pads = lambda mod: mod
    for m in (util, pre, codegen):
        sys.modules[m.__name__] = m
        setattr(sys.modules[pkg], m.__name__.rsplit(".", 1)[1], m)


def load_module(folder: str, name: str):
    """TVM's contrib module ``name`` as ``tvm.relay.op.contrib.<name>``."""
    full = f"tvm.relay.op.contrib.{name}"
    spec = importlib.util.spec_from_file_location(
        full, os.path.join(folder, "contrib", f"{name}.py")
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[full] = mod
    spec.loader.exec_module(mod)
    return mod


def _dnnl_partitioner(contrib, form: bool = False, prune: bool = True):
    """DNNL has no ``partition_for_dnnl`` in v0.16's dnnl.py: TVM users call the sequence TVM's
    own tests/python/contrib/test_dnnl.py spells out. This is that sequence as partita.relay runs
    it, at opt_level 3: CanonicalizeOps, InferType, SimplifyInference, FoldConstant, SimplifyExpr,
    FoldConstant; dnnl.py's own rewrites (layer norm, dense+gelu, ``legalize_qnn_for_dnnl``);
    MergeComposite(dnnl.pattern_table()), AnnotateTarget("dnnl"), MergeCompilerRegions,
    PartitionGraph; dnnl.py's ``prune_dnnl_subgraphs``. Left out, as partita has no such pass:
    FoldScaleAxis (float convolutions only), Legalize with dnnl.py's group-convolution hook and
    AlterOpLayout with its layout hooks (both on ``nn.conv*``, which these int8 graphs lack).
    With ``form``, ``requantize_clip_cast`` runs before dnnl.py's rewrites; ``prune=False`` is
    test_dnnl's ``partition_for_dnnl(..., prune_subgraphs=False)``.
    Returns (partition, last): last["unpruned"] is the module before pruning, last["legalized"]
    the one MergeComposite starts from."""
    from partita.relay import transform

    last: dict = {}

    def partition(mod):
        pre = transform.Sequential(
            [
                transform.CanonicalizeOps(),
                transform.InferType(),
                transform.SimplifyInference(),
                transform.FoldConstant(),
                transform.SimplifyExpr(),
                transform.FoldConstant(),
            ]
        )
        with transform.PassContext(opt_level=3):
            mod = pre(mod)
        if form:
            mod = requantize_clip_cast(mod)
        mod = contrib.rewrite_layer_norm(mod)
        mod = contrib.rewrite_dense_bias_gelu_reshape_last(mod)
        mod = contrib.legalize_qnn_for_dnnl(mod)
        last["legalized"] = mod
        seq = transform.Sequential(
            [
                transform.MergeComposite(contrib.pattern_table()),
                transform.AnnotateTarget("dnnl"),
                transform.MergeCompilerRegions(),
                transform.PartitionGraph(),
            ]
        )
        with transform.PassContext(opt_level=3):
            mod = seq(mod)
        last["unpruned"] = mod
        return contrib.prune_dnnl_subgraphs(mod) if prune else mod

    return partition, last


def requantize_clip_cast(mod):
    """The graph TVM's PyTorch frontend gives a quantized convolution (``qnn.requantize ->
    clip -> cast``), the form dnnl.py's ``legalize_qnn_for_dnnl`` matches, made from TVM's
    TFLite graph by identities: after each ``qnn.requantize`` of a ``qnn.conv2d`` /
    ``qnn.dense`` (bias ``add`` between or not) a ``clip`` to its dtype's range where no fused
    activation clips, then ``cast`` to the same dtype. The requantize's float64 input scale
    (partita keeps TFLite's double-precision product input scale x weight scale) becomes float32,
    as TVM's TFLite frontend writes it (dnnl.py divides it by the float32 output scale). An
    experiment (``--dnnl-form``), not what TVM's TFLite frontend gives: its int8 graph has no
    such cast."""
    from partita.ir import Call, Constant
    from partita.ir.op import get_op
    from partita.ir.visitor import ExprMutator, post_order

    rq, clip, cast = get_op("qnn.requantize"), get_op("clip"), get_op("cast")
    roots = {"qnn.conv2d", "qnn.dense"}

    def of_root(x):
        if type(x) is not Call or x.op is not rq:
            return False
        a = x.args[0]
        if type(a) is Call and getattr(a.op, "name", "") in ("add", "nn.bias_add"):
            a = a.args[0]
        return type(a) is Call and getattr(a.op, "name", "") in roots

    class _Rewrite(ExprMutator):
        def __init__(self, clipped):
            super().__init__()
            self.clipped = clipped

        def rewrite_call(self, call, op, args):
            if op is rq and type(args[1]) is Constant and args[1].data.dtype == np.float64:
                args = [args[0], Constant(args[1].data.astype(np.float32)), *args[2:]]
            new = super().rewrite_call(call, op, args)
            dtype = call.checked_type.dtype
            if op is clip and of_root(call.args[0]):
                return cast(new, dtype=dtype)
            if of_root(call) and id(call) not in self.clipped:
                info = np.iinfo(dtype)
                return cast(clip(new, a_min=float(info.min), a_max=float(info.max)), dtype=dtype)
            return new

    from partita.relay import IRModule, transform

    mod = transform.InferType()(mod)
    fn = mod["main"]
    clipped = {id(x.args[0]) for x in post_order(fn) if type(x) is Call and x.op is clip}
    out = IRModule(dict(mod.functions), mod.attrs)
    out["main"] = _Rewrite(clipped).visit(fn)
    return transform.InferType()(out)


# ---- measuring ---------------------------------------------------------------------------------


def op_fraction(mod) -> tuple[int, int]:
    """(ops inside partitions, all ops) counting every op call of the partitioned module."""
    from partita.ir import Call, Function, Op
    from partita.ir.visitor import post_order

    on, total = 0, 0
    for fn in mod.functions.values():
        n = sum(1 for x in post_order(fn) if type(x) is Call and isinstance(x.op, Op))
        total += n
        if "Compiler" in fn.attrs:
            on += n
        assert isinstance(fn, Function)
    return on, total


def host_ops(mod) -> dict:
    """op name -> count of the op calls left outside every partition."""
    from partita.ir import Call, Op
    from partita.ir.visitor import post_order

    out: dict = {}
    for fn in mod.functions.values():
        if "Compiler" not in fn.attrs:
            for x in post_order(fn):
                if type(x) is Call and isinstance(x.op, Op):
                    out[x.op.name] = out.get(x.op.name, 0) + 1
    return out


def composites(mod) -> dict:
    from partita.ir import Function
    from partita.ir.visitor import post_order

    out: dict = {}
    for fn in mod.functions.values():
        for x in post_order(fn):
            if type(x) is Function and "Composite" in x.attrs:
                out[x.attrs["Composite"]] = out.get(x.attrs["Composite"], 0) + 1
    return out


def _max_lsb(a, b) -> int:
    return max(int(np.max(np.abs(x.astype(np.int64) - y.astype(np.int64)))) for x, y in zip(a, b))


def run(
    folder: str,
    module: str,
    models: list[str],
    mean: str = "tvm",
    dnnl_form: bool = False,
    dnnl_prune: bool = True,
) -> None:

    from partita import relay

    contrib = load_module(folder, module)
    names = [n for n in dir(contrib) if n.startswith("partition_for_")]
    last: dict = {}
    if names:
        partition = getattr(contrib, names[0])
    else:  # dnnl
        partition, last = _dnnl_partitioner(contrib, dnnl_form, dnnl_prune)
    for path in models:
        # the graph TVM's TFLite frontend gives (relay.frontend.tvm_graph: exact rewrites)
        mod, _ = relay.frontend.from_tflite(os.path.join(REPO, path), mean=mean)
        own, _ = relay.frontend.from_tflite(os.path.join(REPO, path), layout="tflite")
        ref = relay.IRModule(dict(mod.functions), mod.attrs)
        try:
            out = partition(relay.IRModule(dict(mod.functions), mod.attrs))
        except Exception as e:  # report and go on: one model's failure is a result too
            cause = e.__cause__ or e
            hint = ""
            if module == "ethosu" and "NumPy dtype" in str(cause):
                hint = " (ethosu.py's np.dtype(TensorParams) needs numpy 1.x, as TVM 0.16 had)"
            print(
                f"{module:8s} {os.path.basename(path):32s} FAILED: {type(cause).__name__}: "
                f"{str(cause).splitlines()[0][:300]}{hint} numpy={np.__version__}"
            )
            continue
        on, total = op_fraction(out)
        rng = np.random.default_rng(0)
        t = mod["main"].params[0].checked_type
        data = rng.integers(-128, 128, t.shape, dtype=t.dtype)
        got = relay.interpret(out, [data])
        want = relay.interpret(ref, [data])
        same = all(np.array_equal(a, b) for a, b in zip(got, want))
        tflite = all(np.array_equal(a, b) for a, b in zip(got, relay.interpret(own, [data])))
        extra = ""
        if "unpruned" in last:
            a, b = op_fraction(last.pop("unpruned"))
            extra = f" (before pruning {a}/{b})"
        if "legalized" in last:  # dnnl: its legalization is arithmetic of its own
            legal = relay.interpret(last.pop("legalized"), [data])
            exact = all(np.array_equal(a, b) for a, b in zip(got, legal))
            extra += f" partition-exact(vs legalized)={exact}"
            if not same:
                extra += f" max-diff-vs-unpartitioned={_max_lsb(got, want)}LSB"
        print(
            f"{module:8s} {os.path.basename(path):32s} on accelerator {on}/{total} "
            f"({100 * on / max(total, 1):.1f}%){extra} bit-exact={same} tflite-exact={tflite} "
            f"composites={composites(out)} host={host_ops(out)} numpy={np.__version__}",
            flush=True,
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--module", action="append", default=None)
    ap.add_argument("--model", action="append", default=None)
    ap.add_argument(
        "--mean",
        choices=("tvm", "tvm_always", "qnn"),
        default="tvm",
        help="relay.frontend.from_tflite's mean= (TFLite MEAN in TVM's form)",
    )
    ap.add_argument(
        "--dnnl-form",
        action="store_true",
        help="dnnl: first give each quantized convolution the requantize->clip->cast form "
        "legalize_qnn_for_dnnl matches (TVM's PyTorch frontend's; an experiment)",
    )
    ap.add_argument(
        "--dnnl-no-prune",
        action="store_true",
        help="dnnl: partition_for_dnnl's prune_subgraphs=False (keep every DNNL partition)",
    )
    ap.add_argument(
        "--resnet50",
        default=RESNET50,
        help="the int8 ResNet-50 tools/gen_resnet50_int8.py writes, added to the default "
        "models when the file exists (default %(default)s)",
    )
    args = ap.parse_args(argv)
    models = args.model or MODELS + ([args.resnet50] if os.path.exists(args.resnet50) else [])
    folder = os.path.abspath(args.folder)
    _install_standins(folder)
    for module in args.module or ["cmsisnn"]:
        run(
            folder,
            module,
            models,
            args.mean,
            args.dnnl_form,
            not args.dnnl_no_prune,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
